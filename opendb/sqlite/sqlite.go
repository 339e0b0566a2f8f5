// Package sqlite opens a SQLite database file for gormlock through
// gorm.io/driver/sqlite (github.com/mattn/go-sqlite3, which needs cgo), with
// the settings gormlock's guarantees rely on.
//
//	db, err := sqlite.Open("app.db") // WAL, busy timeout, BEGIN IMMEDIATE
//	if err != nil {
//		log.Fatal(err)
//	}
//	repo, err := repository.New[Invoice](db)
//
// SQLite is the embedded default for local development. Opened with [Open],
// it runs in WAL mode (readers never block the writer), waits up to
// [BusyTimeout] for the write lock instead of failing with "database is
// locked", and begins every transaction with BEGIN IMMEDIATE, so a
// transaction takes the write lock up front and never fails half-way when it
// upgrades from reading to writing. The price: transactions, even read-only
// ones, run one at a time.
//
// The driver is C: in a program built with CGO_ENABLED=0, Open returns an
// error matching [locking.ErrNotSupported]. Package
// github.com/gormlock/gormlock/opendb/puresqlite opens the file with the same
// settings through a pure-Go driver.
package sqlite

import (
	"fmt"
	"net/url"
	"strconv"

	"gorm.io/driver/sqlite"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/opener"
	"github.com/gormlock/gormlock/locking"
)

// BusyTimeout is how long a connection waits for another connection's write
// lock before giving up with SQLITE_BUSY.
const BusyTimeout = opener.SQLiteBusyTimeout

// DSN returns the go-sqlite3 data source name Open uses for the database
// file at path: WAL journal, busy timeout, immediate transactions, foreign
// keys on, synchronous=NORMAL (durable across application crashes, the
// usual setting with WAL). An empty path, ":memory:", a URI or a path with
// '?' or '#' gives an error matching locking.ErrInvalidArgument.
func DSN(path string) (string, error) {
	if err := opener.CheckSQLitePath("sqlite", path); err != nil {
		return "", err
	}
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_busy_timeout", strconv.FormatInt(BusyTimeout.Milliseconds(), 10))
	q.Set("_txlock", "immediate")
	q.Set("_foreign_keys", "on")
	q.Set("_synchronous", "NORMAL")
	return opener.SQLiteURI(path) + "?" + q.Encode(), nil
}

// Open opens (creating if needed) the SQLite database file at path with the
// settings DSN describes. opts are passed to gorm.Open; without any, GORM's
// logger is silenced.
//
// In a program built with CGO_ENABLED=0, Open returns an error matching
// locking.ErrNotSupported that names the remedies (build with cgo, or open
// the file with package puresqlite), and creates no file.
func Open(path string, opts ...gorm.Option) (*gorm.DB, error) {
	dsn, err := DSN(path)
	if err != nil {
		return nil, err
	}
	if !cgoEnabled {
		return nil, errNoCgo(path)
	}
	db, err := gorm.Open(sqlite.Open(dsn), opener.Defaults(opts)...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	return db, nil
}

// errNoCgo is Open's error in a program built without cgo.
func errNoCgo(path string) error {
	return fmt.Errorf("%w: sqlite: open %s: gorm.io/driver/sqlite needs cgo (its driver, github.com/mattn/go-sqlite3, is C) and this program was built with CGO_ENABLED=0; "+
		"build it with CGO_ENABLED=1 and a C compiler, or open the file with github.com/gormlock/gormlock/opendb/puresqlite",
		locking.ErrNotSupported, path)
}
