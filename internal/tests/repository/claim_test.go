package repository_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gormlock/gormlock/internal/tests/fixtures"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/repository"
)

const (
	queueJobs    = 200
	queueWorkers = 4
	claimBatch   = 5
)

// enqueue creates n pending jobs in queue q and returns the repository.
func enqueue(t *testing.T, db *gorm.DB, q string, n int) *repository.Repository[fixtures.Job] {
	t.Helper()
	jobs, err := repository.New[fixtures.Job](db)
	require.NoError(t, err)
	for i := range n {
		require.NoError(t, jobs.Create(context.Background(), &fixtures.Job{Queue: q, Payload: fmt.Sprint(i), Status: fixtures.JobPending}))
	}
	return jobs
}

// runs returns how many times each job of queue q ran.
func runs(t *testing.T, db *gorm.DB, q string) map[int64]int64 {
	t.Helper()
	var rows []fixtures.Job
	require.NoError(t, db.Where("queue = ?", q).Find(&rows).Error)
	out := make(map[int64]int64, len(rows))
	for _, j := range rows {
		out[j.ID] = j.Runs
	}
	return out
}

// Four workers drain 200 jobs with Claim (FOR UPDATE SKIP LOCKED): every job
// runs exactly once, and the workers share the work instead of queueing:
// each worker's first batch stays claimed (its rows locked) until all four
// hold one, which they can only if a claim skips the rows the others
// locked. With FOR UPDATE alone the second claim would wait for the first
// transaction, which waits for it: the barrier's bound fails the test.
// (Counting jobs per worker at the end instead depended on the scheduler:
// under load two workers drained the queue before the others ran.)
func TestClaimProcessesEveryJobExactlyOnce(t *testing.T) {
	db := testdb.Open(t, "postgres")
	jobs := enqueue(t, db, "mail", queueJobs)
	var mu sync.Mutex
	seen := map[int64]string{}
	perWorker := make([]int, queueWorkers)
	start := make(chan struct{})
	var holding sync.WaitGroup // first batches claimed and still held
	holding.Add(queueWorkers)
	allHold := make(chan struct{})
	go func() { holding.Wait(); close(allHold) }()
	var g errgroup.Group
	for w := range queueWorkers {
		name := fmt.Sprintf("worker-%d", w)
		g.Go(func() error {
			<-start
			for first := true; ; first = false {
				n := 0
				err := repository.RunInTx(context.Background(), db, func(ctx context.Context) error {
					claimed, err := jobs.Claim(ctx, claimBatch,
						repository.Where("queue = ? AND status = ?", "mail", fixtures.JobPending))
					if err != nil {
						return err
					}
					n = len(claimed)
					if first {
						if n == 0 {
							return fmt.Errorf("%s claimed nothing while the others held %d of %d jobs: the workers queued instead of sharing",
								name, (queueWorkers-1)*claimBatch, queueJobs)
						}
						holding.Done()
						select {
						case <-allHold:
						case <-time.After(time.Minute):
							return fmt.Errorf("%s held its first batch for a minute and not every worker got one: the workers queued instead of sharing", name)
						}
					}
					for i := range claimed {
						j := &claimed[i]
						time.Sleep(200 * time.Microsecond) // the work
						j.Runs++
						j.Status = fixtures.JobDone
						j.DoneBy = name
						if err := jobs.Update(ctx, j); err != nil {
							return err
						}
					}
					mu.Lock()
					defer mu.Unlock()
					for _, j := range claimed {
						if prev, dup := seen[j.ID]; dup {
							return fmt.Errorf("job %d claimed by %s and %s", j.ID, prev, name)
						}
						seen[j.ID] = name
						perWorker[w]++
					}
					return nil
				})
				if err != nil {
					return err
				}
				if n == 0 {
					return nil
				}
			}
		})
	}
	close(start)
	require.NoError(t, g.Wait())
	require.Len(t, seen, queueJobs)
	got := runs(t, db, "mail")
	require.Len(t, got, queueJobs)
	for id, n := range got {
		require.EqualValues(t, 1, n, "job %d ran %d times", id, n)
	}
	var pending int64
	require.NoError(t, db.Raw("SELECT count(*) FROM jobs WHERE status <> ?", fixtures.JobDone).Scan(&pending).Error)
	assert.Zero(t, pending)
	for w, n := range perWorker {
		assert.GreaterOrEqual(t, n, claimBatch, "worker %d: its first batch is counted", w)
	}
	t.Logf("jobs per worker: %v", perWorker)
}

// Negative control: the same workers reading pending jobs without locks run
// some jobs more than once.
func TestUnlockedQueueReadRunsJobsTwice(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		jobs := enqueue(t, db, "mail", queueJobs)
		start := make(chan struct{})
		var g errgroup.Group
		for w := range queueWorkers {
			g.Go(func() error {
				<-start
				for {
					pending, err := jobs.Find(context.Background(),
						repository.Where("queue = ? AND status = ?", "mail", fixtures.JobPending), repository.Limit(claimBatch))
					if err != nil {
						return err
					}
					if len(pending) == 0 {
						return nil
					}
					for _, j := range pending {
						time.Sleep(200 * time.Microsecond) // the work
						if err := db.Exec("UPDATE jobs SET runs = runs + 1, status = ?, done_by = ? WHERE id = ?",
							fixtures.JobDone, fmt.Sprint(w), j.ID).Error; err != nil {
							return err
						}
					}
				}
			})
		}
		close(start)
		require.NoError(t, g.Wait())
		var total, twice int64
		for _, n := range runs(t, db, "mail") {
			total += n
			if n > 1 {
				twice++
			}
		}
		require.Positive(t, twice, "without locks some jobs must run more than once")
		t.Logf("unlocked queue: %d runs for %d jobs, %d jobs ran more than once", total, queueJobs, twice)
	})
}

// Claim validates its arguments before any I/O.
func TestClaimRefusesBadArguments(t *testing.T) {
	db := testdb.Open(t, "postgres")
	jobs := enqueue(t, db, "mail", 1)
	require.NoError(t, repository.RunInTx(context.Background(), db, func(ctx context.Context) error {
		_, err := jobs.Claim(ctx, 0)
		require.ErrorContains(t, err, "n must be positive")
		_, err = jobs.Claim(ctx, 1, repository.OrderBy("nope", false))
		require.ErrorContains(t, err, `no column "nope"`)
		got, err := jobs.Claim(ctx, 10, repository.Where("queue = ?", "other"))
		require.NoError(t, err)
		assert.Empty(t, got)
		return nil
	}))
}
