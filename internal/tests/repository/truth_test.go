package repository_test

// Regression tests for the four ways a write could be lost, doubled or
// misreported (issue 11). Each one failed on the code before the fix.

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gormlock/gormlock/internal/tests/fixtures"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

// Defect 1: a copy read before a record was deleted and created again must
// not pass the new record's guard (SQLAlchemy's test_child_row_switch_two).
// With versions counted from 1, the old copy and the new record were both
// at version 1 and the old copy silently overwrote the new record.
func TestRecreatedRecordRefusesOldCopies(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		_, docs := repos(t, db)
		require.NoError(t, docs.Create(ctx, &fixtures.Document{ID: "p1", Title: "first"}))
		old, err := docs.Get(ctx, "p1")
		require.NoError(t, err)
		gone, err := docs.Get(ctx, "p1")
		require.NoError(t, err)
		require.NoError(t, docs.Delete(ctx, gone))
		again := &fixtures.Document{ID: "p1", Title: "second"}
		require.NoError(t, docs.Create(ctx, again))
		require.Greater(t, again.Version, old.Version, "the new record starts above every version the old one had")

		old.Title = "x"
		err = docs.Update(ctx, old)
		var stale *locking.StaleDataError
		require.ErrorAs(t, err, &stale)
		assert.Equal(t, old.Version, stale.Expected)
		assert.Equal(t, again.Version, stale.Actual)
		require.ErrorIs(t, docs.Delete(ctx, old), locking.ErrStaleData)
		require.ErrorIs(t, docs.ForceIncrement(ctx, old), locking.ErrStaleData)

		got, err := docs.Get(ctx, "p1")
		require.NoError(t, err)
		assert.Equal(t, "second", got.Title, "the new record is untouched")
		assert.Equal(t, again.Version, got.Version)

		// Upsert's create path, too.
		require.NoError(t, docs.Delete(ctx, got))
		up, err := docs.Upsert(ctx, "p1", func() *fixtures.Document { return &fixtures.Document{Title: "third"} },
			func(*fixtures.Document) error { return nil })
		require.NoError(t, err)
		assert.Greater(t, up.Version, got.Version)
	})
}

// Versions never repeat for a key: 200 delete and create cycles of one key
// give 200 distinct, growing first versions, each above the last version of
// the incarnation before.
func TestVersionsNeverRepeatAcrossIncarnations(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		_, docs := repos(t, db)
		var last int64
		for i := range 200 {
			d := &fixtures.Document{ID: "k", Title: "t"}
			require.NoError(t, docs.Create(ctx, d))
			require.Greater(t, d.Version, last, "cycle %d", i)
			if i%2 == 0 {
				require.NoError(t, docs.Update(ctx, d))
				require.Greater(t, d.Version, last)
			}
			last = d.Version
			require.NoError(t, docs.Delete(ctx, d))
		}
	})
}

// Defect 2: an Update racing a delete and re-create must not report stale
// data "expected v, found v": stale means the record existed at another
// version. Writers and a re-creator race on one key; every StaleDataError
// names two different versions.
func TestStaleNamesTwoDifferentVersions(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		_, docs := repos(t, db)
		ctx := testdb.Ctx(t)
		require.NoError(t, docs.Create(ctx, &fixtures.Document{ID: "r", Title: "t"}))
		var stop atomic.Bool
		var stales, notFound, applied atomic.Int64
		var g errgroup.Group
		g.Go(func() error { // delete and create again, as fast as it can
			for i := 0; i < 300 && !stop.Load(); i++ {
				d, err := docs.Get(ctx, "r")
				if err == nil {
					if err := docs.Delete(ctx, d); err != nil && !errors.Is(err, locking.ErrStaleData) && !errors.Is(err, locking.ErrNotFound) && !deadlock(db, err) {
						return err
					}
				}
				if err := docs.Create(ctx, &fixtures.Document{ID: "r", Title: "t"}); err != nil && !errors.Is(err, locking.ErrAlreadyExists) && !deadlock(db, err) {
					return err
				}
			}
			stop.Store(true)
			return nil
		})
		for range 3 {
			g.Go(func() error {
				for !stop.Load() {
					d, err := docs.Get(ctx, "r")
					if errors.Is(err, locking.ErrNotFound) {
						continue
					}
					if err != nil {
						return err
					}
					d.Title = "w"
					err = docs.Update(ctx, d)
					var stale *locking.StaleDataError
					switch {
					case err == nil:
						applied.Add(1)
					case errors.As(err, &stale):
						stales.Add(1)
						if stale.Expected == stale.Actual {
							return errors.New("stale data reported with the version the writer held: " + err.Error())
						}
					case errors.Is(err, locking.ErrNotFound):
						notFound.Add(1)
					case deadlock(db, err):
						// InnoDB broke a lock cycle with the concurrent
						// create: not applied, and said so.
					default:
						return err
					}
				}
				return nil
			})
		}
		require.NoError(t, g.Wait())
		t.Logf("%s: %d applied, %d stale, %d not found", db.Dialector.Name(), applied.Load(), stales.Load(), notFound.Load())
	})
}

// deadlock reports an error InnoDB's deadlock detection gives a write that
// races a create of the same key (MySQL only): a definite "not applied".
func deadlock(db *gorm.DB, err error) bool {
	return db.Dialector.Name() == "mysql" && errors.Is(err, locking.ErrDeadlock) && !errors.Is(err, locking.ErrCommitUnknown)
}

// Defect 3: on PostgreSQL a write whose context ends while it waits for a
// row lock must not be reported as failed and then apply when the lock is
// released. With a deadline the wait is bounded on the server, so the write
// fails definitely (lock timeout) and the row stays as it was; a retry
// cannot apply the change twice.
func TestDeadlineWriteFailsDefinitely(t *testing.T) {
	db := testdb.Open(t, "postgres")
	accounts, _ := repos(t, db)
	for name, write := range map[string]func(ctx context.Context, a *fixtures.Account) error{
		"Update": func(ctx context.Context, a *fixtures.Account) error {
			a.Balance += 5
			return accounts.Update(ctx, a)
		},
		"Mutate": func(ctx context.Context, a *fixtures.Account) error {
			_, err := accounts.Mutate(ctx, a.ID, func(a *fixtures.Account) error { a.Balance += 5; return nil })
			return err
		},
		"Delete": func(ctx context.Context, a *fixtures.Account) error { return accounts.Delete(ctx, a) },
	} {
		t.Run(name, func(t *testing.T) {
			a := newAccount(t, accounts, "ann", 10)
			h := holdLock(t, db, accounts, a.ID, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			err := write(ctx, a)
			require.Error(t, err)
			require.NotErrorIs(t, err, locking.ErrCommitUnknown, "the wait was bounded on the server: a definite outcome")
			require.ErrorIs(t, err, locking.ErrLockTimeout)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.NoError(t, h.stop())
			time.Sleep(200 * time.Millisecond) // a statement still running would commit now
			balance, version, found := rawAccount(t, db, a.ID)
			require.True(t, found)
			require.EqualValues(t, 10, balance, "reported as not applied, and not applied")
			require.Equal(t, a.Version, version)
		})
	}
}

// Defect 4: on SQLite a write whose context ends while another connection
// holds the write lock returns then, not after the 10 s busy timeout. The
// holder is a connection gormlock does not manage (its own *sql.DB) or a
// transaction of this process's repository; it lets go after 1.5 s on its
// own (or as soon as the call returns), and every call must have returned,
// with the context's error and nothing written, before that.
func TestSQLiteWaitsEndWithTheContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wait.db")
	db := testdb.OpenSQLiteFile(t, path)
	accounts, err := repository.New[fixtures.Account](db, repository.WithLeases())
	require.NoError(t, err)
	a := newAccount(t, accounts, "ann", 10)
	calls := map[string]func(ctx context.Context) error{
		"Update": func(ctx context.Context) error { e := *a; e.Balance++; return accounts.Update(ctx, &e) },
		"Mutate": func(ctx context.Context) error {
			_, err := accounts.Mutate(ctx, a.ID, func(a *fixtures.Account) error { a.Balance++; return nil })
			return err
		},
		"MutateRowLocked": func(ctx context.Context) error {
			_, err := accounts.MutateRowLocked(ctx, a.ID, func(a *fixtures.Account) error { a.Balance++; return nil })
			return err
		},
		"Leases.Acquire": func(ctx context.Context) error {
			_, _, err := accounts.Leases().Acquire(ctx, a.ID, "me")
			return err
		},
		"Create": func(ctx context.Context) error {
			return accounts.Create(ctx, &fixtures.Account{Owner: "new"})
		},
		"RunInTx": func(ctx context.Context) error {
			return repository.RunInTx(ctx, db, func(context.Context) error { return nil })
		},
	}
	holders := map[string]func(t *testing.T, release <-chan struct{}, held chan<- struct{}) error{
		"another connection": func(t *testing.T, release <-chan struct{}, held chan<- struct{}) error {
			other := testdb.RawSQLite(t, path, "_busy_timeout=0")
			tx, err := other.BeginTx(context.Background(), &sql.TxOptions{})
			if err != nil {
				return err
			}
			if _, err := tx.Exec("UPDATE accounts SET owner = owner"); err != nil {
				return err
			}
			close(held)
			<-release
			return tx.Rollback()
		},
		"this process's repository": func(t *testing.T, release <-chan struct{}, held chan<- struct{}) error {
			return repository.RunInTx(context.Background(), db, func(ctx context.Context) error {
				close(held)
				<-release
				return nil
			})
		},
	}
	for holderName, hold := range holders {
		for name, call := range calls {
			t.Run(holderName+"/"+name, func(t *testing.T) {
				var order atomic.Int64
				var released, returned int64
				release := make(chan struct{})
				held := make(chan struct{})
				var wg sync.WaitGroup
				var holdErr error
				wg.Add(1)
				go func() {
					defer wg.Done()
					holdErr = hold(t, release, held)
				}()
				<-held
				var once sync.Once
				let := func() { once.Do(func() { released = order.Add(1); close(release) }) }
				timer := time.AfterFunc(1500*time.Millisecond, let)
				defer timer.Stop()
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				defer cancel()
				err := call(ctx)
				returned = order.Add(1)
				let()
				wg.Wait()
				require.NoError(t, holdErr)
				require.Error(t, err)
				assert.ErrorIs(t, err, context.DeadlineExceeded)
				assert.NotErrorIs(t, err, locking.ErrCommitUnknown)
				assert.Less(t, returned, released, "returned before the holder let go: the wait ended with the context")
				balance, version, _ := rawAccount(t, db, a.ID)
				assert.EqualValues(t, 10, balance)
				assert.Equal(t, a.Version, version)
				var n int64
				require.NoError(t, db.Raw("SELECT count(*) FROM accounts").Scan(&n).Error)
				assert.EqualValues(t, 1, n, "nothing created")
				st, _, err := accounts.Leases().Get(context.Background(), a.ID)
				require.NoError(t, err)
				require.NotNil(t, st)
			})
		}
	}
}

// A Where condition is one expression: text that would end the statement
// and start another (SQLite's driver runs both), or comment the rest out,
// is refused before any I/O, and the table is still there.
func TestWhereCannotRunASecondStatement(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		accounts, _ := repos(t, db)
		newAccount(t, accounts, "ann", 10)
		for _, cond := range []string{
			"1=1; DROP TABLE accounts; --",
			"1=1; DROP TABLE accounts",
			"owner = 'x' -- AND frozen",
			"owner = 'x' /* hidden */",
			// Quoting a scanner could be fooled by: SQLite's brackets,
			// PostgreSQL's dollar quotes and escape strings.
			"1 = (SELECT 1 AS [a']); DELETE FROM accounts; SELECT 1 WHERE 1 = (SELECT 1 AS [b'])",
			"owner = $$'$$ OR true -- '",
			`owner = E'\'' OR true -- '`,
			"owner <> ';'",
		} {
			_, err := accounts.Find(ctx, repository.Where(cond))
			require.ErrorIs(t, err, locking.ErrInvalidArgument, cond)
			_, err = accounts.Claim(ctx, 1, repository.Where(cond))
			require.Error(t, err, cond)
		}
		// Values holding those characters go in the arguments.
		for _, v := range []string{";", "--", "/*", "it's; --"} {
			got, err := accounts.Find(ctx, repository.Where("owner <> ?", v))
			require.NoError(t, err, v)
			require.Len(t, got, 1, v)
		}
		var n int64
		require.NoError(t, db.Raw("SELECT count(*) FROM accounts").Scan(&n).Error, "the table is still there")
		require.EqualValues(t, 1, n)
	})
}
