package repository_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gormlock/gormlock/internal/tests/fixtures"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

// adaptiveRepo is a Repository of accounts with adaptive Mutate, as one
// process would have it.
func adaptiveRepo(t *testing.T, db *gorm.DB, opts ...repository.Option) *repository.Repository[fixtures.Account] {
	t.Helper()
	r, err := repository.New[fixtures.Account](db, append([]repository.Option{repository.WithAdaptive(true)}, opts...)...)
	require.NoError(t, err)
	return r
}

// A lost race makes Mutate take the row lock for the next attempt, at
// once; the record then stays hot, so the next call starts locked; after a
// while without contention it cools and Mutate is optimistic again.
func TestAdaptiveMutateEscalatesAndCools(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		mine, other := adaptiveRepo(t, db), adaptiveRepo(t, db) // two processes
		a := newAccount(t, other, "ann", 0)

		// First call: another process writes between the read and the
		// write of the first attempt.
		calls := 0
		var rep repository.MutateReport
		got, err := mine.Mutate(ctx, a.ID, func(x *fixtures.Account) error {
			calls++
			if calls == 1 {
				_, err := other.Mutate(context.Background(), a.ID, func(y *fixtures.Account) error { y.Balance += 100; return nil })
				require.NoError(t, err)
			}
			x.Balance++
			return nil
		}, repository.Report(&rep))
		require.NoError(t, err)
		assert.Equal(t, int64(101), got.Balance, "the locked attempt read the other write")
		assert.Equal(t, 2, calls, "fn ran again only after the conflict")
		assert.Equal(t, repository.MutateReport{Table: "accounts", ID: a.ID, Op: "mutate", Attempts: 2, Locked: 1, Escalated: true}, rep)

		// Second call: the record is hot, so it starts locked.
		got, err = mine.Mutate(ctx, a.ID, func(x *fixtures.Account) error { x.Balance++; return nil }, repository.Report(&rep))
		require.NoError(t, err)
		assert.Equal(t, int64(102), got.Balance)
		assert.Equal(t, 1, rep.Attempts)
		assert.Equal(t, 1, rep.Locked)
		assert.True(t, rep.Hot)
		assert.False(t, rep.Escalated)

		// Another repository never saw the conflict: optimistic.
		_, err = other.Mutate(ctx, a.ID, func(x *fixtures.Account) error { x.Balance++; return nil }, repository.Report(&rep))
		require.NoError(t, err)
		assert.Equal(t, 0, rep.Locked)
		assert.False(t, rep.Hot)

		// Without contention the record cools.
		time.Sleep(600 * time.Millisecond)
		got, err = mine.Mutate(ctx, a.ID, func(x *fixtures.Account) error { x.Balance++; return nil }, repository.Report(&rep))
		require.NoError(t, err)
		assert.Equal(t, int64(104), got.Balance)
		assert.Equal(t, repository.MutateReport{Table: "accounts", ID: a.ID, Op: "mutate", Attempts: 1}, rep)

		balance, version, _ := rawAccount(t, db, a.ID)
		assert.Equal(t, int64(104), balance)
		assert.Equal(t, got.Version, version)
	})
}

// Without WithAdaptive, Mutate stays optimistic after a conflict: the
// second attempt reads without a lock.
func TestMutateIsOptimisticByDefault(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		plain, other := adaptiveRepo(t, db, repository.WithAdaptive(false)), adaptiveRepo(t, db)
		a := newAccount(t, other, "ann", 0)
		calls := 0
		var rep repository.MutateReport
		_, err := plain.Mutate(ctx, a.ID, func(x *fixtures.Account) error {
			calls++
			if calls == 1 {
				_, err := other.Mutate(context.Background(), a.ID, func(y *fixtures.Account) error { y.Balance += 100; return nil })
				require.NoError(t, err)
			}
			x.Balance++
			return nil
		}, repository.Report(&rep))
		require.NoError(t, err)
		assert.Equal(t, repository.MutateReport{Table: "accounts", ID: a.ID, Op: "mutate", Attempts: 2}, rep)
	})
}

// A hot record's locked read that waits for another transaction's row lock
// is evidence the record is still contended (not on SQLite, whose one
// write lock says nothing about a record).
func TestAdaptiveMutateNoticesLockWaits(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		if db.Dialector.Name() == "sqlite" {
			t.Skip("SQLite: a wait for its write lock is not evidence about a record")
		}
		ctx := testdb.Ctx(t)
		mine, other := adaptiveRepo(t, db), adaptiveRepo(t, db)
		a := newAccount(t, other, "ann", 0)
		// Make the record hot in mine, and measure a few uncontended locks.
		calls := 0
		_, err := mine.Mutate(ctx, a.ID, func(x *fixtures.Account) error {
			calls++
			if calls == 1 {
				_, err := other.Mutate(context.Background(), a.ID, func(y *fixtures.Account) error { y.Balance++; return nil })
				require.NoError(t, err)
			}
			x.Balance++
			return nil
		})
		require.NoError(t, err)
		for range 5 {
			_, err := mine.Mutate(ctx, a.ID, func(x *fixtures.Account) error { x.Balance++; return nil })
			require.NoError(t, err)
		}
		// Another transaction holds the row lock; the hot Mutate waits.
		h := holdLock(t, db, other, a.ID, nil)
		var rep repository.MutateReport
		done := make(chan error, 1)
		go func() {
			_, err := mine.Mutate(ctx, a.ID, func(x *fixtures.Account) error { x.Balance++; return nil }, repository.Report(&rep))
			done <- err
		}()
		select {
		case err := <-done:
			t.Fatalf("returned while the lock was held: %v %v", err, rep)
		case <-time.After(300 * time.Millisecond):
		}
		waitBlocked(t, db, h)
		require.NoError(t, h.stop())
		require.NoError(t, <-done)
		assert.True(t, rep.Hot)
		assert.True(t, rep.Waited, "a locked read that waited for another transaction's lock: %v", rep)
		balance, _, _ := rawAccount(t, db, a.ID)
		assert.Equal(t, int64(8), balance)
	})
}

// No increment is lost when adaptive repositories — four "processes" —
// hammer one record, some calls escalating; the same workload without
// the guard loses increments.
func TestAdaptiveMutateLosesNoIncrement(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		policy := repository.WithRetryPolicy(locking.RetryPolicy{MaxAttempts: 1000, BaseDelay: time.Millisecond, MaxDelay: 20 * time.Millisecond})
		var repos []*repository.Repository[fixtures.Account]
		var escalated, attempts atomic.Int64
		hook := repository.WithMutateHook(func(_ context.Context, rep repository.MutateReport) {
			attempts.Add(int64(rep.Attempts))
			if rep.Escalated {
				escalated.Add(1)
			}
		})
		for range 4 {
			repos = append(repos, adaptiveRepo(t, db, policy, hook))
		}
		a := newAccount(t, repos[0], "ann", 0)
		const workers, each = 8, 25
		var ok atomic.Int64
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for range each {
					_, err := repos[w%4].Mutate(ctx, a.ID, func(x *fixtures.Account) error { x.Balance++; return nil })
					if assert.NoError(t, err) {
						ok.Add(1)
					}
				}
			})
		}
		wg.Wait()
		balance, _, _ := rawAccount(t, db, a.ID)
		require.Equal(t, int64(workers*each), ok.Load())
		assert.Equal(t, ok.Load(), balance, "final balance == successful increments")
		t.Logf("%d increments, %d attempts, %d calls escalated", ok.Load(), attempts.Load(), escalated.Load())

		// Negative control: read, add one, write back without the guard.
		b := newAccount(t, repos[0], "bob", 0)
		lost := lostUpdateRounds(t, workers, func() int64 {
			var x fixtures.Account
			assert.NoError(t, db.First(&x, b.ID).Error)
			return x.Balance
		}, func(v int64) {
			assert.NoError(t, db.Model(&fixtures.Account{}).Where("id = ?", b.ID).Update("balance", v).Error)
		})
		balance, _, _ = rawAccount(t, db, b.ID)
		assert.Less(t, balance, int64(workers*3), "the unguarded read-modify-write loses increments")
		assert.Equal(t, int64(workers*3)-lost, balance)
	})
}

// lostUpdateRounds runs 3 rounds of workers goroutines that each read a
// counter, wait until all have read, and write back what they read plus
// one: every round, all but one increment is lost, whatever the timing.
// It returns the increments lost.
func lostUpdateRounds(t *testing.T, workers int, read func() int64, write func(int64)) int64 {
	t.Helper()
	for range 3 {
		var read1, wrote sync.WaitGroup
		read1.Add(workers)
		for range workers {
			wrote.Go(func() {
				v := read()
				read1.Done()
				read1.Wait()
				write(v + 1)
			})
		}
		wrote.Wait()
	}
	return int64(3 * (workers - 1))
}

// WithMutateHook sees every call, failures included, and Report and
// WithMutateHook refuse nil.
func TestMutateHookAndReport(t *testing.T) {
	db := testdb.Open(t, "sqlite")
	var seen []repository.MutateReport
	r := adaptiveRepo(t, db, repository.WithMutateHook(func(_ context.Context, rep repository.MutateReport) { seen = append(seen, rep) }))
	a := newAccount(t, r, "ann", 0)
	ctx := context.Background()
	_, err := r.Mutate(ctx, a.ID, func(x *fixtures.Account) error { x.Balance++; return nil })
	require.NoError(t, err)
	_, err = r.Mutate(ctx, int64(999), func(x *fixtures.Account) error { return nil })
	require.ErrorIs(t, err, locking.ErrNotFound)
	_, err = r.MutateRowLocked(ctx, a.ID, func(x *fixtures.Account) error { x.Balance++; return nil })
	require.NoError(t, err)
	require.Len(t, seen, 3)
	assert.Equal(t, repository.MutateReport{Table: "accounts", ID: a.ID, Op: "mutate", Attempts: 1}, seen[0])
	assert.Equal(t, 1, seen[1].Attempts)
	assert.ErrorIs(t, seen[1].Err, locking.ErrNotFound)
	assert.Equal(t, repository.MutateReport{Table: "accounts", ID: a.ID, Op: "mutateRowLocked", Attempts: 1, Locked: 1}, seen[2])
	assert.Contains(t, seen[2].String(), "mutateRowLocked accounts id=")

	_, err = r.Mutate(ctx, a.ID, func(x *fixtures.Account) error { return nil }, repository.Report(nil))
	require.ErrorIs(t, err, locking.ErrInvalidArgument)
	_, err = repository.New[fixtures.Account](db, repository.WithMutateHook(nil))
	require.ErrorIs(t, err, locking.ErrInvalidArgument)
}
