package opendb_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gormlock/gormlock/opendb/puresqlite"

	puregosqlite "github.com/glebarez/sqlite"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/gormlock/gormlock/internal/opener"
	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
)

// The tests of PureGoSQLite need no cgo: `make nocgo` runs them (and
// TestSQLiteWithoutCgo) with CGO_ENABLED=0.

func openPureGo(t *testing.T, path string) *gorm.DB {
	t.Helper()
	db, err := puresqlite.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = fixtures.Close(db) })
	return db
}

// rawPureGo opens the SQLite file at path with plain database/sql through
// the pure-Go driver ("sqlite", registered by github.com/glebarez/go-sqlite),
// one connection only, with the given DSN parameters.
func rawPureGo(t *testing.T, path, params string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?"+params)
	require.NoError(t, err)
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = db.Close() })
	require.NoError(t, db.Ping())
	return db
}

// sqliteResultCode is the SQLite result code the pure-Go driver's error
// carries (its *Error has a Code method), or -1.
func sqliteResultCode(err error) int {
	var c interface{ Code() int }
	if errors.As(err, &c) {
		return c.Code()
	}
	return -1
}

func TestPureGoSQLiteDSN(t *testing.T) {
	dsn, err := puresqlite.DSN("/var/lib/app/data.db")
	require.NoError(t, err)
	assert.Equal(t, "file:/var/lib/app/data.db?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)&_txlock=immediate", dsn)
	dsn, err = puresqlite.DSN("100% sure.db")
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(dsn, "file:100%25 sure.db?"), dsn)
}

func TestPureGoSQLiteRejectsUnusablePaths(t *testing.T) {
	dir := t.TempDir()
	for _, path := range []string{
		"",
		":memory:",
		"file::memory:?cache=shared",
		"file:test.db?mode=memory&cache=shared",
		filepath.Join(dir, "data.db?_pragma=journal_mode(DELETE)"),
		filepath.Join(dir, "data.db#frag"),
	} {
		t.Run(path, func(t *testing.T) {
			dsn, err := puresqlite.DSN(path)
			require.ErrorIs(t, err, locking.ErrInvalidArgument)
			assert.Equal(t, "", dsn)
			db, err := puresqlite.Open(path)
			require.ErrorIs(t, err, locking.ErrInvalidArgument)
			assert.Nil(t, db)
		})
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "a refused call creates no file")
}

func TestPureGoSQLiteSettingsOnEveryConnection(t *testing.T) {
	ctx := testdb.Ctx(t)
	path := filepath.Join(t.TempDir(), "settings.db")
	db := openPureGo(t, path)
	sqlDB, err := db.DB()
	require.NoError(t, err)
	conns := make([]*sql.Conn, 3)
	for i := range conns {
		conns[i], err = sqlDB.Conn(ctx)
		require.NoError(t, err)
		defer conns[i].Close()
	}
	for i, conn := range conns {
		journal, busy, fk, sync := pragmas(t, ctx, conn)
		assert.Equal(t, "wal", journal, "connection %d", i)
		assert.Equal(t, 10000, busy, "connection %d", i)
		assert.Equal(t, 1, fk, "connection %d: foreign_keys", i)
		assert.Equal(t, 1, sync, "connection %d: synchronous=NORMAL", i)
	}
	assert.Equal(t, "sqlite", db.Dialector.Name())
	assert.Equal(t, logger.Discard, db.Logger, "without options GORM's logger is silenced")
	_, err = os.Stat(path)
	require.NoError(t, err, "the database is the file at the given path")

	// Negative control: the same driver without the settings.
	plain := rawPureGo(t, filepath.Join(t.TempDir(), "plain.db"), "")
	conn, err := plain.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	journal, busy, fk, sync := pragmas(t, ctx, conn)
	assert.Equal(t, "delete", journal)
	assert.Equal(t, 5000, busy, "the driver's own default")
	assert.Equal(t, 0, fk)
	assert.Equal(t, 2, sync, "SQLite's default, FULL")
}

func TestPureGoSQLiteTransactionsTakeTheWriteLockUpFront(t *testing.T) {
	for _, tt := range []struct {
		name      string
		open      func(t *testing.T, path string) *gorm.DB
		wantBusy  bool
		condition string
	}{
		{"opendb", openPureGo, true, "BEGIN IMMEDIATE holds the write lock from the start"},
		{"deferred (negative control)", func(t *testing.T, path string) *gorm.DB {
			require.NoError(t, fixtures.Close(openPureGo(t, path))) // sets WAL on the file
			plain, err := gorm.Open(puregosqlite.Open("file:"+path+"?_txlock=deferred"), &gorm.Config{Logger: logger.Discard})
			require.NoError(t, err)
			t.Cleanup(func() { _ = fixtures.Close(plain) })
			return plain
		}, false, "a deferred transaction that only read holds no write lock"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testdb.Ctx(t)
			path := filepath.Join(t.TempDir(), "tx.db")
			db := tt.open(t, path).WithContext(ctx)
			require.NoError(t, db.Exec(`CREATE TABLE items (id INTEGER PRIMARY KEY)`).Error)
			other := rawPureGo(t, path, "_pragma=busy_timeout(0)")

			tx := db.Begin()
			require.NoError(t, tx.Error)
			defer tx.Rollback()
			var n int64
			require.NoError(t, tx.Raw(`SELECT count(*) FROM items`).Scan(&n).Error) // a read only

			_, err := other.ExecContext(ctx, `INSERT INTO items (id) VALUES (1)`)
			if tt.wantBusy {
				require.Error(t, err, tt.condition)
				assert.Equal(t, 5, sqliteResultCode(err), "SQLITE_BUSY: %v", err)
			} else {
				require.NoError(t, err, tt.condition)
			}
		})
	}
}

// The settings check puresqlite.Open runs refuses a connection that did not
// apply them (a driver that ignores the DSN's _pragma parameters).
func TestPureGoSQLiteSettingsCheckRefusesIgnoredSettings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ignored.db")
	db, err := gorm.Open(puregosqlite.Open(path), &gorm.Config{Logger: logger.Discard}) // no settings
	require.NoError(t, err)
	defer fixtures.Close(db)
	err = opener.CheckSQLiteSettings(db, "use a driver that reads _pragma")
	require.ErrorIs(t, err, locking.ErrNotSupported)
	assert.Contains(t, err.Error(), "journal_mode=delete busy_timeout=5000 foreign_keys=0 synchronous=2")
	assert.Contains(t, err.Error(), "use a driver that reads _pragma")

	good := openPureGo(t, filepath.Join(t.TempDir(), "good.db"))
	require.NoError(t, opener.CheckSQLiteSettings(good, ""))
}

func TestPureGoSQLiteOpensTheFileNamedEvenWithPercent(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a%41b.db", "100% sure.db"} {
		path := filepath.Join(dir, name)
		db := openPureGo(t, path)
		require.NoError(t, db.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY)").Error, name)
		_, err := os.Stat(path)
		require.NoError(t, err, "the file %q exists under its own name", name)
	}
	_, err := os.Stat(filepath.Join(dir, "aAb.db"))
	require.True(t, os.IsNotExist(err), "no decoded twin was created")
}

// A file written through one driver is read through the other: the same
// SQLite file format, and gormlock's columns are integers and text.
func TestPureGoSQLiteSharesTheFileWithSQLite(t *testing.T) {
	if !cgo {
		t.Skip("sqlite.Open needs cgo")
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "shared.db")
	pure := openPureGo(t, path).WithContext(ctx)
	require.NoError(t, pure.Exec(`CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)`).Error)
	require.NoError(t, pure.Exec(`INSERT INTO t (id, v) VALUES (1, 'pure')`).Error)
	cgoDB := openSQLite(t, path).WithContext(ctx)
	var v string
	require.NoError(t, cgoDB.Raw(`SELECT v FROM t WHERE id = 1`).Scan(&v).Error)
	assert.Equal(t, "pure", v)
}
