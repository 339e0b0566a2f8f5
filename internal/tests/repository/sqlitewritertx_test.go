package repository_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	gormsqlite "gorm.io/driver/sqlite"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/sqlitegate"
	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	sqliteopen "github.com/gormlock/gormlock/opendb/sqlite"
	"github.com/gormlock/gormlock/repository"
)

// Locked attempts on SQLite run on the gate's writer connection
// (internal/sqlitegate, "Transactions on the writer connection"): their
// statements stay prepared there from one transaction to the next, and
// the connection goes back to the pool with its busy timeout as it was
// opened. A model with hooks keeps a transaction on a connection of its
// own, whose statements nothing keeps.
func TestSQLiteLockedMutateRunsOnTheWriterConnection(t *testing.T) {
	restore := sqlitegate.SetWriterLinger(time.Minute) // kept between the calls
	t.Cleanup(restore)
	db := testdb.Open(t, "sqlite")
	sqlDB, err := db.DB()
	require.NoError(t, err)
	accounts, _ := repos(t, db)
	a := newAccount(t, accounts, "ann", 0)
	ctx := context.Background()

	before := sqlitegate.OpenWriterStatements()
	_, err = accounts.MutateRowLocked(ctx, a.ID, func(x *fixtures.Account) error { x.Balance++; return nil })
	require.NoError(t, err)
	prepared := sqlitegate.OpenWriterStatements() - before
	// BEGIN IMMEDIATE, the read and COMMIT at least (an UPDATE ...
	// RETURNING run by Exec is not kept).
	require.GreaterOrEqual(t, prepared, int64(3), "the locked transaction's statements were not prepared on the writer connection")

	var rep repository.MutateReport
	var last *fixtures.Account
	for range 5 {
		last, err = accounts.MutateRowLocked(ctx, a.ID, func(x *fixtures.Account) error { x.Balance++; return nil }, repository.Report(&rep))
		require.NoError(t, err)
		require.Equal(t, 1, rep.Locked)
	}
	assert.Equal(t, prepared, sqlitegate.OpenWriterStatements()-before, "the next transactions prepared their statements again")
	balance, version, _ := rawAccount(t, db, a.ID)
	assert.Equal(t, int64(6), balance)
	assert.Equal(t, last.Version, version)

	// A model with hooks: its transaction runs the hooks' statements
	// too, so it keeps a connection of its own (no statement kept).
	require.NoError(t, db.AutoMigrate(&hookedNote{}))
	notes, err := repository.New[hookedNote](db)
	require.NoError(t, err)
	n := &hookedNote{ID: "n1", Title: "a", Body: "x"}
	require.NoError(t, notes.Create(ctx, n))
	now := sqlitegate.OpenWriterStatements()
	got, err := notes.MutateRowLocked(ctx, n.ID, func(x *hookedNote) error { x.Body = "y"; return nil })
	require.NoError(t, err)
	assert.Equal(t, "A", got.Title, "BeforeUpdate ran in the locked transaction")
	assert.LessOrEqual(t, sqlitegate.OpenWriterStatements(), now, "a hooked model's transaction prepared statements on the writer connection")

	// Given back, the connection has its busy timeout as opened.
	restore()
	require.Eventually(t, func() bool { return sqlDB.Stats().InUse == 0 }, 10*time.Second, time.Millisecond)
	want := sqliteopen.BusyTimeout.Milliseconds()
	var conns []*sql.Conn
	for range sqlDB.Stats().OpenConnections {
		c, err := sqlDB.Conn(ctx)
		require.NoError(t, err)
		conns = append(conns, c)
		var ms int64
		require.NoError(t, c.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&ms))
		assert.Equal(t, want, ms, "a connection went back to the pool with another busy timeout")
	}
	for _, c := range conns {
		require.NoError(t, c.Close())
	}
}

// In rollback-journal mode a COMMIT waits for the readers to finish. A
// locked Mutate on the writer connection, whose busy timeout is 0, waits
// for them as long as the connection's own busy timeout would have let
// it, instead of failing at once: a reader holding its read open for
// 200 ms delays the commit, and no increment is lost.
func TestSQLiteLockedMutateCommitWaitsForReadersInRollbackJournalMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	db, err := gorm.Open(gormsqlite.Open("file:"+path+"?_journal_mode=DELETE&_busy_timeout=5000"), &gorm.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = fixtures.Close(db) })
	require.NoError(t, fixtures.Migrate(context.Background(), db))
	sqlDB, err := db.DB()
	require.NoError(t, err)
	var mode string
	require.NoError(t, sqlDB.QueryRow("PRAGMA journal_mode").Scan(&mode))
	require.Equal(t, "delete", mode)
	accounts, _ := repos(t, db)
	a := newAccount(t, accounts, "ann", 0)
	ctx := context.Background()
	_, err = accounts.MutateRowLocked(ctx, a.ID, func(x *fixtures.Account) error { x.Balance++; return nil })
	require.NoError(t, err) // the writer connection is set up

	for round := range 3 {
		// A reader in the middle of a query holds SQLite's SHARED lock.
		reader, err := sqlDB.Conn(ctx)
		require.NoError(t, err)
		rows, err := reader.QueryContext(ctx, "SELECT id FROM accounts")
		require.NoError(t, err)
		require.True(t, rows.Next())
		var wg sync.WaitGroup
		wg.Go(func() {
			time.Sleep(200 * time.Millisecond)
			_ = rows.Close()
			_ = reader.Close()
		})
		began := time.Now()
		_, err = accounts.MutateRowLocked(ctx, a.ID, func(x *fixtures.Account) error { x.Balance++; return nil })
		took := time.Since(began)
		wg.Wait()
		require.NoError(t, err, "round %d: the COMMIT did not wait for the reader", round)
		assert.GreaterOrEqual(t, took, 150*time.Millisecond, "round %d: committed while a reader held its lock", round)
	}
	balance, _, _ := rawAccount(t, db, a.ID)
	assert.Equal(t, int64(4), balance)
}

// A transaction on the writer connection that ended sends nothing more:
// the connection is the gate's again (another writer's next), so a
// statement sent on the ended transaction fails unsent, as one on a
// transaction's closed connection does.
func TestSQLiteWriterTransactionSendsNothingAfterItEnded(t *testing.T) {
	defer sqlitegate.SetWriterLinger(time.Minute)()
	db := testdb.Open(t, "sqlite")
	sqlDB, err := db.DB()
	require.NoError(t, err)
	accounts, _ := repos(t, db)
	a := newAccount(t, accounts, "ann", 7)
	ctx := context.Background()
	for _, end := range []string{"commit", "rollback"} {
		tx, err := sqlitegate.Begin(ctx, sqlDB, sqlitegate.Wait{OnWriter: true}, false)
		require.NoError(t, err)
		require.NotNil(t, tx.Writer(), "the transaction is not on the writer connection")
		if end == "commit" {
			require.NoError(t, tx.Commit())
		} else {
			require.NoError(t, tx.Rollback())
		}
		_, err = tx.ExecContext(ctx, "UPDATE accounts SET balance = 99 WHERE id = ?", a.ID)
		require.ErrorIs(t, err, sql.ErrTxDone, "after %s", end)
		_, err = tx.QueryContext(ctx, "UPDATE accounts SET balance = 98 WHERE id = ? RETURNING balance", a.ID)
		require.ErrorIs(t, err, sql.ErrTxDone, "after %s", end)
		var n int64
		ended, cancel := context.WithCancel(ctx)
		cancel() // ErrTxDone whatever the context
		require.ErrorIs(t, tx.QueryRowContext(ended, "UPDATE accounts SET balance = 97 WHERE id = ? RETURNING balance", a.ID).Scan(&n), sql.ErrTxDone, "after %s", end)
		_, err = tx.PrepareContext(ctx, "UPDATE accounts SET balance = 96 WHERE id = ?")
		require.ErrorIs(t, err, sql.ErrTxDone, "after %s", end)
		require.ErrorIs(t, tx.Commit(), sql.ErrTxDone)
		balance, _, _ := rawAccount(t, db, a.ID)
		require.Equal(t, int64(7), balance, "a statement ran after the transaction's %s", end)
	}
}

// A locked Mutate that cannot have SQLite's lock (another connection
// holds it, and the call said NoWait or LockTimeout) leaves no
// transaction open on the writer connection: once the holder commits,
// the next writes commit and other connections see them, and the next
// locked Mutate begins. The same with a pool of one connection, where
// the gate keeps no writer connection and the transaction takes the
// pool's, with its busy timeout restored for the application's use.
func TestSQLiteLockedMutateThatCannotLockLeavesNothingOpen(t *testing.T) {
	for _, maxConns := range []int{0, 1} {
		t.Run(map[int]string{0: "writer connection", 1: "pool of one"}[maxConns], func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "t.db")
			db, err := sqliteopen.Open(path)
			require.NoError(t, err)
			t.Cleanup(func() { _ = fixtures.Close(db) })
			require.NoError(t, fixtures.Migrate(context.Background(), db))
			sqlDB, err := db.DB()
			require.NoError(t, err)
			accounts, _ := repos(t, db)
			a := newAccount(t, accounts, "ann", 0)
			ctx := context.Background()
			_, err = accounts.MutateRowLocked(ctx, a.ID, func(x *fixtures.Account) error { x.Balance++; return nil })
			require.NoError(t, err)

			// Another process's writer (a database handle of its own, so
			// not this one's gate) holds SQLite's write lock.
			other, err := sqliteopen.Open(path)
			require.NoError(t, err)
			t.Cleanup(func() { _ = fixtures.Close(other) })
			otherDB, err := other.DB()
			require.NoError(t, err)
			holder, err := otherDB.Conn(ctx)
			require.NoError(t, err)
			_, err = holder.ExecContext(ctx, "BEGIN IMMEDIATE")
			require.NoError(t, err)
			if maxConns > 0 {
				sqlDB.SetMaxOpenConns(maxConns)
			}
			_, err = accounts.MutateRowLocked(ctx, a.ID, func(x *fixtures.Account) error { x.Balance += 100; return nil }, repository.NoWait())
			require.ErrorIs(t, err, locking.ErrLocked)
			_, err = accounts.MutateRowLocked(ctx, a.ID, func(x *fixtures.Account) error { x.Balance += 100; return nil }, repository.LockTimeout(50*time.Millisecond))
			require.ErrorIs(t, err, locking.ErrLockTimeout)
			_, err = holder.ExecContext(ctx, "COMMIT")
			require.NoError(t, err)
			require.NoError(t, holder.Close())

			got, err := accounts.MutateRowLocked(ctx, a.ID, func(x *fixtures.Account) error { x.Balance++; return nil })
			require.NoError(t, err, "a transaction was left open")
			got.Owner = "bob"
			require.NoError(t, accounts.Update(ctx, got))
			var balance int64
			var owner string
			require.NoError(t, otherDB.QueryRowContext(ctx, "SELECT balance, owner FROM accounts WHERE id = ?", a.ID).Scan(&balance, &owner))
			assert.Equal(t, int64(2), balance, "the refused calls wrote nothing, the others are committed")
			assert.Equal(t, "bob", owner, "the write after the refused calls is committed")
			if maxConns > 0 {
				require.Eventually(t, func() bool { return sqlDB.Stats().InUse == 0 }, 10*time.Second, time.Millisecond)
				var ms int64
				require.NoError(t, sqlDB.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&ms))
				assert.Equal(t, sqliteopen.BusyTimeout.Milliseconds(), ms, "the pool's connection came back with another busy timeout")
			}
		})
	}
}
