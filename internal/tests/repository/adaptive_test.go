package repository_test

import (
	"context"
	"errors"
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

// adaptiveRepo is a Repository of accounts as New gives it (adaptive
// Mutate is the default), as one process would have it.
func adaptiveRepo(t *testing.T, db *gorm.DB, opts ...repository.Option) *repository.Repository[fixtures.Account] {
	t.Helper()
	r, err := repository.New[fixtures.Account](db, opts...)
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
		rep.Waited = false // whether the locked read took longer than usual depends on the machine's load
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

// With WithAdaptive(false), Mutate stays optimistic after a conflict: the
// second attempt reads without a lock.
func TestMutateOptimisticWithAdaptiveOff(t *testing.T) {
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

// makeHot makes account id hot in r: one call loses a race to another
// repository and escalates.
func makeHot(t *testing.T, r, other *repository.Repository[fixtures.Account], id int64) {
	t.Helper()
	var rep repository.MutateReport
	_, err := r.Mutate(context.Background(), id, func(x *fixtures.Account) error { return nil }, repository.Report(&rep))
	require.NoError(t, err)
	if rep.Hot {
		return // hot already (for 500 ms after its last contention)
	}
	first := true
	_, err = r.Mutate(context.Background(), id, func(x *fixtures.Account) error {
		if first {
			first = false
			_, err := other.Mutate(context.Background(), id, func(y *fixtures.Account) error { return nil })
			require.NoError(t, err)
		}
		return nil
	}, repository.Report(&rep))
	require.NoError(t, err)
	require.True(t, rep.Escalated, "%v", rep)
}

// An fn that writes its own record through another connection, on a
// locked attempt, waits for the lock its own call holds. The call neither
// hangs nor fails silently: after 200 ms the attempt's transaction is
// rolled back, which lets fn's write go on, and the call goes on
// optimistic (Report's Released); an fn that keeps losing that way ends
// with an error that says what happened. The negative control: the same
// plain write does wait for a row lock another transaction holds.
func TestAdaptiveMutateReleasesALockFnWaitsFor(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx, cancel := context.WithTimeout(testdb.Ctx(t), 60*time.Second)
		defer cancel()
		mine, other := adaptiveRepo(t, db), adaptiveRepo(t, db)
		a := newAccount(t, other, "ann", 0)

		// fn writes another column of the record with plain GORM, which
		// leaves the version alone: once the lock is released, that write
		// goes on, and the optimistic attempt that follows succeeds.
		makeHot(t, mine, other, a.ID)
		calls := 0
		var rep repository.MutateReport
		got, err := mine.Mutate(ctx, a.ID, func(x *fixtures.Account) error {
			calls++
			if err := db.WithContext(ctx).Model(&fixtures.Account{}).Where("id = ?", x.ID).Update("owner", "bob").Error; err != nil {
				return err
			}
			x.Balance++
			return nil
		}, repository.Report(&rep))
		require.NoError(t, err)
		assert.True(t, rep.Hot)
		assert.True(t, rep.Released, "%v", rep)
		assert.Equal(t, 1, rep.Locked)
		assert.Equal(t, 2, rep.Attempts)
		assert.Equal(t, 2, calls)
		assert.Equal(t, int64(1), got.Balance)
		balance, version, _ := rawAccount(t, db, a.ID)
		assert.Equal(t, int64(1), balance)
		assert.Equal(t, got.Version, version)
		var owner string
		require.NoError(t, db.Raw("SELECT owner FROM accounts WHERE id = ?", a.ID).Scan(&owner).Error)
		assert.Equal(t, "bob", owner)

		// fn moves the version on itself every time: every attempt loses,
		// and the error says that the lock was released and why.
		makeHot(t, mine, other, a.ID)
		calls = 0
		_, err = mine.Mutate(ctx, a.ID, func(x *fixtures.Account) error {
			calls++
			return db.WithContext(ctx).Exec("UPDATE accounts SET version = version + 1 WHERE id = ?", x.ID).Error
		}, repository.Retry(locking.RetryPolicy{MaxAttempts: 4, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond}), repository.Report(&rep))
		var ex *locking.RetryExhaustedError
		require.ErrorAs(t, err, &ex)
		assert.ErrorIs(t, err, locking.ErrStaleData)
		assert.Equal(t, 4, ex.Attempts)
		assert.Equal(t, 4, calls)
		assert.ErrorContains(t, err, "the lock was released")
		assert.ErrorContains(t, err, "fn must change only the entity it is given")
		assert.True(t, rep.Released)
		assert.Equal(t, 1, rep.Locked, "after the release the call stays optimistic")

		// Negative control: the same plain write waits for a row lock that
		// another transaction holds, until its context ends.
		if db.Dialector.Name() != "sqlite" {
			h := holdLock(t, db, other, a.ID, nil)
			short, stop := context.WithTimeout(ctx, 300*time.Millisecond)
			err = db.WithContext(short).Model(&fixtures.Account{}).Where("id = ?", a.ID).Update("owner", "eve").Error
			stop()
			require.Error(t, err, "a plain write of a locked row waits for the lock")
			require.NoError(t, h.stop())
		}
	})
}

// A locked attempt of adaptive Mutate on PostgreSQL takes FOR NO KEY
// UPDATE: an fn that inserts a row referencing the record (an audit or
// line item) through another connection is not kept waiting, as it is
// with FOR UPDATE (the negative control); on MariaDB the foreign-key check
// waits for any row lock, and the lock is released as above.
func TestAdaptiveMutateLetsForeignKeyInsertsThrough(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		if db.Dialector.Name() == "sqlite" {
			t.Skip("SQLite: any other connection's write waits for the write lock")
		}
		ctx, cancel := context.WithTimeout(testdb.Ctx(t), 60*time.Second)
		defer cancel()
		require.NoError(t, db.Exec("CREATE TABLE account_notes (id BIGINT PRIMARY KEY, account_id BIGINT NOT NULL REFERENCES accounts(id))").Error)
		mine, other := adaptiveRepo(t, db), adaptiveRepo(t, db)
		a := newAccount(t, other, "ann", 0)
		makeHot(t, mine, other, a.ID)
		note := 0
		var rep repository.MutateReport
		_, err := mine.Mutate(ctx, a.ID, func(x *fixtures.Account) error {
			note++
			x.Balance++
			return db.WithContext(ctx).Exec("INSERT INTO account_notes (id, account_id) VALUES (?, ?)", note, x.ID).Error
		}, repository.Report(&rep))
		require.NoError(t, err)
		assert.Equal(t, 1, rep.Locked)
		if db.Dialector.Name() == "postgres" {
			assert.False(t, rep.Released, "FOR NO KEY UPDATE lets the insert through: %v", rep)
			assert.Equal(t, 1, note)

			// Negative control: under FOR UPDATE the same insert waits.
			err := repository.RunInTx(ctx, db, func(ctx context.Context) error {
				if _, err := mine.LockRow(ctx, a.ID); err != nil {
					return err
				}
				short, stop := context.WithTimeout(context.Background(), 300*time.Millisecond)
				defer stop()
				return db.WithContext(short).Exec("INSERT INTO account_notes (id, account_id) VALUES (100, ?)", a.ID).Error
			})
			require.Error(t, err, "an insert referencing a row locked FOR UPDATE waits")
		} else {
			assert.True(t, rep.Released, "%v", rep)
		}
		balance, _, _ := rawAccount(t, db, a.ID)
		assert.Equal(t, int64(1), balance)
	})
}

// One record, one process: writers charging it with Apply while editors
// Mutate it. With the default adaptive Mutate no editor gives up, even
// with only two attempts (a lost race takes the row lock, which Apply then
// waits for; WithAdaptive(false) gives up on some), and every change
// lands: the balance is exactly the successful Applys plus the editors'
// increments. The negative control, an unguarded read-modify-write in
// the editors' place, loses increments.
func TestAdaptiveEditorsBesideApplyWriters(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		accounts := adaptiveRepo(t, db)
		a := newAccount(t, accounts, "ann", 0)
		const writers, editors, each = 4, 4, 40
		// Two attempts: a lost race, then the locked attempt, which Apply
		// cannot overtake: it waits for the row lock.
		twoAttempts := repository.Retry(locking.RetryPolicy{MaxAttempts: 2, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond})
		var applied, edited, gaveUp atomic.Int64
		var wg sync.WaitGroup
		for range writers {
			wg.Go(func() {
				for range each {
					_, err := accounts.Apply(ctx, a.ID, []repository.Change{repository.Add("Balance", 1)})
					if assert.NoError(t, err) {
						applied.Add(1)
					}
				}
			})
		}
		for range editors {
			wg.Go(func() {
				for range each {
					_, err := accounts.Mutate(ctx, a.ID, func(x *fixtures.Account) error { x.Balance += 1000; return nil }, twoAttempts)
					switch {
					case err == nil:
						edited.Add(1)
					case errors.Is(err, locking.ErrRetriesExhausted):
						gaveUp.Add(1)
					default:
						assert.NoError(t, err)
					}
				}
			})
		}
		wg.Wait()
		assert.Zero(t, gaveUp.Load(), "no editor gives up")
		assert.Equal(t, int64(writers*each), applied.Load())
		assert.Equal(t, int64(editors*each), edited.Load())
		balance, _, _ := rawAccount(t, db, a.ID)
		assert.Equal(t, applied.Load()+1000*edited.Load(), balance)

		// Negative control: editors that read and write back without the
		// version lose the writers' increments.
		b := newAccount(t, accounts, "bob", 0)
		lost := lostUpdateRounds(t, writers, func() int64 {
			var x fixtures.Account
			assert.NoError(t, db.First(&x, b.ID).Error)
			return x.Balance
		}, func(v int64) {
			assert.NoError(t, db.Model(&fixtures.Account{}).Where("id = ?", b.ID).Update("balance", v).Error)
		})
		balance, _, _ = rawAccount(t, db, b.ID)
		assert.Equal(t, int64(writers*3)-lost, balance, "the unguarded read-modify-write loses increments")
	})
}
