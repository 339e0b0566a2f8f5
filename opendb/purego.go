package opendb

import (
	"context"
	"fmt"
	"strconv"

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/locking"
)

// SQLite without cgo.
//
// gorm.io/driver/sqlite's driver is C. A program built with CGO_ENABLED=0
// opens SQLite through a pure-Go driver instead: github.com/glebarez/sqlite
// (a GORM dialector over github.com/glebarez/go-sqlite, a fork of
// modernc.org/sqlite, SQLite translated to Go). opendb does not import it, so
// a program that only uses PostgreSQL links no SQLite at all: the caller
// passes the dialector's constructor.

// PureGoSQLiteDSN returns the data source name PureGoSQLite uses for the
// database file at path, in the form of the modernc.org/sqlite family of
// drivers (github.com/glebarez/sqlite, modernc.org/sqlite): the settings of
// SQLiteDSN as _pragma parameters, run on every new connection in order
// (busy_timeout first, so that switching to WAL waits for a lock held by
// another process), and _txlock=immediate, so every transaction begins with
// BEGIN IMMEDIATE.
//
// It sets no _time_format: github.com/glebarez/go-sqlite v1.21 ignores
// _txlock when _time_format is given.
func PureGoSQLiteDSN(path string) (string, error) {
	if err := checkSQLitePath(path); err != nil {
		return "", err
	}
	return sqliteURI(path) +
		"?_pragma=busy_timeout(" + strconv.FormatInt(SQLiteBusyTimeout.Milliseconds(), 10) + ")" +
		"&_pragma=journal_mode(WAL)" +
		"&_pragma=foreign_keys(1)" +
		"&_pragma=synchronous(NORMAL)" +
		"&_txlock=immediate", nil
}

// PureGoSQLite opens (creating if needed) the SQLite database file at path
// with the settings of SQLite through a pure-Go driver, for programs built
// without cgo. open is the driver's GORM dialector constructor, which
// PureGoSQLite calls with PureGoSQLiteDSN(path):
//
//	import "github.com/glebarez/sqlite"
//
//	db, err := opendb.PureGoSQLite(sqlite.Open, "app.db")
//
// opts are passed to gorm.Open; without any, GORM's logger is silenced.
//
// It checks the settings took effect on the first connection; a dialector
// whose driver does not read the DSN's _pragma parameters (gorm.io/driver/sqlite's
// does not) gives an error matching locking.ErrNotSupported, and the pool is
// closed.
func PureGoSQLite(open func(dsn string) gorm.Dialector, path string, opts ...gorm.Option) (*gorm.DB, error) {
	if open == nil {
		return nil, locking.Invalid("opendb: PureGoSQLite needs a dialector constructor, such as github.com/glebarez/sqlite's Open")
	}
	dsn, err := PureGoSQLiteDSN(path)
	if err != nil {
		return nil, err
	}
	db, err := gorm.Open(open(dsn), withDefaults(opts)...)
	if err != nil {
		return nil, fmt.Errorf("opendb: open SQLite %s: %w", path, err)
	}
	if err := checkSQLiteSettings(db); err != nil {
		_ = Close(db)
		return nil, fmt.Errorf("opendb: open SQLite %s: %w", path, err)
	}
	return db, nil
}

// checkSQLiteSettings reads back, on one connection of db, the settings the
// DSN asked for.
func checkSQLiteSettings(db *gorm.DB) error {
	if name := db.Dialector.Name(); name != "sqlite" {
		return fmt.Errorf("%w: the dialector opened %q, not SQLite", locking.ErrNotSupported, name)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	ctx := context.Background()
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var (
		journal        string
		busy, fk, sync int64
	)
	for _, p := range []struct {
		pragma string
		dest   any
	}{
		{"PRAGMA journal_mode", &journal},
		{"PRAGMA busy_timeout", &busy},
		{"PRAGMA foreign_keys", &fk},
		{"PRAGMA synchronous", &sync},
	} {
		if err := conn.QueryRowContext(ctx, p.pragma).Scan(p.dest); err != nil {
			return fmt.Errorf("reading %s: %w", p.pragma, err)
		}
	}
	if journal != "wal" || busy != SQLiteBusyTimeout.Milliseconds() || fk != 1 || sync != 1 {
		return fmt.Errorf("%w: the driver did not apply the DSN's settings (journal_mode=%s busy_timeout=%d foreign_keys=%d synchronous=%d; want wal, %d, 1, 1): PureGoSQLite needs a driver that reads modernc.org/sqlite's _pragma parameters, such as github.com/glebarez/sqlite",
			locking.ErrNotSupported, journal, busy, fk, sync, SQLiteBusyTimeout.Milliseconds())
	}
	return nil
}

// errNoCgo is SQLite's error in a program built without cgo.
func errNoCgo(path string) error {
	return fmt.Errorf("%w: opendb: SQLite %s: gorm.io/driver/sqlite needs cgo (its driver, github.com/mattn/go-sqlite3, is C) and this program was built with CGO_ENABLED=0; "+
		"build it with CGO_ENABLED=1 and a C compiler, or open the file with a pure-Go driver: opendb.PureGoSQLite(sqlite.Open, path) with github.com/glebarez/sqlite",
		locking.ErrNotSupported, path)
}
