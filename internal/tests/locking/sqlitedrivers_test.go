package locking_test

import (
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/opendb/puresqlite"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// sqliteDriver is one of the SQLite drivers GORM applications use, as the
// classification tests use it: the same SQLite conditions must be classified
// the same whichever driver reports them.
type sqliteDriver struct {
	name string
	// open returns an empty database in a new file, opened with opendb's
	// settings.
	open func(t *testing.T) *gorm.DB
	// raw opens the file at path with plain database/sql, one connection,
	// busy_timeout 0 and the given transaction mode ("deferred",
	// "immediate"): a second, differently configured client of the file.
	raw func(t *testing.T, path, txlock string) *sql.DB
	// code returns the extended result code the driver's own error type
	// carries, read the driver's own way.
	code func(err error) (int, bool)
}

// sqliteDrivers lists the drivers the tests run on: the pure-Go one always,
// and github.com/mattn/go-sqlite3 when built with cgo (sqlitedrivers_cgo_test.go).
var sqliteDrivers = []sqliteDriver{{
	name: "glebarez",
	open: func(t *testing.T) *gorm.DB {
		t.Helper()
		db, err := puresqlite.Open(filepath.Join(t.TempDir(), "test.db"))
		require.NoError(t, err)
		t.Cleanup(func() { _ = fixtures.Close(db) })
		return db
	},
	raw: func(t *testing.T, path, txlock string) *sql.DB {
		t.Helper()
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(0)&_txlock="+txlock)
		require.NoError(t, err)
		db.SetMaxOpenConns(1)
		t.Cleanup(func() { _ = db.Close() })
		require.NoError(t, db.Ping())
		return db
	},
	code: func(err error) (int, bool) {
		// github.com/glebarez/go-sqlite's *Error (a fork of
		// modernc.org/sqlite's): Code returns the extended code.
		var e interface{ Code() int }
		if errors.As(err, &e) {
			return e.Code(), true
		}
		return 0, false
	},
}}

// eachSQLiteDriver runs fn as a subtest on every driver.
func eachSQLiteDriver(t *testing.T, fn func(t *testing.T, d sqliteDriver)) {
	t.Helper()
	for _, d := range sqliteDrivers {
		t.Run(d.name, func(t *testing.T) { fn(t, d) })
	}
}

// SQLite extended result codes (https://sqlite.org/rescode.html), as the
// drivers report them.
const (
	codeBusy                 = 5
	codeBusySnapshot         = 5 | 2<<8
	codeConstraintForeignKey = 19 | 3<<8
	codeConstraintPrimaryKey = 19 | 6<<8
	codeConstraintUnique     = 19 | 8<<8
)
