//go:build unix

package galera_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gormlock/gormlock/internal/tests/fixtures"

	"github.com/stretchr/testify/require"

	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/repository"
)

// TestLockRowIsNodeLocal shows what a pessimistic lock is on a cluster:
// node 1 holds account 1 with LockRow; a second transaction on node 1
// is kept out (NoWait: locking.ErrLocked), but one on node 2 gets the
// "lock" too, NoWait or not. Both holders write: the second to reach the
// cluster fails with locking.ErrDeadlock (not applied), so the record holds
// one write and no acknowledged write is lost.
func TestLockRowIsNodeLocal(t *testing.T) {
	n := openNodes(t)
	n.seed(t, 1)
	repos := n.accounts(t)
	ctx := context.Background()
	id := int64(1)

	err := repository.RunInTx(ctx, n.dbs[0], func(ctx context.Context) error {
		mine, err := repos[0].LockRow(ctx, id)
		if err != nil {
			return err
		}
		// The same node: the lock holds.
		same := repository.RunInTx(context.Background(), n.dbs[0], func(ctx context.Context) error {
			_, err := repos[0].LockRow(ctx, id, repository.NoWait())
			return err
		})
		require.ErrorIs(t, same, locking.ErrLocked, "NoWait on the holder's node")

		// Another node: it "locks" the row too, and commits a write.
		other := repository.RunInTx(context.Background(), n.dbs[1], func(ctx context.Context) error {
			theirs, err := repos[1].LockRow(ctx, id, repository.NoWait())
			if err != nil {
				return err
			}
			theirs.Balance = 20
			return repos[1].Update(ctx, theirs)
		})
		require.NoError(t, other, "node 2 locks and writes the row node 1 holds")
		require.EqualValues(t, 20, readInt(t, causal(t, n.dsns[0]), "SELECT balance FROM accounts WHERE id = 1"))

		mine.Balance = 10
		return repos[0].Update(ctx, mine)
	})
	require.ErrorIs(t, err, locking.ErrDeadlock, "the first holder's write, after node 2 committed")
	require.Equal(t, map[int64]int64{1: 20}, n.balances(t))
}

// TestMutateRowLockedAcrossNodes runs MutateRowLocked increments on one hot row
// from all three nodes. The row locks exclude the workers of one node only;
// across nodes the cluster refuses the losers with 1213 (on the locked
// read, the write or the COMMIT), MutateRowLocked retries them from a fresh
// transaction, and the row ends with exactly the acknowledged increments.
func TestMutateRowLockedAcrossNodes(t *testing.T) {
	workers, calls := sizes()
	n := openNodes(t)
	n.seed(t, 1)
	repos := n.accounts(t)
	before := aborts(t, rawNodes(t, n.dsns))
	n.log.reset()
	y := newTally()
	spread(t, workers, func(ctx context.Context, _, node int) error {
		for range calls {
			var triesRep repository.MutateReport
			_, err := repos[node].MutateRowLocked(ctx, int64(1), func(a *fixtures.Account) error {
				a.Balance++
				return nil
			}, repository.Report(&triesRep), repository.Retry(retryPolicy))
			switch {
			case err == nil:
				y.ack(triesRep.Attempts, 1)
			case !y.fail(err):
				return err
			}
		}
		return nil
	})
	y.check(t, "MutateRowLocked hot row", n, before, n.balances(t), true)
}

// TestClaimRefusedOnGalera: SKIP LOCKED skips only the rows locked on the
// worker's own node (TestRawLocksAreNodeLocal), so workers on two nodes
// claim the same rows; Claim refuses a cluster with locking.ErrNotSupported
// rather than hand the same job to several workers.
func TestClaimRefusedOnGalera(t *testing.T) {
	n := openNodes(t)
	n.seed(t, 3)
	repos := n.accounts(t)
	err := repository.RunInTx(context.Background(), n.dbs[0], func(ctx context.Context) error {
		_, err := repos[0].Claim(ctx, 2)
		return err
	})
	require.ErrorIs(t, err, locking.ErrNotSupported)
	t.Logf("Claim on a cluster: %v", err)
}

// jobs returns one Repository of jobs per node, with leases, and seeds
// jobs 1..count (pending) on node 1.
func (n *nodes) jobs(t *testing.T, count int) []*repository.Repository[fixtures.Job] {
	t.Helper()
	var rs []*repository.Repository[fixtures.Job]
	for _, db := range n.dbs {
		r, err := repository.New[fixtures.Job](db, repository.WithLeases())
		require.NoError(t, err)
		rs = append(rs, r)
	}
	for id := 1; id <= count; id++ {
		require.NoError(t, rs[0].Create(context.Background(), &fixtures.Job{Model: models.Model{ID: int64(id)}, Queue: "q", Status: fixtures.JobPending}))
	}
	converge(t, n.dsns)
	return rs
}

// TestLeaseRaceAcrossNodes races three owners, one per node, for the lease
// of one record, round after round: a lease is a row of gormlock_leases,
// written through the cluster's certification, so exactly one owner gets
// it each round, every node sees that owner, and the others are refused
// (locking.ErrLocked, or locking.ErrDeadlock when the acquire lost
// certification each time it tried: not granted either).
func TestLeaseRaceAcrossNodes(t *testing.T) {
	rounds := 20
	if long() {
		rounds = 100
	}
	n := openNodes(t)
	repos := n.jobs(t, rounds)
	var lockedAnswers, deadlockAnswers, unclassified atomic.Int64
	for round := 1; round <= rounds; round++ {
		id := int64(round)
		var leases [3]*repository.Lease
		spread(t, 3, func(ctx context.Context, _, node int) error {
			_, l, err := repos[node].Leases().Acquire(ctx, id, fmt.Sprintf("owner-%d", node+1), repository.TTL(20*time.Second))
			switch {
			case err == nil:
				leases[node] = l
			case errors.Is(err, locking.ErrLocked):
				lockedAnswers.Add(1)
			case errors.Is(err, locking.ErrDeadlock):
				deadlockAnswers.Add(1)
			case errNumber(err) == erDeadlock:
				unclassified.Add(1) // not granted either; failed below
			default:
				return err
			}
			return nil
		})
		var winners []int
		for node, l := range leases {
			if l != nil {
				winners = append(winners, node)
			}
		}
		require.Len(t, winners, 1, "round %d: exactly one owner holds the lease", round)
		w := winners[0]
		require.EqualValues(t, 1, leases[w].Fence)
		converge(t, n.dsns)
		for node, r := range repos {
			_, st, err := r.Leases().Get(context.Background(), id)
			require.NoError(t, err)
			require.NotNil(t, st, "node %d sees the lease", node+1)
			require.Equal(t, fmt.Sprintf("owner-%d", w+1), st.Owner, "node %d", node+1)
		}
		// The holder writes through its lease; a writer on another node is
		// kept out until the lease ends.
		other := repos[(w+1)%3]
		j, err := other.Get(context.Background(), id)
		require.NoError(t, err)
		j.Status = "stolen"
		require.ErrorIs(t, other.Update(context.Background(), j), locking.ErrLocked, "round %d", round)
		mine, err := repos[w].Get(context.Background(), id)
		require.NoError(t, err)
		mine.Status, mine.Runs, mine.DoneBy = fixtures.JobDone, mine.Runs+1, leases[w].Owner
		require.NoError(t, repos[w].Leases().Update(context.Background(), mine, leases[w]))
	}
	t.Logf("leases: %d rounds of 3 owners on 3 nodes: 1 grant per round; the others: %d ErrLocked, %d ErrDeadlock, %d unclassified 1213",
		rounds, lockedAnswers.Load(), deadlockAnswers.Load(), unclassified.Load())
	require.EqualValues(t, 2*rounds, lockedAnswers.Load()+deadlockAnswers.Load()+unclassified.Load())
	require.Zero(t, unclassified.Load(), "Leases.Acquire returned a 1213 that does not match locking.ErrDeadlock")
}

// TestWorkQueueAcrossNodes runs a queue of jobs with workers on all three
// nodes, each job's work done before its write commits (an e-mail sent, a
// call made: work the database cannot take back). With leases each job's
// work runs exactly once: a worker works only under a lease the cluster
// granted it alone. The negative control is the single-server queue, SELECT
// ... FOR UPDATE SKIP LOCKED, by hand: the cluster still commits one "done"
// per job (the other COMMITs fail with 1213), but workers on different
// nodes run the same job, which is why Claim is refused on a cluster.
func TestWorkQueueAcrossNodes(t *testing.T) {
	const jobCount = 30
	workers := 6
	for _, mode := range []string{"leases", "SKIP LOCKED (negative control)"} {
		t.Run(mode, func(t *testing.T) {
			n := openNodes(t)
			repos := n.jobs(t, jobCount)
			raw := rawNodes(t, n.dsns)
			var runs [jobCount + 1]atomic.Int64 // the work, done outside the database
			var deadlocks, unclassified atomic.Int64
			spread(t, workers, func(ctx context.Context, w, node int) error {
				owner := fmt.Sprintf("worker-%d", w)
				for {
					if mode == "leases" {
						return leaseWorker(ctx, repos[node], owner, jobCount, func(id int64) {
							runs[id].Add(1)
							time.Sleep(time.Millisecond) // the work
						}, &deadlocks, &unclassified)
					}
					var id int64
					tx, err := raw[node].BeginTx(ctx, nil)
					if err != nil {
						return err
					}
					err = tx.QueryRowContext(ctx, "SELECT id FROM jobs WHERE status = 'pending' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED").Scan(&id)
					if errors.Is(err, sql.ErrNoRows) {
						return tx.Rollback()
					}
					if err == nil {
						runs[id].Add(1)
						time.Sleep(time.Millisecond) // the work
						_, err = tx.ExecContext(ctx, "UPDATE jobs SET status = 'done', runs = runs + 1, done_by = ?, version = version + 1 WHERE id = ?", owner, id)
					}
					if err == nil {
						err = tx.Commit()
					} else {
						_ = tx.Rollback()
					}
					if errNumber(err) == erDeadlock {
						deadlocks.Add(1)
						continue
					}
					if err != nil {
						return err
					}
				}
			})
			converge(t, n.dsns)
			var dbRuns []int64
			require.NoError(t, n.dbs[2].Model(&fixtures.Job{}).Order("id").Pluck("runs", &dbRuns).Error)
			ones := make([]int64, jobCount)
			for i := range ones {
				ones[i] = 1
			}
			require.Equal(t, ones, dbRuns, "every job done once in the database")
			var total, twice int64
			for id := 1; id <= jobCount; id++ {
				total += runs[id].Load()
				if runs[id].Load() > 1 {
					twice++
				}
			}
			t.Logf("%s: %d jobs, %d workers on 3 nodes: the work ran %d times, %d jobs more than once; %d COMMITs refused with 1213",
				mode, jobCount, workers, total, twice, deadlocks.Load())
			if mode == "leases" {
				require.Zero(t, unclassified.Load(), "a lease call returned a 1213 that does not match locking.ErrDeadlock")
				require.EqualValues(t, jobCount, total, "with leases every job's work runs once")
			} else {
				require.Greater(t, total, int64(jobCount), "SKIP LOCKED across nodes must run some job twice, or the test could not catch it")
			}
		})
	}
}

// leaseWorker works the queue with leases until it sees every job done: it
// goes through the pending jobs, leases one (skipping those it cannot
// lease), works it and marks it done through its lease. A 1213 on the
// write means not applied, with the lease still held: it reads the job
// again and writes again.
//
// A 1213 that does not match locking.ErrDeadlock is counted in
// unclassified and handled as one that does.
func leaseWorker(ctx context.Context, r *repository.Repository[fixtures.Job], owner string, count int, work func(id int64), deadlocks, unclassified *atomic.Int64) error {
	isDeadlock := func(err error) bool {
		if errNumber(err) == erDeadlock && !errors.Is(err, locking.ErrDeadlock) {
			unclassified.Add(1)
			return true
		}
		return errors.Is(err, locking.ErrDeadlock)
	}
	for {
		pending := false
		for id := int64(1); id <= int64(count); id++ {
			j, err := r.Get(ctx, id)
			if err != nil {
				return err
			}
			if j.Status == fixtures.JobDone {
				continue
			}
			pending = true
			j, l, err := r.Leases().Acquire(ctx, id, owner, repository.TTL(20*time.Second))
			switch {
			case errors.Is(err, locking.ErrLocked):
				continue
			case isDeadlock(err):
				deadlocks.Add(1)
				continue
			case err != nil:
				return err
			}
			if j.Status == fixtures.JobDone {
				// Done by the lease before this one: give it back.
				if err := r.Leases().Release(ctx, l); err != nil && !isDeadlock(err) {
					return err
				}
				continue
			}
			work(id)
			for {
				j.Status, j.Runs, j.DoneBy = fixtures.JobDone, j.Runs+1, owner
				err := r.Leases().Update(ctx, j, l)
				if !isDeadlock(err) {
					if err != nil {
						return fmt.Errorf("job %d: %w", id, err)
					}
					break
				}
				deadlocks.Add(1)
				if j, err = r.Get(ctx, id); err != nil {
					return err
				}
			}
		}
		if !pending {
			return nil
		}
	}
}
