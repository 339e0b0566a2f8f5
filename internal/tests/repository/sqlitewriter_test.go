package repository_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/sqlitegate"
	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	sqliteopen "github.com/gormlock/gormlock/opendb/sqlite"
)

// The gate's writer connection (internal/sqlitegate, "The writer
// connection"): kept between gormlock's writes, it must never take a
// connection the application needs, must go back to the pool, and must
// not change what a write waiting for SQLite's lock does.

// With a pool of one connection (SetMaxOpenConns(1), common with SQLite),
// the gate gives the connection back at the end of every write, and
// gormlock's writes (with a context that can end and with
// context.Background) run beside the application's plain GORM reads and
// writes, and every one completes: nothing waits for a connection the gate
// keeps. The guarded counter ends at exactly the acknowledged increments;
// so does the plain counter, written with an atomic UPDATE. Negative
// control: a plain GORM read-modify-write of a third row, in the same
// pool, loses increments.
func TestSQLiteWriterConnectionWithAPoolOfOne(t *testing.T) {
	db := testdb.Open(t, "sqlite")
	sqlDB, err := db.DB()
	require.NoError(t, err)
	sqlDB.SetMaxOpenConns(1)
	accounts, _ := repos(t, db)
	guarded := newAccount(t, accounts, "guarded", 0)
	plain := newAccount(t, accounts, "plain", 0)
	unguarded := newAccount(t, accounts, "unguarded", 0)

	// A pool this small never lends the gate its connection beyond the
	// write: it is back in the pool when the write returns.
	for _, ctx := range []context.Context{context.Background(), t.Context()} {
		for range 5 {
			guarded.Balance++
			require.NoError(t, accounts.Update(ctx, guarded))
			require.Zero(t, sqlDB.Stats().InUse, "the gate kept the pool's only connection")
		}
	}
	guarded.Balance = 0
	require.NoError(t, accounts.Update(context.Background(), guarded))

	// The hang guard: a write or read waiting for the connection forever
	// ends here, and the test fails on its error.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const workers, n = 4, 40
	var guardedAcked, plainAcked atomic.Int64
	var wg sync.WaitGroup
	inc := func(a *fixtures.Account) error { a.Balance++; return nil }
	for w := range workers {
		wg.Go(func() {
			wctx := ctx
			if w%2 == 1 {
				wctx = context.Background() // the gate's other path
			}
			for range n {
				if _, err := accounts.Mutate(wctx, guarded.ID, inc); err != nil {
					t.Errorf("Mutate: %v", err)
					return
				}
				guardedAcked.Add(1)
			}
		})
		wg.Go(func() {
			for range n {
				res := db.WithContext(ctx).Model(&fixtures.Account{}).Where("id = ?", plain.ID).
					Update("balance", gorm.Expr("balance + 1"))
				if res.Error != nil {
					t.Errorf("plain update: %v", res.Error)
					return
				}
				plainAcked.Add(res.RowsAffected)
				var x fixtures.Account
				if err := db.WithContext(ctx).First(&x, guarded.ID).Error; err != nil {
					t.Errorf("plain read: %v", err)
					return
				}
			}
		})
		wg.Go(func() {
			for range n {
				var x fixtures.Account
				if err := db.WithContext(ctx).First(&x, unguarded.ID).Error; err != nil {
					t.Errorf("unguarded read: %v", err)
					return
				}
				time.Sleep(200 * time.Microsecond) // widen the read-write window
				if err := db.WithContext(ctx).Model(&fixtures.Account{}).Where("id = ?", unguarded.ID).
					Update("balance", x.Balance+1).Error; err != nil {
					t.Errorf("unguarded write: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	require.NoError(t, ctx.Err(), "a call waited for the pool's only connection")
	require.Equal(t, int64(workers*n), guardedAcked.Load())
	gotGuarded, _, _ := rawAccount(t, db, guarded.ID)
	require.Equal(t, guardedAcked.Load(), gotGuarded, "guarded increments")
	gotPlain, _, _ := rawAccount(t, db, plain.ID)
	require.Equal(t, plainAcked.Load(), gotPlain, "plain atomic increments")
	gotUnguarded, _, _ := rawAccount(t, db, unguarded.ID)
	require.Less(t, gotUnguarded, int64(workers*n), "negative control: the unguarded read-modify-write should lose increments")
}

// After a burst of writes the gate gives its writer connection back: the
// pool has no connection in use once the burst is over, and no statement
// stays prepared on a connection of the pool — across models and kinds of
// write (each its own statement).
func TestSQLiteWriterConnectionGoesBackToThePool(t *testing.T) {
	db := testdb.Open(t, "sqlite")
	sqlDB, err := db.DB()
	require.NoError(t, err)
	accounts, docs := repos(t, db)
	cctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			ctx := cctx
			if w%2 == 1 {
				ctx = context.Background()
			}
			for i := range 25 {
				a := &fixtures.Account{Owner: "burst", Balance: 1}
				if err := accounts.Create(ctx, a); err != nil {
					t.Errorf("Create: %v", err)
					return
				}
				a.Balance++
				if err := accounts.Update(ctx, a); err != nil {
					t.Errorf("Update: %v", err)
					return
				}
				d := &fixtures.Document{ID: "burst-" + strconv.Itoa(w) + "-" + strconv.Itoa(i), Title: "burst", Attrs: map[string]string{"k": "x"}}
				if err := docs.Create(ctx, d); err != nil {
					t.Errorf("Create document: %v", err)
					return
				}
				d.Title = "y"
				if err := docs.Update(ctx, d); err != nil {
					t.Errorf("Update document: %v", err)
					return
				}
				if err := accounts.Delete(ctx, a); err != nil {
					t.Errorf("Delete: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	require.Eventually(t, func() bool { return sqlDB.Stats().InUse == 0 }, 10*time.Second, time.Millisecond,
		"the writer connection is still out of the pool: %+v", sqlDB.Stats())
	require.Eventually(t, func() bool { return sqlitegate.OpenWriterStatements() == 0 }, 10*time.Second, time.Millisecond,
		"statements left prepared: %d", sqlitegate.OpenWriterStatements())
}

// Closing the database right after writes closes the file: the
// connection the gate kept is closed too (DB.Close does not wait for it;
// it closes when its linger ends), and the files can be removed.
func TestSQLiteWriterConnectionClosesWithTheDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "close.db")
	db, err := sqliteopen.Open(path)
	require.NoError(t, err)
	require.NoError(t, fixtures.Migrate(context.Background(), db))
	accounts, _ := repos(t, db)
	a := newAccount(t, accounts, "closing", 0)
	for range 20 {
		a.Balance++
		require.NoError(t, accounts.Update(context.Background(), a))
	}
	require.NoError(t, fixtures.Close(db))
	require.Eventually(t, func() bool { return openDescriptors(t, path) == 0 }, 10*time.Second, time.Millisecond,
		"a connection to %s is still open after DB.Close", path)
	for _, f := range []string{path, path + "-wal", path + "-shm", path + "-gormlock"} {
		if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
}

// openDescriptors counts this process's file descriptors open on path or
// its -wal and -shm files (Linux: /proc/self/fd); the lock file the gate
// keeps open for the process's lifetime is not counted.
func openDescriptors(t *testing.T, path string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	n := 0
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err != nil || !strings.HasPrefix(target, path) || strings.HasSuffix(target, "-gormlock") {
			continue
		}
		n++
	}
	return n
}

// A write whose context ends while a plain GORM transaction (another
// client of the file) holds SQLite's write lock ends then, with the
// context's error, definitely not applied — right after another write,
// when it runs on the writer connection the gate kept, with its busy
// timeout at 0 (the connection's own is 10 s, which the wait must not
// run). The row is unchanged after the blocker rolls back.
func TestSQLiteWriteOnTheKeptConnectionEndsWithItsContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kept.db")
	db := testdb.OpenSQLiteFile(t, path)
	other := testdb.OpenSQLiteFile(t, path)
	accounts, _ := repos(t, db)
	a := newAccount(t, accounts, "waits", 10)
	b := newAccount(t, accounts, "warms", 0)
	for round := range 5 {
		b.Balance++
		require.NoError(t, accounts.Update(context.Background(), b)) // the gate keeps the connection
		blocker := other.Begin()                                     // BEGIN IMMEDIATE (opendb/sqlite's _txlock)
		require.NoError(t, blocker.Error)
		x := *a
		x.Balance = 99
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		start := time.Now()
		err := accounts.Update(ctx, &x)
		waited := time.Since(start)
		cancel()
		require.NoError(t, blocker.Rollback().Error)
		require.ErrorIs(t, err, context.DeadlineExceeded, "round %d", round)
		require.NotErrorIs(t, err, locking.ErrCommitUnknown, "round %d", round)
		// Not a performance bound: a wait in SQLite's busy handler would
		// run the connection's 10 s.
		require.Less(t, waited, 5*time.Second, "round %d: the wait outlived its context", round)
		requireRow(t, db, a.ID, 10, a.Version, "round", round)
	}
}

// A write right after DB.Close fails as it does without gormlock ("sql:
// database is closed"), with a context that can end and with
// context.Background, although the gate kept its writer connection from
// the write just before; and that connection closes with it, so the
// database's -wal file is gone when Close has returned and the last write
// has failed (SQLite checkpoints and removes it when its last connection
// closes). Before, the kept connection took writes after Close for as
// long as they came within its linger (42 of 50 rounds).
func TestSQLiteWriteAfterCloseFails(t *testing.T) {
	for round := range 20 {
		path := filepath.Join(t.TempDir(), "closed.db")
		db, err := sqliteopen.Open(path)
		require.NoError(t, err)
		require.NoError(t, fixtures.Migrate(context.Background(), db))
		accounts, _ := repos(t, db)
		a := newAccount(t, accounts, "closing", 0)
		ctx, cancel := context.WithCancel(context.Background())
		if round%2 == 0 {
			cancel()
			ctx = context.Background()
		}
		for range 3 {
			a.Balance++
			require.NoError(t, accounts.Update(ctx, a))
		}
		sqlDB, err := db.DB()
		require.NoError(t, err)
		require.NoError(t, sqlDB.Close())
		a.Balance++
		err = accounts.Update(ctx, a)
		cancel()
		require.Error(t, err, "round %d: a write after DB.Close", round)
		require.Contains(t, err.Error(), "sql: database is closed", "round %d", round)
		_, statErr := os.Stat(path + "-wal")
		require.True(t, os.IsNotExist(statErr), "round %d: the -wal file is still there: a connection is open", round)
		reopened, err := sqliteopen.Open(path)
		require.NoError(t, err)
		var balance int64
		require.NoError(t, reopened.Raw("SELECT balance FROM accounts WHERE id = ?", a.ID).Scan(&balance).Error)
		require.EqualValues(t, 3, balance, "round %d: the three writes before Close, not the one after", round)
		require.NoError(t, fixtures.Close(reopened))
	}
}
