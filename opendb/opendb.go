// Package opendb opens the databases gormlock supports with the settings its
// guarantees rely on.
//
// The smallest complete program:
//
//	package main
//
//	import (
//		"log"
//
//		"github.com/gormlock/gormlock/opendb"
//	)
//
//	func main() {
//		db, err := opendb.SQLite("app.db") // WAL, busy timeout, BEGIN IMMEDIATE
//		if err != nil {
//			log.Fatal(err)
//		}
//		defer opendb.Close(db)
//		// db is a *gorm.DB: pass it to repository.New, migrations.Up, ...
//	}
//
// SQLite is the embedded default for local development. Opened with SQLite,
// it runs in WAL mode (readers never block the writer), waits up to
// SQLiteBusyTimeout for the write lock instead of failing with "database is
// locked", and begins every transaction with BEGIN IMMEDIATE, so a
// transaction takes the write lock up front and never fails half-way when it
// upgrades from reading to writing. The price: transactions, even read-only
// ones, run one at a time.
//
// SQLite uses gorm.io/driver/sqlite, whose driver (github.com/mattn/go-sqlite3)
// is C and needs cgo: in a program built with CGO_ENABLED=0 it returns an
// error matching locking.ErrNotSupported. PureGoSQLite opens the file with the
// same settings through a pure-Go driver (github.com/glebarez/sqlite) that
// the caller passes in, so opendb itself never links one.
//
// PostgreSQL is the production database; Postgres opens it through pgx, in
// Go: a Postgres-only program builds with CGO_ENABLED=0.
//
// MySQL and MariaDB open with MySQL, through gorm.io/driver/mysql and
// go-sql-driver/mysql, in Go too. MySQLDSN adds to the DSN what gormlock
// needs of every connection: clientFoundRows (an UPDATE that rewrites the
// values a record has reports its row, instead of reading as stale), times
// read as time.Time in UTC in a UTC session, utf8mb4, and a strict
// sql_mode; MySQL also keeps GORM's times to the microsecond
// (MySQLDatetimePrecision).
package opendb

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"gorm.io/driver/postgres"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/gormlock/gormlock/locking"
)

// SQLiteBusyTimeout is how long a SQLite connection waits for another
// connection's write lock before giving up with SQLITE_BUSY.
const SQLiteBusyTimeout = 10 * time.Second

// SQLiteDSN returns the go-sqlite3 data source name SQLite uses for the
// database file at path: WAL journal, busy timeout, immediate transactions,
// foreign keys on, synchronous=NORMAL (durable across application crashes,
// the usual setting with WAL).
func SQLiteDSN(path string) (string, error) {
	if err := checkSQLitePath(path); err != nil {
		return "", err
	}
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_busy_timeout", fmt.Sprint(SQLiteBusyTimeout.Milliseconds()))
	q.Set("_txlock", "immediate")
	q.Set("_foreign_keys", "on")
	q.Set("_synchronous", "NORMAL")
	return sqliteURI(path) + "?" + q.Encode(), nil
}

// checkSQLitePath refuses a path that is not a plain file path: SQLite
// would open something else than the file named, or an in-memory database
// per connection.
func checkSQLitePath(path string) error {
	switch {
	case path == "":
		return locking.Invalid("opendb: SQLite path is empty")
	case path == ":memory:" || strings.Contains(path, "mode=memory"):
		return locking.Invalid("opendb: in-memory SQLite gives every pooled connection its own empty database; use a file (for tests, one in t.TempDir())")
	case strings.HasPrefix(path, "file:"):
		return locking.Invalid("opendb: SQLite path %q is a URI; pass a plain file path", path)
	case strings.ContainsAny(path, "?#"):
		return locking.Invalid("opendb: SQLite path %q contains '?' or '#'; pass a plain file path", path)
	}
	return nil
}

// sqliteURI returns the file: URI of path, without a query. SQLite decodes
// %XX in URI file names: '%' is escaped so the file opened is the one named.
func sqliteURI(path string) string {
	return "file:" + strings.ReplaceAll(path, "%", "%25")
}

// SQLite opens (creating if needed) the SQLite database file at path with the
// settings SQLiteDSN describes, through gorm.io/driver/sqlite. opts are
// passed to gorm.Open; without any, GORM's logger is silenced.
//
// That driver needs cgo: in a program built with CGO_ENABLED=0, SQLite
// returns an error matching locking.ErrNotSupported that names the remedies
// (build with cgo, or open the file with PureGoSQLite), and creates no file.
func SQLite(path string, opts ...gorm.Option) (*gorm.DB, error) {
	dsn, err := SQLiteDSN(path)
	if err != nil {
		return nil, err
	}
	if !cgoEnabled {
		return nil, errNoCgo(path)
	}
	db, err := gorm.Open(sqlite.Open(dsn), withDefaults(opts)...)
	if err != nil {
		return nil, fmt.Errorf("opendb: open SQLite %s: %w", path, err)
	}
	return db, nil
}

// Postgres opens a PostgreSQL database from a pgx connection string (a URL,
// postgres://user@host:5432/db, or key=value pairs). opts are passed to
// gorm.Open; without any, GORM's logger is silenced. It connects once to
// check the server is reachable.
func Postgres(dsn string, opts ...gorm.Option) (*gorm.DB, error) {
	if strings.TrimSpace(dsn) == "" {
		return nil, locking.Invalid("opendb: Postgres DSN is empty")
	}
	db, err := gorm.Open(postgres.Open(dsn), withDefaults(opts)...)
	if err != nil {
		return nil, fmt.Errorf("opendb: open Postgres: %w", err)
	}
	return db, nil
}

// Open chooses the database from dsn: a postgres:// or postgresql:// URL, or
// libpq key=value pairs starting with host=, dbname= or user=, open
// PostgreSQL; a mysql:// or mariadb:// DSN, or one in go-sql-driver/mysql's
// form with a network and address (user:password@tcp(host:3306)/dbname),
// opens MySQL or MariaDB with MySQL; "sqlite:PATH" or a plain file path
// opens SQLite with SQLite (so it needs cgo; see PureGoSQLite).
func Open(dsn string, opts ...gorm.Option) (*gorm.DB, error) {
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"), isKeyValueDSN(dsn):
		return Postgres(dsn, opts...)
	case isMySQLDSN(dsn):
		return MySQL(dsn, opts...)
	default:
		return SQLite(strings.TrimPrefix(dsn, "sqlite:"), opts...)
	}
}

// isKeyValueDSN reports whether dsn looks like libpq key=value settings
// rather than a file path.
func isKeyValueDSN(dsn string) bool {
	first, _, _ := strings.Cut(strings.TrimSpace(dsn), " ")
	for _, k := range []string{"host=", "dbname=", "user="} {
		if strings.HasPrefix(first, k) {
			return true
		}
	}
	return false
}

// Close closes db's connection pool.
func Close(db *gorm.DB) error {
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	return sqlDB.Close()
}

func withDefaults(opts []gorm.Option) []gorm.Option {
	if len(opts) > 0 {
		return opts
	}
	return []gorm.Option{&gorm.Config{Logger: logger.Discard}}
}
