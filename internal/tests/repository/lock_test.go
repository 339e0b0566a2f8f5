package repository_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/repository"
)

// holder keeps record id locked in a transaction of its own until release
// is called; release commits and waits for the commit.
type holder struct {
	pid      int64 // server session (PostgreSQL backend, MariaDB connection) of the holding transaction
	release  chan struct{}
	done     chan error
	commitAt atomic.Int64 // event number of the commit, see seq
	stopOnce sync.Once
	err      error
}

// seq numbers events across goroutines, to check their order without
// timing anything.
var seq atomic.Int64

func holdLock(t *testing.T, db *gorm.DB, accounts *repository.Repository[fixtures.Account], id int64, before func(context.Context, *fixtures.Account) error) *holder {
	t.Helper()
	h := &holder{release: make(chan struct{}), done: make(chan error, 1)}
	locked := make(chan error, 1)
	go func() {
		h.done <- repository.RunInTx(context.Background(), db, func(ctx context.Context) error {
			a, err := accounts.LockRow(ctx, id)
			if err != nil {
				locked <- err
				return err
			}
			if pidSQL := map[string]string{"postgres": "SELECT pg_backend_pid()", "mysql": "SELECT CONNECTION_ID()"}[db.Dialector.Name()]; pidSQL != "" {
				if err := accounts.DB(ctx).Raw(pidSQL).Scan(&h.pid).Error; err != nil {
					locked <- err
					return err
				}
			}
			if before != nil {
				if err := before(ctx, a); err != nil {
					locked <- err
					return err
				}
			}
			locked <- nil
			<-h.release
			h.commitAt.Store(seq.Add(1)) // COMMIT follows; its effect is checked below
			return nil
		})
	}()
	require.NoError(t, <-locked)
	t.Cleanup(func() { h.stop() })
	return h
}

// stop releases the lock and returns the holder's transaction result.
func (h *holder) stop() error {
	h.stopOnce.Do(func() {
		close(h.release)
		h.err = <-h.done
	})
	return h.err
}

// waitBlocked waits until a server session is blocked by the holder's
// transaction. SQLite cannot report waiters; there it gives the waiter a
// moment to reach the lock, and the test's ordering check still holds (a
// waiter that was late is merely not tested for waiting).
func waitBlocked(t *testing.T, db *gorm.DB, h *holder) {
	t.Helper()
	blocked := map[string]string{
		"postgres": "SELECT count(*) FROM pg_stat_activity WHERE ? = ANY(pg_blocking_pids(pid))",
		// A statement of this test's database other than the holder's
		// that has run for 50 ms: waiting for the lock (MariaDB's
		// innodb_trx and innodb_lock_waits are snapshots that can miss it).
		"mysql": `SELECT count(*) FROM information_schema.processlist
			WHERE db = DATABASE() AND command IN ('Query', 'Execute') AND info IS NOT NULL
			AND id <> ? AND id <> CONNECTION_ID() AND time_ms >= 50`,
	}[db.Dialector.Name()]
	if blocked == "" {
		time.Sleep(100 * time.Millisecond)
		return
	}
	require.Eventually(t, func() bool {
		var n int64
		require.NoError(t, db.Raw(blocked, h.pid).Scan(&n).Error)
		return n > 0
	}, 10*time.Second, 5*time.Millisecond, "the second locker never blocked on the first")
}

// A second locker waits for the first to commit, and then sees its write.
func TestSecondLockerWaitsForFirst(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		accounts, _ := repos(t, db)
		a := newAccount(t, accounts, "ann", 10)
		h := holdLock(t, db, accounts, a.ID, func(ctx context.Context, locked *fixtures.Account) error {
			locked.Balance = 99
			return accounts.Update(ctx, locked)
		})

		type result struct {
			a   *fixtures.Account
			err error
			at  int64
		}
		got := make(chan result, 1)
		go func() {
			b, err := accounts.MutateRowLocked(context.Background(), a.ID, func(b *fixtures.Account) error {
				b.Balance++
				return nil
			})
			got <- result{b, err, seq.Add(1)}
		}()
		waitBlocked(t, db, h)
		select {
		case r := <-got:
			t.Fatalf("the second locker returned while the first held the lock: %+v", r)
		default:
		}
		require.NoError(t, h.stop())
		r := <-got
		require.NoError(t, r.err)
		assert.Greater(t, r.at, h.commitAt.Load(), "the second locker returned after the first committed")
		assert.EqualValues(t, 100, r.a.Balance, "the second locker read the first one's committed write")
		assert.Greater(t, r.a.Version, a.Version)
		requireRow(t, db, a.ID, 100, r.a.Version)
	})
}

// NOWAIT fails at once with ErrLocked, and writes nothing.
func TestNoWaitFailsWithErrLocked(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		accounts, _ := repos(t, db)
		a := newAccount(t, accounts, "ann", 10)
		h := holdLock(t, db, accounts, a.ID, nil)
		start := time.Now()
		_, err := accounts.MutateRowLocked(context.Background(), a.ID, func(b *fixtures.Account) error {
			b.Balance++
			return nil
		}, repository.NoWait())
		elapsed := time.Since(start)
		require.ErrorIs(t, err, locking.ErrLocked)
		require.NotErrorIs(t, err, locking.ErrLockTimeout)
		// The databases wait up to 10 s for a lock by default (SQLite's
		// busy_timeout, and the holder never lets go): returning well before
		// that shows NOWAIT did not wait.
		assert.Less(t, elapsed, 5*time.Second)
		require.NoError(t, h.stop())
		requireRow(t, db, a.ID, 10, a.Version)
	})
}

// On PostgreSQL NOWAIT works inside the caller's own transaction too.
func TestLockRowNoWaitInTransaction(t *testing.T) {
	db := testdb.Open(t, "postgres")
	accounts, _ := repos(t, db)
	a := newAccount(t, accounts, "ann", 10)
	h := holdLock(t, db, accounts, a.ID, nil)
	err := repository.RunInTx(context.Background(), db, func(ctx context.Context) error {
		_, err := accounts.LockRow(ctx, a.ID, repository.NoWait())
		return err
	})
	require.ErrorIs(t, err, locking.ErrLocked)
	assert.Equal(t, "55P03", locking.Code(err))
	require.NoError(t, h.stop())
}

// A lock timeout gives ErrLockTimeout (not ErrLocked) after about that long.
func TestLockTimeoutGivesErrLockTimeout(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		accounts, _ := repos(t, db)
		a := newAccount(t, accounts, "ann", 10)
		h := holdLock(t, db, accounts, a.ID, nil)
		_, err := accounts.MutateRowLocked(context.Background(), a.ID, func(b *fixtures.Account) error {
			b.Balance++
			return nil
		}, repository.LockTimeout(50*time.Millisecond))
		require.ErrorIs(t, err, locking.ErrLockTimeout)
		require.NotErrorIs(t, err, locking.ErrLocked)
		var de *locking.DatabaseError
		require.ErrorAs(t, err, &de)
		assert.Contains(t, []string{"55P03", "SQLITE_BUSY", "1969"}, de.Code)
		require.NoError(t, h.stop())
		requireRow(t, db, a.ID, 10, a.Version)
	})
}

// The lock options change the session only for the locked read:
// PostgreSQL's lock_timeout, MariaDB's max_statement_time and SQLite's
// busy_timeout are back to what they were.
func TestLockOptionsRestoreSessionSettings(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		accounts, _ := repos(t, db)
		a := newAccount(t, accounts, "ann", 10)
		setting := map[string]string{
			"postgres": "SHOW lock_timeout",
			"sqlite":   "PRAGMA busy_timeout",
			"mysql":    "SELECT @@max_statement_time",
		}[db.Dialector.Name()]
		read := func(ctx context.Context) string {
			var v string
			require.NoError(t, accounts.DB(ctx).Raw(setting).Scan(&v).Error)
			return v
		}
		for _, opt := range []repository.LockOption{repository.NoWait(), repository.LockTimeout(1500 * time.Microsecond)} {
			require.NoError(t, repository.RunInTx(context.Background(), db, func(ctx context.Context) error {
				before := read(ctx)
				_, err := accounts.LockRow(ctx, a.ID, opt)
				require.NoError(t, err)
				assert.Equal(t, before, read(ctx))
				_, err = accounts.LockRow(ctx, int64(9999), opt)
				require.ErrorIs(t, err, locking.ErrNotFound)
				assert.Equal(t, before, read(ctx), "restored after a locked read that found no row")
				return nil
			}))
		}
		// MutateRowLocked's dedicated connection goes back to the pool with its
		// busy_timeout restored: with one connection, the next user gets it.
		sqlDB, err := db.DB()
		require.NoError(t, err)
		sqlDB.SetMaxOpenConns(1)
		before := read(context.Background())
		_, err = accounts.MutateRowLocked(context.Background(), a.ID, func(*fixtures.Account) error { return nil }, repository.NoWait())
		require.NoError(t, err)
		assert.Equal(t, before, read(context.Background()))
	})
}

// A locked read outside a transaction would lock nothing: it is an error.
func TestLockedReadNeedsTransaction(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		accounts, _ := repos(t, db)
		a := newAccount(t, accounts, "ann", 10)
		ctx := context.Background()
		_, err := accounts.LockRow(ctx, a.ID)
		require.ErrorIs(t, err, locking.ErrInvalidArgument)
		assert.Contains(t, err.Error(), "needs a transaction")
		_, err = accounts.LockRows(ctx, []any{a.ID})
		require.ErrorIs(t, err, locking.ErrInvalidArgument)
		if db.Dialector.Name() != "sqlite" {
			_, err = accounts.Claim(ctx, 1)
			require.ErrorIs(t, err, locking.ErrInvalidArgument)
		}
	})
}

// SQLite cannot honour SKIP LOCKED or a shared lock: it says so, and never
// drops the option.
func TestSQLiteRefusesWhatItCannotLock(t *testing.T) {
	db := testdb.Open(t, "sqlite")
	accounts, _ := repos(t, db)
	a := newAccount(t, accounts, "ann", 10)
	err := repository.RunInTx(context.Background(), db, func(ctx context.Context) error {
		_, err := accounts.Claim(ctx, 5)
		require.ErrorIs(t, err, locking.ErrNotSupported)
		assert.Contains(t, err.Error(), "SKIP LOCKED on sqlite")
		_, err = accounts.LockRow(ctx, a.ID, repository.ForShare())
		require.ErrorIs(t, err, locking.ErrNotSupported)
		assert.Contains(t, err.Error(), "FOR SHARE on sqlite")
		_, err = accounts.LockRows(ctx, []any{a.ID}, repository.ForShare())
		require.ErrorIs(t, err, locking.ErrNotSupported)
		return nil
	})
	require.NoError(t, err)
}

// On SQLite RunInTx holds the database's write lock from BEGIN, even on a
// database opened with deferred transactions (not with opendb): another
// writer cannot get in until it ends, and a locked read inside never has to
// upgrade. A read-only transaction takes no lock, and cannot lock.
func TestSQLiteTransactionsHoldTheWriteLockFromBegin(t *testing.T) {
	path := t.TempDir() + "/deferred.db"
	db, err := gorm.Open(sqlite.Open("file:"+path+"?_journal_mode=WAL&_busy_timeout=0&_txlock=deferred"), &gorm.Config{})
	require.NoError(t, err)
	require.NoError(t, fixtures.Migrate(context.Background(), db))
	t.Cleanup(func() { _ = fixtures.Close(db) })
	accounts, _ := repos(t, db)
	a := newAccount(t, accounts, "ann", 10)
	other := testdb.RawSQLite(t, path, "_busy_timeout=0")

	require.NoError(t, repository.RunInTx(context.Background(), db, func(ctx context.Context) error {
		_, err := other.Exec("UPDATE accounts SET balance = 2 WHERE id = ?", a.ID)
		require.ErrorIs(t, locking.Classify(err), locking.ErrLocked, "RunInTx took the write lock at BEGIN")
		_, err = accounts.LockRow(ctx, a.ID)
		require.NoError(t, err)
		return nil
	}))
	require.NoError(t, repository.RunInTx(context.Background(), db, func(ctx context.Context) error {
		_, err := other.Exec("UPDATE accounts SET balance = 1 WHERE id = ?", a.ID)
		require.NoError(t, err, "a read-only transaction blocks nobody")
		_, err = accounts.LockRow(ctx, a.ID)
		require.ErrorIs(t, err, locking.ErrInvalidArgument)
		require.ErrorContains(t, err, "read-only transaction cannot lock")
		return nil
	}, &sql.TxOptions{ReadOnly: true}))
}

// A shared lock lets other shared lockers in and keeps writers out.
func TestForShareOnPostgres(t *testing.T) {
	db := testdb.Open(t, "postgres")
	accounts, _ := repos(t, db)
	a := newAccount(t, accounts, "ann", 10)
	ready := make(chan struct{})
	release := make(chan struct{})
	holderErr := make(chan error, 1)
	go func() {
		holderErr <- repository.RunInTx(context.Background(), db, func(ctx context.Context) error {
			if _, err := accounts.LockRow(ctx, a.ID, repository.ForShare()); err != nil {
				return err
			}
			close(ready)
			<-release
			return nil
		})
	}()
	<-ready
	require.NoError(t, repository.RunInTx(context.Background(), db, func(ctx context.Context) error {
		_, err := accounts.LockRow(ctx, a.ID, repository.ForShare(), repository.NoWait())
		return err
	}), "a second shared lock is granted at once")
	_, err := accounts.MutateRowLocked(context.Background(), a.ID, func(b *fixtures.Account) error { b.Balance++; return nil },
		repository.NoWait())
	require.ErrorIs(t, err, locking.ErrLocked, "a writer is kept out")
	close(release)
	require.NoError(t, <-holderErr)
	requireRow(t, db, a.ID, 10, a.Version)
}

// The lost-update stress in pessimistic mode: every increment survives with
// one attempt each (nobody retries: they queue on the lock). The negative
// control is TestUnguardedReadModifyWriteLosesIncrements, the same workload
// without a lock or a guard.
func TestMutateRowLockedLosesNoIncrement(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		accounts, _ := repos(t, db)
		var attempts atomic.Int64
		done, sum := stress(t, db, accounts, func(ctx context.Context, id int64) error {
			var rep repository.MutateReport
			_, err := accounts.MutateRowLocked(ctx, id, func(a *fixtures.Account) error {
				a.Balance++
				return nil
			}, repository.Report(&rep))
			attempts.Add(int64(rep.Attempts))
			return err
		})
		require.EqualValues(t, stressWorkers*stressIncrements, done)
		require.Equal(t, done, sum, "final sum == successful increments")
		require.Equal(t, done, attempts.Load(), "one attempt per increment")
	})
}

// Two transactions lock the same two records, given in opposite orders, 100
// times: LockRows takes the locks in key order, so they never deadlock.
func TestOppositeOrderLockingNeverDeadlocks(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		accounts, _ := repos(t, db)
		a := newAccount(t, accounts, "a", 0)
		b := newAccount(t, accounts, "b", 0)
		orders := [2][]any{{a.ID, b.ID}, {b.ID, a.ID}}
		const rounds = 100
		for range rounds {
			start := make(chan struct{})
			var g errgroup.Group
			for _, ids := range orders {
				g.Go(func() error {
					<-start
					return repository.RunInTx(context.Background(), db, func(ctx context.Context) error {
						locked, err := accounts.LockRows(ctx, ids)
						if err != nil {
							return err
						}
						if len(locked) != 2 || locked[0].ID != min(a.ID, b.ID) {
							return errors.New("not returned in key order")
						}
						for i := range locked {
							locked[i].Balance++
						}
						return accounts.UpdateMany(ctx, []*fixtures.Account{&locked[1], &locked[0]})
					})
				})
			}
			close(start)
			require.NoError(t, g.Wait())
		}
		balance, _, _ := rawAccount(t, db, a.ID)
		require.EqualValues(t, 2*rounds, balance)
		balance, _, _ = rawAccount(t, db, b.ID)
		require.EqualValues(t, 2*rounds, balance)
	})
}

// Negative control: locking the same two rows one at a time in opposite
// orders deadlocks, and PostgreSQL's error is classified as a retryable
// ErrDeadlock.
func TestOneByOneOppositeOrderDeadlocks(t *testing.T) {
	db := testdb.Open(t, "postgres")
	accounts, _ := repos(t, db)
	a := newAccount(t, accounts, "a", 0)
	b := newAccount(t, accounts, "b", 0)
	var firstLocks sync.WaitGroup
	firstLocks.Add(2)
	errs := make([]error, 2)
	var g sync.WaitGroup
	for i, ids := range [2][2]int64{{a.ID, b.ID}, {b.ID, a.ID}} {
		g.Add(1)
		go func() {
			defer g.Done()
			errs[i] = repository.RunInTx(context.Background(), db, func(ctx context.Context) error {
				if _, err := accounts.LockRow(ctx, ids[0]); err != nil {
					firstLocks.Done()
					return err
				}
				firstLocks.Done()
				firstLocks.Wait() // both hold their first lock
				_, err := accounts.LockRow(ctx, ids[1])
				return err
			})
		}()
	}
	g.Wait()
	joined := errors.Join(errs...)
	require.ErrorIs(t, joined, locking.ErrDeadlock)
	assert.True(t, locking.IsRetryable(joined))
	assert.True(t, errs[0] == nil || errs[1] == nil, "the database aborts one of the two: %v", joined)
}

func TestLockRows(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		accounts, _ := repos(t, db)
		a := newAccount(t, accounts, "a", 1)
		b := newAccount(t, accounts, "b", 2)
		require.NoError(t, repository.RunInTx(context.Background(), db, func(ctx context.Context) error {
			got, err := accounts.LockRows(ctx, []any{b.ID, a.ID, b.ID, int32(a.ID)})
			require.NoError(t, err)
			require.Len(t, got, 2, "duplicates are locked once")
			assert.Equal(t, []int64{a.ID, b.ID}, []int64{got[0].ID, got[1].ID})

			none, err := accounts.LockRows(ctx, nil)
			require.NoError(t, err)
			assert.Empty(t, none)

			_, err = accounts.LockRows(ctx, []any{a.ID, "x"})
			require.ErrorIs(t, err, locking.ErrInvalidArgument)
			return nil
		}))
		err := repository.RunInTx(context.Background(), db, func(ctx context.Context) error {
			_, err := accounts.LockRows(ctx, []any{a.ID, int64(9999), int64(9998)})
			return err
		})
		require.ErrorIs(t, err, locking.ErrNotFound)
		assert.Contains(t, err.Error(), "2 of 3 ids not found [9998 9999]")
	})
}

func TestMutateRowLocked(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		accounts, _ := repos(t, db)
		ctx := context.Background()
		a := newAccount(t, accounts, "ann", 10)

		got, err := accounts.MutateRowLocked(ctx, a.ID, func(b *fixtures.Account) error { b.Balance += 5; return nil })
		require.NoError(t, err)
		assert.EqualValues(t, 15, got.Balance)
		assert.Greater(t, got.Version, a.Version)
		requireRow(t, db, a.ID, 15, got.Version)

		boom := errors.New("boom")
		_, err = accounts.MutateRowLocked(ctx, a.ID, func(b *fixtures.Account) error { b.Balance = 0; return boom })
		require.Same(t, boom, err, "fn's error comes back unwrapped")
		requireRow(t, db, a.ID, 15, got.Version)

		_, err = accounts.MutateRowLocked(ctx, a.ID, func(b *fixtures.Account) error { b.ID++; return nil })
		require.ErrorIs(t, err, locking.ErrInvalidArgument)
		_, err = accounts.MutateRowLocked(ctx, a.ID, func(b *fixtures.Account) error { b.Version = 7; return nil })
		require.ErrorIs(t, err, locking.ErrInvalidArgument)
		requireRow(t, db, a.ID, 15, got.Version)

		_, err = accounts.MutateRowLocked(ctx, int64(9999), func(*fixtures.Account) error { return nil })
		require.ErrorIs(t, err, locking.ErrNotFound)
		_, err = accounts.MutateRowLocked(ctx, a.ID, nil)
		require.ErrorIs(t, err, locking.ErrInvalidArgument)
		// ForShare does not compile here (TestOptionFamilies).
		_, err = accounts.MutateRowLocked(ctx, a.ID, func(*fixtures.Account) error { return nil },
			repository.NoWait(), repository.LockTimeout(time.Second))
		require.ErrorIs(t, err, locking.ErrInvalidArgument)
		_, err = accounts.MutateRowLocked(ctx, a.ID, func(*fixtures.Account) error { return nil }, repository.LockTimeout(0))
		require.ErrorIs(t, err, locking.ErrInvalidArgument)

		// Inside RunInTx it joins the caller's transaction: a rollback undoes it.
		err = repository.RunInTx(ctx, db, func(ctx context.Context) error {
			if _, err := accounts.MutateRowLocked(ctx, a.ID, func(b *fixtures.Account) error { b.Balance = 0; return nil }); err != nil {
				return err
			}
			return boom
		})
		require.ErrorIs(t, err, boom)
		requireRow(t, db, a.ID, 15, got.Version)
	})
}

// UpdateMany with one stale record among 50 writes nothing and names it.
func TestUpdateManyIsAllOrNothing(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		accounts, _ := repos(t, db)
		ctx := context.Background()
		batch := make([]*fixtures.Account, 50)
		for i := range batch {
			batch[i] = newAccount(t, accounts, "batch", int64(i))
		}
		stale := batch[31]
		require.NoError(t, db.Exec("UPDATE accounts SET balance = 1000, version = version + 1 WHERE id = ?", stale.ID).Error)
		created := make([]int64, len(batch))
		for i, a := range batch {
			created[i] = a.Version
		}
		for _, a := range batch {
			a.Balance += 100
		}

		err := accounts.UpdateMany(ctx, batch)
		require.ErrorIs(t, err, locking.ErrStaleData)
		require.NotErrorIs(t, err, locking.ErrNotFound)
		var be *locking.BatchError
		require.ErrorAs(t, err, &be)
		assert.Equal(t, []any{stale.ID}, be.IDs())
		assert.Equal(t, 50, be.Total)
		var se *locking.StaleDataError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, locking.StaleDataError{Table: "accounts", ID: stale.ID, Expected: stale.Version, Actual: stale.Version + 1, Op: "update"}, *se)
		for i, a := range batch {
			if a == stale {
				requireRow(t, db, a.ID, 1000, stale.Version+1)
				continue
			}
			requireRow(t, db, a.ID, int64(i), created[i], "row %d untouched", i)
			assert.Equal(t, created[i], a.Version, "entity %d unchanged in memory", i)
		}

		// Reload the stale one: now the whole batch goes through.
		fresh, err := accounts.Get(ctx, stale.ID)
		require.NoError(t, err)
		batch[31] = fresh
		require.NoError(t, accounts.UpdateMany(ctx, batch))
		for i, a := range batch {
			assert.EqualValues(t, a.ID, batch[i].ID)
			assert.Greater(t, a.Version, created[i])
			if i == 31 {
				requireRow(t, db, a.ID, 1000, a.Version)
				continue
			}
			requireRow(t, db, a.ID, int64(i)+100, a.Version)
		}
	})
}

func TestUpdateManyReportsStaleAndMissing(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		accounts, _ := repos(t, db)
		ctx := context.Background()
		a := newAccount(t, accounts, "a", 1)
		b := newAccount(t, accounts, "b", 2)
		c := newAccount(t, accounts, "c", 3)
		require.NoError(t, db.Exec("UPDATE accounts SET version = version + 5 WHERE id = ?", c.ID).Error)
		require.NoError(t, db.Exec("DELETE FROM accounts WHERE id = ?", a.ID).Error)
		created := b.Version
		err := accounts.UpdateMany(ctx, []*fixtures.Account{c, b, a})
		require.ErrorIs(t, err, locking.ErrStaleData)
		require.ErrorIs(t, err, locking.ErrNotFound)
		var be *locking.BatchError
		require.ErrorAs(t, err, &be)
		assert.Equal(t, []any{a.ID, c.ID}, be.IDs(), "in key order")
		requireRow(t, db, b.ID, 2, created)

		// Inside a transaction the failed batch rolls back to a savepoint:
		// the caller's other writes survive.
		require.NoError(t, repository.RunInTx(ctx, db, func(ctx context.Context) error {
			b.Balance = 20
			require.NoError(t, accounts.Update(ctx, b))
			err := accounts.UpdateMany(ctx, []*fixtures.Account{c})
			require.ErrorIs(t, err, locking.ErrStaleData)
			return nil
		}))
		requireRow(t, db, b.ID, 20, b.Version)
	})
}

func TestUpdateManyRefusesBadBatches(t *testing.T) {
	db := testdb.Open(t, "sqlite")
	accounts, _ := repos(t, db)
	ctx := context.Background()
	a := newAccount(t, accounts, "a", 1)
	dup := *a
	for name, batch := range map[string][]*fixtures.Account{
		"nil entity": {a, nil},
		"duplicate":  {a, &dup},
		"version -1": {a, {Model: models.Model{ID: 77, Versioned: models.Versioned{Version: -1}}}},
		"no key":     {{Owner: "x"}},
	} {
		err := accounts.UpdateMany(ctx, batch)
		require.ErrorIs(t, err, locking.ErrInvalidArgument, name)
	}
	requireRow(t, db, a.ID, 1, a.Version)
	require.NoError(t, accounts.UpdateMany(ctx, nil))
}

func TestForceIncrement(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		accounts, _ := repos(t, db)
		ctx := context.Background()
		a := newAccount(t, accounts, "ann", 10)
		created := a.Version
		updated := a.UpdatedAt
		a.Balance = 999 // not written
		require.NoError(t, accounts.ForceIncrement(ctx, a))
		assert.Greater(t, a.Version, created)
		assert.False(t, a.UpdatedAt.Before(updated))
		requireRow(t, db, a.ID, 10, a.Version)

		stale := *a
		stale.Version = created
		err := accounts.ForceIncrement(ctx, &stale)
		var se *locking.StaleDataError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, locking.StaleDataError{Table: "accounts", ID: a.ID, Expected: created, Actual: a.Version, Op: "force increment"}, *se)
		assert.Equal(t, created, stale.Version)

		// An optimistic writer holding the old version now loses.
		old, err := accounts.Get(ctx, a.ID)
		require.NoError(t, err)
		require.NoError(t, accounts.ForceIncrement(ctx, a))
		old.Balance = 1
		require.ErrorIs(t, accounts.Update(ctx, old), locking.ErrStaleData)
		require.Greater(t, a.Version, old.Version)
		requireRow(t, db, a.ID, 10, a.Version)

		require.ErrorIs(t, accounts.ForceIncrement(ctx, &fixtures.Account{}), locking.ErrInvalidArgument)
		require.ErrorIs(t, accounts.ForceIncrement(ctx, nil), locking.ErrInvalidArgument)
		require.NoError(t, db.Exec("DELETE FROM accounts WHERE id = ?", a.ID).Error)
		require.ErrorIs(t, accounts.ForceIncrement(ctx, a), locking.ErrNotFound)
	})
}

// LockRows takes its locks in key order even when the table stores the
// rows in another order: while it waits for the higher key, it already holds
// the lower one. (Locking in the order given, or in storage order, would
// wait on the higher key holding nothing.)
func TestLockRowsLocksInKeyOrder(t *testing.T) {
	db := testdb.Open(t, "postgres")
	accounts, _ := repos(t, db)
	low := newAccount(t, accounts, "low", 0)
	high := newAccount(t, accounts, "high", 0)
	// Rewrite the low row so its new version is stored after the high one.
	require.NoError(t, db.Exec("UPDATE accounts SET owner = 'low2' WHERE id = ?", low.ID).Error)
	var physical []int64
	require.NoError(t, db.Raw("SELECT id FROM accounts ORDER BY ctid").Scan(&physical).Error)
	require.Equal(t, []int64{high.ID, low.ID}, physical, "storage order differs from key order")

	h := holdLock(t, db, accounts, high.ID, nil)
	got := make(chan error, 1)
	go func() {
		got <- repository.RunInTx(context.Background(), db, func(ctx context.Context) error {
			_, err := accounts.LockRows(ctx, []any{high.ID, low.ID})
			return err
		})
	}()
	waitBlocked(t, db, h)
	err := repository.RunInTx(context.Background(), db, func(ctx context.Context) error {
		_, err := accounts.LockRow(ctx, low.ID, repository.NoWait())
		return err
	})
	require.ErrorIs(t, err, locking.ErrLocked, "the waiting LockRows holds the lower key")
	require.NoError(t, h.stop())
	require.NoError(t, <-got)
}

// lock_timeout is restored when the locked read fails in Go (a column that
// does not scan), where the transaction lives on.
func TestLockTimeoutRestoredAfterClientError(t *testing.T) {
	db := testdb.Open(t, "postgres")
	_, docs := repos(t, db)
	require.NoError(t, db.Exec(`INSERT INTO documents (id, title, attrs, version, created_at, updated_at)
		VALUES ('d1', 't', '{"n": 1}', 1, now(), now())`).Error)
	require.NoError(t, repository.RunInTx(context.Background(), db, func(ctx context.Context) error {
		var before, after string
		require.NoError(t, docs.DB(ctx).Raw("SHOW lock_timeout").Scan(&before).Error)
		_, err := docs.LockRow(ctx, "d1", repository.LockTimeout(50*time.Millisecond))
		require.ErrorContains(t, err, "attrs")
		require.NoError(t, docs.DB(ctx).Raw("SHOW lock_timeout").Scan(&after).Error)
		assert.Equal(t, before, after)
		return nil
	}))
}

func TestLockTimeoutBounds(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		accounts, _ := repos(t, db)
		a := newAccount(t, accounts, "ann", 1)
		_, err := accounts.MutateRowLocked(context.Background(), a.ID, func(*fixtures.Account) error { return nil },
			repository.LockTimeout(repository.MaxLockTimeout+time.Millisecond))
		require.ErrorIs(t, err, locking.ErrInvalidArgument)
		_, err = accounts.MutateRowLocked(context.Background(), a.ID, func(*fixtures.Account) error { return nil },
			repository.LockTimeout(repository.MaxLockTimeout))
		require.NoError(t, err)
	})
}

// UpdateMany and nested RunInTx use savepoints of their own, so GORM's
// DisableNestedTransaction cannot turn "nothing was written" into a
// partial write.
func TestUpdateManyWithDisableNestedTransaction(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		db = db.Session(&gorm.Session{})
		db.Config.DisableNestedTransaction = true
		accounts, _ := repos(t, db)
		ctx := context.Background()
		a := newAccount(t, accounts, "a", 1)
		b := newAccount(t, accounts, "b", 2)
		require.NoError(t, db.Exec("UPDATE accounts SET version = version + 5 WHERE id = ?", b.ID).Error)
		created := a.Version
		a.Balance, b.Balance = 100, 200
		require.NoError(t, repository.RunInTx(ctx, db, func(ctx context.Context) error {
			err := accounts.UpdateMany(ctx, []*fixtures.Account{a, b})
			require.ErrorIs(t, err, locking.ErrStaleData)
			return nil
		}))
		requireRow(t, db, a.ID, 1, created, "nothing of the failed batch was written")

		boom := errors.New("boom")
		require.NoError(t, repository.RunInTx(ctx, db, func(ctx context.Context) error {
			err := repository.RunInTx(ctx, db, func(ctx context.Context) error {
				require.NoError(t, accounts.Update(ctx, a))
				return boom
			})
			require.ErrorIs(t, err, boom)
			return nil
		}))
		requireRow(t, db, a.ID, 1, created, "the nested transaction rolled back")
	})
}
