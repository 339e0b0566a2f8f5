package repository_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gormlock/gormlock/internal/tests/fixtures"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

const (
	stressWorkers    = 16
	stressIncrements = 100
	stressRows       = 4
)

// stress runs stressWorkers goroutines, released together, each doing
// stressIncrements increments spread over stressRows accounts with inc, and
// returns how many increments inc reported as done and the sum of balances.
func stress(t *testing.T, db *gorm.DB, accounts *repository.Repository[fixtures.Account], inc func(ctx context.Context, id int64) error) (done, sum int64) {
	t.Helper()
	ctx := context.Background()
	ids := make([]int64, stressRows)
	for i := range ids {
		ids[i] = newAccount(t, accounts, "stress", 0).ID
	}
	start := make(chan struct{})
	var g errgroup.Group
	var ok atomic.Int64
	for w := range stressWorkers {
		g.Go(func() error {
			<-start
			for i := range stressIncrements {
				if err := inc(ctx, ids[(w+i)%stressRows]); err != nil {
					return err
				}
				ok.Add(1)
			}
			return nil
		})
	}
	close(start)
	require.NoError(t, g.Wait())
	require.NoError(t, db.Raw("SELECT COALESCE(SUM(balance), 0) FROM accounts WHERE owner = 'stress'").Scan(&sum).Error)
	return ok.Load(), sum
}

// The lost-update stress: every Mutate increment survives, and the versions
// count every write.
//
// The workers use four Repository instances, as four processes would: each
// queues its own callers (see TestMutateQueuesCallersOfOneRecord), so the
// instances race each other and the retry path is exercised.
func TestMutateLosesNoIncrement(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		var instances []*repository.Repository[fixtures.Account]
		for range 4 {
			r, err := repository.New[fixtures.Account](db, repository.WithRetryPolicy(
				locking.RetryPolicy{MaxAttempts: 1000, BaseDelay: time.Millisecond, MaxDelay: 50 * time.Millisecond}))
			require.NoError(t, err)
			instances = append(instances, r)
		}
		accounts := instances[0]
		var attempts, calls atomic.Int64
		done, sum := stress(t, db, accounts, func(ctx context.Context, id int64) error {
			var rep repository.MutateReport
			_, err := instances[calls.Add(1)%4].Mutate(ctx, id, func(a *fixtures.Account) error {
				a.Balance++
				return nil
			}, repository.Report(&rep))
			attempts.Add(int64(rep.Attempts))
			return err
		})
		require.EqualValues(t, stressWorkers*stressIncrements, done)
		require.Equal(t, done, sum, "final sum == successful increments")
		require.Greater(t, attempts.Load(), done, "the instances raced, and some attempts were retried")
		t.Logf("%d increments, %d attempts (%.2f per increment)", done, attempts.Load(), float64(attempts.Load())/float64(done))
	})
}

// One Repository queues its own callers of a record instead of letting them
// race: every increment succeeds at its first attempt.
func TestMutateQueuesCallersOfOneRecord(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		accounts, _ := repos(t, db)
		var attempts atomic.Int64
		done, sum := stress(t, db, accounts, func(ctx context.Context, id int64) error {
			var rep repository.MutateReport
			_, err := accounts.Mutate(ctx, id, func(a *fixtures.Account) error {
				a.Balance++
				return nil
			}, repository.Report(&rep))
			attempts.Add(int64(rep.Attempts))
			return err
		})
		require.Equal(t, done, sum)
		require.Equal(t, done, attempts.Load(), "one attempt per increment")
	})
}

// Negative control: the same workload as a plain read-modify-write, with no
// version guard, loses increments. It proves the stress above can fail.
func TestUnguardedReadModifyWriteLosesIncrements(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		accounts, _ := repos(t, db)
		done, sum := stress(t, db, accounts, func(ctx context.Context, id int64) error {
			a, err := accounts.Get(ctx, id)
			if err != nil {
				return err
			}
			time.Sleep(50 * time.Microsecond) // the window every real handler has between read and write
			return db.WithContext(ctx).Model(&fixtures.Account{}).Where("id = ?", id).Update("balance", a.Balance+1).Error
		})
		require.EqualValues(t, stressWorkers*stressIncrements, done)
		require.Less(t, sum, done, "unguarded writes must lose increments")
		t.Logf("unguarded: %d increments reported, %d kept, %d lost", done, sum, done-sum)
	})
}
