//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package repository_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gormlock/gormlock/internal/tests/fixtures"

	"github.com/stretchr/testify/require"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

// sideLock is another process's turn on a SQLite file's lock file: a
// descriptor of its own, so its flock excludes gormlock's as another
// process's would.
type sideLock struct{ f *os.File }

func openSideLock(t *testing.T, dbPath string) *sideLock {
	t.Helper()
	f, err := os.OpenFile(dbPath+"-gormlock", os.O_RDWR|os.O_CREATE, 0o666)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	return &sideLock{f: f}
}

func (s *sideLock) try() bool {
	err := syscall.Flock(int(s.f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	return err == nil
}

func (s *sideLock) unlock(t *testing.T) {
	require.NoError(t, syscall.Flock(int(s.f.Fd()), syscall.LOCK_UN))
}

// A gormlock writer of a SQLite file takes its turn on the file's lock
// file, "<file>-gormlock", before SQLite's write lock: while another
// process holds that turn, the writer waits for it (and not for SQLite's
// lock, which is free here), its wait is bounded like the wait for SQLite's
// lock and ends with the context, and nothing is written until it gets the
// turn.
func TestSQLiteWritersOfManyProcessesTakeTurns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "turns.db")
	db := testdb.OpenSQLiteFile(t, path)
	accounts, _ := repos(t, db)
	a := newAccount(t, accounts, "ann", 10) // opens the lock file
	_, err := os.Stat(path + "-gormlock")
	require.NoError(t, err, "the lock file is next to the database")

	other := openSideLock(t, path)
	require.True(t, other.try(), "nobody holds the turn between writes")
	inc := func(b *fixtures.Account) error { b.Balance++; return nil }

	// A bounded wait runs out with the lock options' errors.
	_, err = accounts.MutateRowLocked(context.Background(), a.ID, inc, repository.LockTimeout(30*time.Millisecond))
	require.ErrorIs(t, err, locking.ErrLockTimeout)
	var de *locking.DatabaseError
	require.ErrorAs(t, err, &de)
	require.Equal(t, "SQLITE_BUSY", de.Code)
	_, err = accounts.MutateRowLocked(context.Background(), a.ID, inc, repository.NoWait())
	require.ErrorIs(t, err, locking.ErrLocked)

	// A context ends the wait with its error.
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Millisecond)
	_, err = accounts.Mutate(ctx, a.ID, inc)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	requireRow(t, db, a.ID, 10, a.Version, "no write while another process had the turn")

	// A writer that waits gets the turn when the other process lets it go,
	// even though the waits above gave up on the same flock call.
	done := make(chan error, 1)
	go func() {
		_, err := accounts.Mutate(testdb.Ctx(t), a.ID, inc)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("the write did not wait for the other process's turn: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	other.unlock(t)
	require.NoError(t, <-done)
	got, err := accounts.Get(testdb.Ctx(t), a.ID)
	require.NoError(t, err)
	require.Equal(t, int64(11), got.Balance)

	// Between writes nobody holds the turn: the call left behind by the
	// writers that gave up let it go.
	require.Eventually(t, other.try, 5*time.Second, time.Millisecond, "a flock call left behind still holds the turn")
	other.unlock(t)
}

// A writer that gave up leaves its flock call behind; when that call gets
// the turn with nobody waiting for it, it lets the turn go, so the other
// processes are not locked out.
func TestSQLiteAbandonedTurnIsLetGo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "abandoned.db")
	db := testdb.OpenSQLiteFile(t, path)
	accounts, _ := repos(t, db)
	a := newAccount(t, accounts, "ann", 10)
	other := openSideLock(t, path)
	require.True(t, other.try())
	_, err := accounts.MutateRowLocked(context.Background(), a.ID, func(b *fixtures.Account) error { b.Balance++; return nil },
		repository.LockTimeout(20*time.Millisecond))
	require.ErrorIs(t, err, locking.ErrLockTimeout)
	other.unlock(t)
	third := openSideLock(t, path)
	require.Eventually(t, third.try, 5*time.Second, time.Millisecond, "the abandoned call kept the turn")
	third.unlock(t)
	requireRow(t, db, a.ID, 10, a.Version)
}

// Two clients of one file in one process (two *sql.DB, as two processes
// would open it) take turns too, and lose nothing.
func TestSQLiteTwoClientsOfOneFileLoseNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "two.db")
	db1 := testdb.OpenSQLiteFile(t, path)
	db2 := testdb.OpenSQLiteFile(t, path)
	acc1, _ := repos(t, db1)
	acc2, _ := repos(t, db2)
	a := newAccount(t, acc1, "ann", 0)
	const per = 100
	errs := make(chan error, 8)
	for w := range 8 {
		r := acc1
		if w%2 == 1 {
			r = acc2
		}
		go func() {
			for range per {
				if _, err := r.MutateRowLocked(testdb.Ctx(t), a.ID, func(b *fixtures.Account) error { b.Balance++; return nil }); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		require.NoError(t, <-errs)
	}
	got, err := acc1.Get(testdb.Ctx(t), a.ID)
	require.NoError(t, err)
	require.Equal(t, int64(8*per), got.Balance)
	require.Greater(t, got.Version, a.Version)
}
