package repository_test

// The repository on SQLite through a pure-Go driver, github.com/glebarez/sqlite
// (github.com/glebarez/go-sqlite, a fork of modernc.org/sqlite), the driver a
// program built with CGO_ENABLED=0 uses. The tests need no cgo: `make nocgo`
// runs them with CGO_ENABLED=0.

import (
	"context"
	"database/sql"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/opendb/puresqlite"
	sqliteopen "github.com/gormlock/gormlock/opendb/sqlite"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/repository"
)

// openPureGo opens (creating) the SQLite file at path through the pure-Go
// driver with opendb's settings, and creates the example models' tables.
func openPureGo(t *testing.T, path string) *gorm.DB {
	t.Helper()
	db, err := puresqlite.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = fixtures.Close(db) })
	require.NoError(t, db.AutoMigrate(&fixtures.Account{}, &fixtures.Document{}))
	return db
}

// pureGoBalance reads an account with plain SQL, bypassing the repository.
func pureGoBalance(t *testing.T, db *gorm.DB, id int64) (balance, version int64) {
	t.Helper()
	var row struct{ Balance, Version int64 }
	res := db.Raw("SELECT balance, version FROM accounts WHERE id = ?", id).Scan(&row)
	require.NoError(t, res.Error)
	require.EqualValues(t, 1, res.RowsAffected, "account %d exists", id)
	return row.Balance, row.Version
}

func TestPureGoCRUD(t *testing.T) {
	ctx := context.Background()
	db := openPureGo(t, filepath.Join(t.TempDir(), "crud.db"))
	accounts, err := repository.New[fixtures.Account](db)
	require.NoError(t, err)
	require.NoError(t, accounts.VerifySchema(ctx))

	a := &fixtures.Account{Owner: "ann", Balance: 100}
	require.NoError(t, accounts.Create(ctx, a))
	require.NotZero(t, a.ID)
	require.Positive(t, a.Version)
	first := a.Version

	got, err := accounts.Get(ctx, a.ID)
	require.NoError(t, err)
	assert.Equal(t, "ann", got.Owner)
	assert.EqualValues(t, 100, got.Balance)
	assert.Equal(t, first, got.Version)

	stale := *got
	got.Balance = 70
	require.NoError(t, accounts.Update(ctx, got))
	assert.Greater(t, got.Version, first, "the version advanced")
	balance, version := pureGoBalance(t, db, a.ID)
	assert.EqualValues(t, 70, balance)
	assert.Equal(t, got.Version, version, "the version read back is the stored one")

	stale.Balance = 999
	err = accounts.Update(ctx, &stale)
	require.ErrorIs(t, err, locking.ErrStaleData)
	var se *locking.StaleDataError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, first, se.Expected)
	assert.Equal(t, got.Version, se.Actual)
	balance, _ = pureGoBalance(t, db, a.ID)
	assert.EqualValues(t, 70, balance, "the stale write was not applied")

	require.NoError(t, accounts.Delete(ctx, got))
	_, err = accounts.Get(ctx, a.ID)
	require.ErrorIs(t, err, locking.ErrNotFound)
	got.Balance = 1
	require.ErrorIs(t, accounts.Update(ctx, got), locking.ErrNotFound)
}

// A taken key is ErrAlreadyExists with SQLite's extended code, a definite
// outcome (not applied), whatever the driver.
func TestPureGoDuplicateCreate(t *testing.T) {
	ctx := context.Background()
	db := openPureGo(t, filepath.Join(t.TempDir(), "dup.db"))
	docs, err := repository.New[fixtures.Document](db)
	require.NoError(t, err)
	accounts, err := repository.New[fixtures.Account](db)
	require.NoError(t, err)

	require.NoError(t, docs.Create(ctx, &fixtures.Document{ID: "readme", Title: "first"}))
	a := &fixtures.Account{Owner: "ann", Balance: 1}
	require.NoError(t, accounts.Create(ctx, a))

	for name, create := range map[string]func() error{
		"string key": func() error { return docs.Create(ctx, &fixtures.Document{ID: "readme", Title: "second"}) },
		"integer key": func() error {
			return accounts.Create(ctx, &fixtures.Account{Model: models.Model{ID: a.ID}, Owner: "bob"})
		},
	} {
		t.Run(name, func(t *testing.T) {
			err := create()
			require.ErrorIs(t, err, locking.ErrAlreadyExists)
			require.NotErrorIs(t, err, locking.ErrCommitUnknown, "SQLite refused it: not applied")
			assert.Equal(t, "SQLITE_CONSTRAINT_PRIMARYKEY", locking.Code(err))
			var c interface{ Code() int }
			require.ErrorAs(t, err, &c, "the driver error is kept")
			assert.Equal(t, 19|6<<8, c.Code())
		})
	}
	d, err := docs.Get(ctx, "readme")
	require.NoError(t, err)
	assert.Equal(t, "first", d.Title)
}

// pureGoStress runs workers goroutines, released together, each doing
// increments increments of one account with inc, and returns how many inc
// reported as done and the balance kept.
func pureGoStress(t *testing.T, db *gorm.DB, inc func(ctx context.Context, id int64) error) (done, kept int64) {
	t.Helper()
	const workers, increments = 8, 40
	ctx := context.Background()
	accounts, err := repository.New[fixtures.Account](db)
	require.NoError(t, err)
	a := &fixtures.Account{Owner: "stress"}
	require.NoError(t, accounts.Create(ctx, a))
	start := make(chan struct{})
	var g errgroup.Group
	var ok atomic.Int64
	for range workers {
		g.Go(func() error {
			<-start
			for range increments {
				if err := inc(ctx, a.ID); err != nil {
					return err
				}
				ok.Add(1)
			}
			return nil
		})
	}
	close(start)
	require.NoError(t, g.Wait())
	require.EqualValues(t, workers*increments, ok.Load())
	kept, _ = pureGoBalance(t, db, a.ID)
	return ok.Load(), kept
}

// Concurrent Mutate calls lose no increment. Four Repository instances race
// each other, as four processes would, so the version guard and the retries
// are exercised, not only the in-process queue.
func TestPureGoMutateLosesNoIncrement(t *testing.T) {
	db := openPureGo(t, filepath.Join(t.TempDir(), "mutate.db"))
	var instances []*repository.Repository[fixtures.Account]
	for range 4 {
		r, err := repository.New[fixtures.Account](db, repository.WithRetryPolicy(
			locking.RetryPolicy{MaxAttempts: 1000, BaseDelay: time.Millisecond, MaxDelay: 20 * time.Millisecond}))
		require.NoError(t, err)
		instances = append(instances, r)
	}
	var calls, attempts atomic.Int64
	done, kept := pureGoStress(t, db, func(ctx context.Context, id int64) error {
		var rep repository.MutateReport
		_, err := instances[calls.Add(1)%4].Mutate(ctx, id, func(a *fixtures.Account) error {
			a.Balance++
			return nil
		}, repository.Report(&rep))
		attempts.Add(int64(rep.Attempts))
		return err
	})
	require.Equal(t, done, kept, "final balance == successful increments")
	assert.Greater(t, attempts.Load(), done, "the instances raced, and some attempts were retried")
	t.Logf("%d increments, %d attempts", done, attempts.Load())
}

// Negative control: the same workload as a plain read-modify-write without
// the version guard loses increments.
func TestPureGoUnguardedLosesIncrements(t *testing.T) {
	db := openPureGo(t, filepath.Join(t.TempDir(), "unguarded.db"))
	accounts, err := repository.New[fixtures.Account](db)
	require.NoError(t, err)
	done, kept := pureGoStress(t, db, func(ctx context.Context, id int64) error {
		a, err := accounts.Get(ctx, id)
		if err != nil {
			return err
		}
		time.Sleep(200 * time.Microsecond) // the window every real handler has between read and write
		return db.WithContext(ctx).Model(&fixtures.Account{}).Where("id = ?", id).Update("balance", a.Balance+1).Error
	})
	require.Less(t, kept, done, "unguarded writes must lose increments")
	t.Logf("unguarded: %d increments reported, %d kept", done, kept)
}

// MutateRowLocked serialises concurrent writers through SQLite's write lock.
func TestPureGoMutateRowLocked(t *testing.T) {
	db := openPureGo(t, filepath.Join(t.TempDir(), "locked.db"))
	accounts, err := repository.New[fixtures.Account](db)
	require.NoError(t, err)
	done, kept := pureGoStress(t, db, func(ctx context.Context, id int64) error {
		_, err := accounts.MutateRowLocked(ctx, id, func(a *fixtures.Account) error {
			a.Balance++
			return nil
		})
		return err
	})
	require.Equal(t, done, kept)
}

func TestPureGoRunInTx(t *testing.T) {
	ctx := context.Background()
	db := openPureGo(t, filepath.Join(t.TempDir(), "tx.db"))
	accounts, err := repository.New[fixtures.Account](db)
	require.NoError(t, err)
	from := &fixtures.Account{Owner: "ann", Balance: 100}
	to := &fixtures.Account{Owner: "bob", Balance: 0}
	require.NoError(t, accounts.Create(ctx, from))
	require.NoError(t, accounts.Create(ctx, to))

	require.NoError(t, repository.RunInTx(ctx, db, func(ctx context.Context) error {
		from.Balance -= 30
		to.Balance += 30
		if err := accounts.Update(ctx, from); err != nil {
			return err
		}
		return accounts.Update(ctx, to)
	}))
	balance, _ := pureGoBalance(t, db, from.ID)
	assert.EqualValues(t, 70, balance)
	balance, _ = pureGoBalance(t, db, to.ID)
	assert.EqualValues(t, 30, balance)

	// A stale second write rolls back the first.
	staleTo := *to
	require.NoError(t, accounts.Update(ctx, to))
	err = repository.RunInTx(ctx, db, func(ctx context.Context) error {
		from.Balance -= 10
		staleTo.Balance += 10
		if err := accounts.Update(ctx, from); err != nil {
			return err
		}
		return accounts.Update(ctx, &staleTo)
	})
	require.ErrorIs(t, err, locking.ErrStaleData)
	balance, _ = pureGoBalance(t, db, from.ID)
	assert.EqualValues(t, 70, balance, "the first write was rolled back")
}

// While another connection (one gormlock does not manage, as another
// process would) holds the write lock, gormlock waits for it in Go, with the
// connection's busy_timeout set to 0: a write with a deadline returns when
// the deadline passes, with the context's error and nothing written, not
// after the connection's 10 s busy timeout; and a write without one waits
// until the lock is free and succeeds.
func TestPureGoWriteWaitsForTheLockInGo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wait.db")
	db := openPureGo(t, path)
	accounts, err := repository.New[fixtures.Account](db)
	require.NoError(t, err)
	a := &fixtures.Account{Owner: "ann", Balance: 10}
	require.NoError(t, accounts.Create(context.Background(), a))

	other, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(0)")
	require.NoError(t, err)
	other.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = other.Close() })

	// hold takes the write lock on other and lets go after d, or when the
	// returned function is called.
	hold := func(t *testing.T, d time.Duration) (release func() int64, order *atomic.Int64) {
		t.Helper()
		tx, err := other.BeginTx(context.Background(), nil)
		require.NoError(t, err)
		_, err = tx.Exec("UPDATE accounts SET owner = owner")
		require.NoError(t, err)
		order = new(atomic.Int64)
		var once sync.Once
		var at int64
		release = func() int64 {
			once.Do(func() {
				at = order.Add(1)
				require.NoError(t, tx.Rollback())
			})
			return at
		}
		timer := time.AfterFunc(d, func() { release() })
		t.Cleanup(func() { timer.Stop(); release() })
		return release, order
	}

	for name, write := range map[string]func(ctx context.Context) error{
		"Update": func(ctx context.Context) error { e := *a; e.Balance++; return accounts.Update(ctx, &e) },
		"Mutate": func(ctx context.Context) error {
			_, err := accounts.Mutate(ctx, a.ID, func(a *fixtures.Account) error { a.Balance++; return nil })
			return err
		},
		"MutateRowLocked": func(ctx context.Context) error {
			_, err := accounts.MutateRowLocked(ctx, a.ID, func(a *fixtures.Account) error { a.Balance++; return nil })
			return err
		},
		"Create": func(ctx context.Context) error { return accounts.Create(ctx, &fixtures.Account{Owner: "new"}) },
	} {
		t.Run(name+"/deadline", func(t *testing.T) {
			release, order := hold(t, 1500*time.Millisecond)
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			err := write(ctx)
			returned := order.Add(1)
			released := release()
			require.Error(t, err)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			assert.NotErrorIs(t, err, locking.ErrCommitUnknown, "a definite outcome")
			assert.Less(t, returned, released, "returned before the holder let go: the wait ended with the context")
			balance, version := pureGoBalance(t, db, a.ID)
			assert.EqualValues(t, 10, balance, "nothing written")
			assert.Equal(t, a.Version, version)
		})
	}

	t.Run("no deadline waits and succeeds", func(t *testing.T) {
		release, order := hold(t, 200*time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		got, err := accounts.Mutate(ctx, a.ID, func(a *fixtures.Account) error { a.Balance++; return nil })
		returned := order.Add(1)
		require.NoError(t, err, "the write waited for the lock instead of failing with SQLITE_BUSY")
		assert.Less(t, release(), returned, "it returned after the holder let go")
		assert.EqualValues(t, 11, got.Balance)
		a = got
	})

	// Every connection has its busy_timeout back.
	sqlDB, err := db.DB()
	require.NoError(t, err)
	ctx := context.Background()
	conns := make([]*sql.Conn, 3)
	for i := range conns {
		conns[i], err = sqlDB.Conn(ctx)
		require.NoError(t, err)
		defer conns[i].Close()
		var busy int64
		require.NoError(t, conns[i].QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&busy))
		assert.Equal(t, sqliteopen.BusyTimeout.Milliseconds(), busy, "connection %d", i)
	}
}

// NoWait reports a held lock at once as ErrLocked.
func TestPureGoMutateRowLockedNoWait(t *testing.T) {
	ctx := context.Background()
	db := openPureGo(t, filepath.Join(t.TempDir(), "nowait.db"))
	accounts, err := repository.New[fixtures.Account](db)
	require.NoError(t, err)
	a := &fixtures.Account{Owner: "ann", Balance: 10}
	require.NoError(t, accounts.Create(ctx, a))

	held := make(chan struct{})
	release := make(chan struct{})
	var g errgroup.Group
	g.Go(func() error {
		return repository.RunInTx(ctx, db, func(ctx context.Context) error {
			close(held)
			<-release
			return nil
		})
	})
	<-held
	_, err = accounts.MutateRowLocked(ctx, a.ID, func(a *fixtures.Account) error { a.Balance++; return nil },
		repository.NoWait())
	close(release)
	require.NoError(t, g.Wait())
	require.ErrorIs(t, err, locking.ErrLocked)
	balance, _ := pureGoBalance(t, db, a.ID)
	assert.EqualValues(t, 10, balance)
}
