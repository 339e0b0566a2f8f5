package repository_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	glebarez "github.com/glebarez/sqlite"
	"github.com/stretchr/testify/require"
	gormsqlite "gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/gormlock/gormlock/internal/sqlitegate"
	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/opendb/puresqlite"
	"github.com/gormlock/gormlock/repository"
)

// Checkpoints off the writer's turn (internal/sqlitegate, checkpoint.go):
// the gate's writer connection runs with wal_autocheckpoint = 0 while the
// gate keeps it, and the gate checkpoints the log itself. The log must stay
// bounded as SQLite's own checkpoints keep it, the connections must go back
// to the pool with the setting they were opened with, and an application
// that checkpoints itself (wal_autocheckpoint = 0) must be left to.

// ckptWrites is how many guarded updates the tests make: without a
// checkpoint their log is over 4,000 pages of 4 KiB (each commit writes
// the row's page and its indexes' pages), well past walBound.
const ckptWrites = 5000

// walBound is the log's size the tests allow after ckptWrites updates
// with SQLite's default wal_autocheckpoint (1,000 pages): SQLite's own
// checkpoints keep it near 4 MB.
const walBound = 10 << 20

// updateMany makes n guarded updates of one new account through gormlock,
// with the gate keeping its writer connection throughout, and checks the
// exact outcome: balance n, and a version that moved with every update.
func updateMany(t *testing.T, db *gorm.DB, n int) {
	t.Helper()
	ctx := context.Background()
	restore := sqlitegate.SetWriterLinger(time.Minute)
	defer restore()
	accounts, err := repository.New[fixtures.Account](db)
	require.NoError(t, err)
	a := newAccount(t, accounts, "checkpoint", 0)
	first := a.Version
	for range n {
		a.Balance++
		require.NoError(t, accounts.Update(ctx, a))
	}
	balance, version, found := rawAccount(t, db, a.ID)
	require.True(t, found)
	require.EqualValues(t, n, balance)
	require.Greater(t, version, first)
	require.Equal(t, a.Version, version)
}

// walSize returns the size of path's write-ahead log.
func walSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path + "-wal")
	require.NoError(t, err)
	return fi.Size()
}

// poolAutocheckpoints returns the wal_autocheckpoint of every connection
// of sqlDB's pool, once the gate has given its writer connection back.
func poolAutocheckpoints(t *testing.T, sqlDB *sql.DB) []int64 {
	t.Helper()
	ctx := context.Background()
	require.Eventually(t, func() bool { return sqlDB.Stats().InUse == 0 }, 10*time.Second, time.Millisecond,
		"the writer connection is still out of the pool: %+v", sqlDB.Stats())
	n := sqlDB.Stats().OpenConnections
	conns := make([]*sql.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	var got []int64
	for range n {
		c, err := sqlDB.Conn(ctx)
		require.NoError(t, err)
		conns = append(conns, c)
		var pages int64
		require.NoError(t, c.QueryRowContext(ctx, "PRAGMA wal_autocheckpoint").Scan(&pages))
		got = append(got, pages)
	}
	return got
}

// gormlock's writes of a WAL database opened with SQLite's default
// wal_autocheckpoint are checkpointed by the gate, and the log stays
// within walBound; every connection goes back to the pool with
// wal_autocheckpoint 1,000. Negative control: the same writes on a
// connection that does not checkpoint grow the log past walBound, so the
// bound tells checkpoints from none.
func TestSQLiteWriterCheckpointsTheLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoint.db")
	db := testdb.OpenSQLiteFile(t, path)
	sqlDB, err := db.DB()
	require.NoError(t, err)

	updateMany(t, db, ckptWrites)
	require.Positive(t, sqlitegate.Checkpoints(sqlDB), "the gate started no checkpoint")
	t.Logf("log after %d updates: %d bytes, %d checkpoints", ckptWrites, walSize(t, path), sqlitegate.Checkpoints(sqlDB))
	require.Less(t, walSize(t, path), int64(walBound))
	for _, pages := range poolAutocheckpoints(t, sqlDB) {
		require.EqualValues(t, 1000, pages, "a connection went back to the pool with another wal_autocheckpoint")
	}

	t.Run("negative control: no checkpoint", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "nocheckpoint.db")
		plain := testdb.OpenSQLiteFile(t, path)
		sqlPlain, err := plain.DB()
		require.NoError(t, err)
		sqlPlain.SetMaxOpenConns(1) // the setting below is the one connection's
		require.NoError(t, plain.Exec("PRAGMA wal_autocheckpoint = 0").Error)
		a := &fixtures.Account{Owner: "plain", Balance: 0}
		a.Version = 1
		require.NoError(t, plain.Create(a).Error)
		for i := range ckptWrites {
			res := plain.Exec("UPDATE accounts SET balance = ?, version = ? WHERE id = ? AND version = ?", i+1, i+2, a.ID, i+1)
			require.NoError(t, res.Error)
			require.EqualValues(t, 1, res.RowsAffected)
		}
		t.Logf("log after %d updates: %d bytes", ckptWrites, walSize(t, path))
		require.Greater(t, walSize(t, path), int64(walBound))
	})
}

// A transaction that takes the gate's writer connection over (RunInTx,
// the application's statements) finds it as it was opened: its COMMIT
// checkpoints as SQLite would.
func TestSQLiteTransactionOnTheWriterConnectionCheckpointsItself(t *testing.T) {
	db := testdb.OpenSQLiteFile(t, filepath.Join(t.TempDir(), "txcheckpoint.db"))
	restore := sqlitegate.SetWriterLinger(time.Minute)
	defer restore()
	ctx := context.Background()
	accounts, err := repository.New[fixtures.Account](db)
	require.NoError(t, err)
	a := newAccount(t, accounts, "tx", 0)
	a.Balance++
	require.NoError(t, accounts.Update(ctx, a)) // the gate keeps its writer connection now
	var pages int64
	require.NoError(t, repository.RunInTx(ctx, db, func(ctx context.Context) error {
		return repository.Tx(ctx, db).Raw("PRAGMA wal_autocheckpoint").Scan(&pages).Error
	}))
	require.EqualValues(t, 1000, pages)
}

// An application that set wal_autocheckpoint itself is followed: 0 (it
// checkpoints itself) leaves the log to it — the gate starts no
// checkpoint, and the log grows past walBound as it would without
// gormlock; 200 keeps the log shorter than checkpoints by SQLite's default
// of 1,000 pages would, and the connections go back to the pool with 200.
func TestSQLiteWriterFollowsTheApplicationsAutocheckpoint(t *testing.T) {
	for _, pages := range []int64{0, 200} {
		t.Run("wal_autocheckpoint="+map[int64]string{0: "0", 200: "200"}[pages], func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "own.db")
			dsn, err := puresqlite.DSN(path)
			require.NoError(t, err)
			dsn += "&_pragma=wal_autocheckpoint(" + map[int64]string{0: "0", 200: "200"}[pages] + ")"
			db, err := gorm.Open(glebarez.Open(dsn), &gorm.Config{Logger: logger.Discard})
			require.NoError(t, err)
			t.Cleanup(func() { _ = fixtures.Close(db) })
			require.NoError(t, fixtures.Migrate(context.Background(), db))
			sqlDB, err := db.DB()
			require.NoError(t, err)

			updateMany(t, db, ckptWrites)
			for _, got := range poolAutocheckpoints(t, sqlDB) {
				require.Equal(t, pages, got)
			}
			if pages == 0 {
				require.Zero(t, sqlitegate.Checkpoints(sqlDB))
				require.Greater(t, walSize(t, path), int64(walBound))
				return
			}
			t.Logf("log after %d updates: %d bytes, %d checkpoints", ckptWrites, walSize(t, path), sqlitegate.Checkpoints(sqlDB))
			require.Positive(t, sqlitegate.Checkpoints(sqlDB))
			// By 200 pages the gate checkpoints about five times as
			// often as by SQLite's default of 1,000 (measured: 69-78
			// against 14-15 here), and the log stays at 1-3 MB (SQLite's
			// own checkpoints: 0.8 MB).
			require.GreaterOrEqual(t, sqlitegate.Checkpoints(sqlDB), int64(40))
			require.Less(t, walSize(t, path), int64(walBound/2))
		})
	}
}

// A database in rollback-journal mode is left alone: the gate's first
// write, made while another connection holds the database's lock, waits
// for the lock and applies (the gate asks for the journal mode while the
// connection's busy timeout is still its own), the gate starts no
// checkpoint, and the connections keep their wal_autocheckpoint.
func TestSQLiteRollbackJournalWriteWaitsForTheLock(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.db")
	dsn := "file:" + path + "?_busy_timeout=10000&_txlock=immediate" // rollback journal: SQLite's default
	open := func() *gorm.DB {
		db, err := gorm.Open(gormsqlite.Open(dsn), &gorm.Config{Logger: logger.Discard})
		require.NoError(t, err)
		t.Cleanup(func() { _ = fixtures.Close(db) })
		return db
	}
	setup := open()
	require.NoError(t, fixtures.Migrate(ctx, setup))
	a := &fixtures.Account{Owner: "journal", Balance: 1}
	a.Version = 1
	require.NoError(t, setup.Create(a).Error)

	// Another connection holds the lock for a while.
	holder, err := open().DB()
	require.NoError(t, err)
	hc, err := holder.Conn(ctx)
	require.NoError(t, err)
	defer hc.Close()
	_, err = hc.ExecContext(ctx, "BEGIN EXCLUSIVE")
	require.NoError(t, err)
	released := make(chan struct{})
	go func() {
		defer close(released)
		time.Sleep(300 * time.Millisecond)
		_, _ = hc.ExecContext(ctx, "COMMIT")
	}()

	db := open() // a pool with no connection yet: the first one reads the schema
	sqlDB, err := db.DB()
	require.NoError(t, err)
	accounts, err := repository.New[fixtures.Account](db)
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	a.Balance = 2
	require.NoError(t, accounts.Update(wctx, a))
	<-released
	balance, version, found := rawAccount(t, db, a.ID)
	require.True(t, found)
	require.EqualValues(t, 2, balance)
	require.Equal(t, a.Version, version)
	require.Zero(t, sqlitegate.Checkpoints(sqlDB))
	for _, pages := range poolAutocheckpoints(t, sqlDB) {
		require.EqualValues(t, 1000, pages)
	}
}
