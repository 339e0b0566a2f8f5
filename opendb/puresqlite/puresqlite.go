// Package puresqlite opens a SQLite database file for gormlock through a
// pure-Go driver, github.com/glebarez/sqlite (a GORM dialector over
// github.com/glebarez/go-sqlite, a fork of modernc.org/sqlite: SQLite
// translated to Go), with the settings of package
// [github.com/gormlock/gormlock/opendb/sqlite]. A program that uses it builds
// with CGO_ENABLED=0.
//
//	db, err := puresqlite.Open("app.db")
//
// With this driver: a COMMIT that fails leaves SQLite's transaction open on
// the connection (gormlock's own transactions roll it back; a
// db.Transaction of your own does not); do not add _time_format to the DSN
// (the driver then ignores _txlock); do not link modernc.org/sqlite beside
// it (both register the driver name "sqlite"). Its errors are
// *sqlite.Error of github.com/glebarez/go-sqlite for errors.As.
package puresqlite

import (
	"fmt"
	"strconv"

	"github.com/glebarez/sqlite"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/opener"
)

// BusyTimeout is how long a connection waits for another connection's write
// lock before giving up with SQLITE_BUSY.
const BusyTimeout = opener.SQLiteBusyTimeout

// DSN returns the data source name Open uses for the database file at path,
// in the form of the modernc.org/sqlite family of drivers: the settings of
// package opendb/sqlite as _pragma parameters, run on every new connection
// in order (busy_timeout first, so that switching to WAL waits for a lock
// held by another process), and _txlock=immediate, so every transaction
// begins with BEGIN IMMEDIATE. An empty path, ":memory:", a URI or a path
// with '?' or '#' gives an error matching locking.ErrInvalidArgument.
//
// It sets no _time_format: github.com/glebarez/go-sqlite v1.21 ignores
// _txlock when _time_format is given.
func DSN(path string) (string, error) {
	if err := opener.CheckSQLitePath("puresqlite", path); err != nil {
		return "", err
	}
	return opener.SQLiteURI(path) +
		"?_pragma=busy_timeout(" + strconv.FormatInt(BusyTimeout.Milliseconds(), 10) + ")" +
		"&_pragma=journal_mode(WAL)" +
		"&_pragma=foreign_keys(1)" +
		"&_pragma=synchronous(NORMAL)" +
		"&_txlock=immediate", nil
}

// Open opens (creating if needed) the SQLite database file at path with the
// settings DSN describes. opts are passed to gorm.Open; without any, GORM's
// logger is silenced. It checks on the first connection that the settings
// took effect; when they did not, the error matches
// locking.ErrNotSupported and the pool is closed.
func Open(path string, opts ...gorm.Option) (*gorm.DB, error) {
	dsn, err := DSN(path)
	if err != nil {
		return nil, err
	}
	db, err := gorm.Open(sqlite.Open(dsn), opener.Defaults(opts)...)
	if err != nil {
		return nil, fmt.Errorf("puresqlite: open %s: %w", path, err)
	}
	if err := opener.CheckSQLiteSettings(db, "the driver must read modernc.org/sqlite's _pragma parameters"); err != nil {
		_ = opener.Close(db)
		return nil, fmt.Errorf("puresqlite: open %s: %w", path, err)
	}
	return db, nil
}
