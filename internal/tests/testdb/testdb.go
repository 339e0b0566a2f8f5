// Package testdb gives tests real, isolated databases: a fresh SQLite file
// per test, a fresh PostgreSQL schema per test and a fresh MariaDB (or
// MySQL) database per test when a server is configured.
//
// Set GORMLOCK_POSTGRES_DSN (for example
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable) to run the
// PostgreSQL half of the tests, and GORMLOCK_MARIADB_DSN (for example
// root@tcp(127.0.0.1:3306)/test?parseTime=true, a user allowed to create and
// drop databases) to run the MariaDB half. Without a variable those tests
// are skipped with a message naming it, unless CI=true, where a missing or
// unreachable server fails the test instead.
package testdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	mysqlopen "github.com/gormlock/gormlock/opendb/mysql"
	pgopen "github.com/gormlock/gormlock/opendb/postgres"
	sqliteopen "github.com/gormlock/gormlock/opendb/sqlite"

	"github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
)

// PostgresEnv is the environment variable holding the PostgreSQL DSN.
const PostgresEnv = "GORMLOCK_POSTGRES_DSN"

// MariaDBEnv is the environment variable holding the MariaDB (or MySQL)
// DSN, in go-sql-driver/mysql's form.
const MariaDBEnv = "GORMLOCK_MARIADB_DSN"

// Dialects lists the databases Each runs on, in order.
var Dialects = []string{"sqlite", "postgres", "mariadb"}

// Each runs fn as a subtest on every database, each with a freshly migrated
// database of its own.
func Each(t *testing.T, fn func(t *testing.T, db *gorm.DB)) {
	t.Helper()
	for _, d := range Dialects {
		t.Run(d, func(t *testing.T) {
			fn(t, Open(t, d))
		})
	}
}

// Open returns a fresh database of the given dialect, migrated with
// fixtures.Migrate (gormlock's tables and the example models'), that is
// dropped when the test ends.
func Open(t testing.TB, dialect string) *gorm.DB {
	t.Helper()
	var db *gorm.DB
	switch dialect {
	case "sqlite":
		db = SQLite(t)
	case "postgres":
		db = Postgres(t)
	case "mariadb":
		db = MariaDB(t)
	default:
		t.Fatalf("testdb: unknown dialect %q", dialect)
	}
	if err := fixtures.Migrate(context.Background(), db); err != nil {
		t.Fatalf("testdb: migrate %s: %v", dialect, err)
	}
	return db
}

// SQLite returns an empty SQLite database in a new file under t.TempDir(),
// opened with sqlite.Open.
func SQLite(t testing.TB) *gorm.DB {
	t.Helper()
	return sqliteAt(t, filepath.Join(t.TempDir(), "test.db"))
}

// OpenSQLiteFile opens (creating) the SQLite file at path with
// sqlite.Open and migrates it as Open does, for tests that open a second
// client of the same file.
func OpenSQLiteFile(t testing.TB, path string) *gorm.DB {
	t.Helper()
	db := sqliteAt(t, path)
	if err := fixtures.Migrate(context.Background(), db); err != nil {
		t.Fatalf("testdb: migrate %s: %v", path, err)
	}
	return db
}

func sqliteAt(t testing.TB, path string) *gorm.DB {
	t.Helper()
	db, err := sqliteopen.Open(path)
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	t.Cleanup(func() { _ = fixtures.Close(db) })
	return db
}

// PostgresDSN returns the configured DSN, skipping the test when none is set
// (failing it under CI=true).
func PostgresDSN(t testing.TB) string {
	t.Helper()
	return serverDSN(t, PostgresEnv, "PostgreSQL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
}

// serverDSN returns the DSN in the environment variable env, skipping the
// test when it is not set — failing it under CI=true, where every server
// must be tested. example is what the skip message suggests.
func serverDSN(t testing.TB, env, server, example string) string {
	t.Helper()
	dsn := os.Getenv(env)
	if dsn == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("testdb: CI=true but %s is not set; CI must test %s", env, server)
		}
		t.Skipf("%s tests skipped: set %s=%s to run them", server, env, example)
	}
	return dsn
}

// pooled returns db, opened for a test, with room for the tests' concurrent
// workers and closed when the test ends.
func pooled(t testing.TB, db *gorm.DB, err error) *gorm.DB {
	t.Helper()
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	sqlDB, _ := db.DB()
	sqlDB.SetMaxOpenConns(40)
	t.Cleanup(func() { _ = fixtures.Close(db) })
	return db
}

// Postgres returns a connection to a new, empty schema of the configured
// PostgreSQL database; the schema is dropped when the test ends.
func Postgres(t testing.TB) *gorm.DB {
	t.Helper()
	db, err := pgopen.Open(PostgresSchema(t))
	return pooled(t, db, err)
}

// PostgresSchema creates a new, empty schema in the configured PostgreSQL
// database and returns a DSN whose search_path is that schema, for code that
// opens its own connection. The schema is dropped when the test ends, after
// the cleanups registered later (closing that code's connections) ran.
func PostgresSchema(t testing.TB) string {
	t.Helper()
	dsn := PostgresDSN(t)
	admin, err := pgopen.Open(dsn)
	if err != nil {
		t.Fatalf("testdb: cannot reach PostgreSQL at %s=%q: %v", PostgresEnv, dsn, err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	schema := "gl_test_" + hex.EncodeToString(b)
	if err := admin.Exec("CREATE SCHEMA " + schema).Error; err != nil {
		t.Fatalf("testdb: create schema: %v", err)
	}
	t.Cleanup(func() {
		if err := admin.Exec("DROP SCHEMA " + schema + " CASCADE").Error; err != nil {
			t.Errorf("testdb: drop schema %s: %v", schema, err)
		}
		_ = fixtures.Close(admin)
	})
	return fixtures.WithSearchPath(dsn, schema)
}

// MariaDBDSN returns the configured MariaDB DSN, skipping the test when
// none is set (failing it under CI=true).
func MariaDBDSN(t testing.TB) string {
	t.Helper()
	return serverDSN(t, MariaDBEnv, "MariaDB", "'root@tcp(127.0.0.1:3306)/test?parseTime=true'")
}

// MariaDB returns a connection, opened with mysql.Open, to a new, empty
// database on the configured MariaDB server; the database is dropped when
// the test ends.
func MariaDB(t testing.TB) *gorm.DB {
	t.Helper()
	db, err := mysqlopen.Open(MariaDBDatabase(t))
	return pooled(t, db, err)
}

// MariaDBDatabase creates a new, empty database (gl_test_ and random hex)
// on the configured MariaDB server and returns the configured DSN with that
// database in place of its own, for code that opens its own connection
// (with mysql.Open or OpenDSN, which add gormlock's settings). The
// database is dropped when the test ends, after the cleanups registered
// later (closing that code's connections) ran.
func MariaDBDatabase(t testing.TB) string {
	t.Helper()
	dsn := MariaDBDSN(t)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("testdb: %s is not a go-sql-driver/mysql DSN: %v", MariaDBEnv, err)
	}
	// The DROP below waits for the metadata locks of a transaction a test
	// left open; lock_wait_timeout bounds that wait (the server's default
	// is a day).
	admin, err := mysqlopen.Open(withMySQLParam(cfg, "lock_wait_timeout", "30"))
	if err != nil {
		t.Fatalf("testdb: cannot reach MariaDB at %s: %v", MariaDBEnv, err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "gl_test_" + hex.EncodeToString(b)
	if err := admin.Exec("CREATE DATABASE " + name + " CHARACTER SET utf8mb4").Error; err != nil {
		_ = fixtures.Close(admin)
		t.Fatalf("testdb: create database: %v", err)
	}
	t.Cleanup(func() {
		if err := admin.Exec("DROP DATABASE " + name).Error; err != nil {
			t.Errorf("testdb: drop database %s: %v", name, err)
		}
		_ = fixtures.Close(admin)
	})
	cfg.DBName = name
	return cfg.FormatDSN()
}

// withMySQLParam returns the DSN of a copy of cfg with the session variable
// key set to value.
func withMySQLParam(cfg *mysql.Config, key, value string) string {
	c := cfg.Clone()
	if c.Params == nil {
		c.Params = map[string]string{}
	}
	c.Params[key] = value
	return c.FormatDSN()
}

// Ctx returns a context that bounds a test's database work to a minute, so a
// test that would hang on a lock fails instead.
func Ctx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// RawSQLite opens the SQLite file at path with plain database/sql and the
// given go-sqlite3 DSN parameters ("_busy_timeout=0&_txlock=deferred"), one
// connection only: a second, differently configured client of a test's file.
func RawSQLite(t testing.TB, path, params string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?"+params)
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = db.Close() })
	if err := db.Ping(); err != nil {
		t.Fatalf("testdb: open %s: %v", path, err)
	}
	return db
}
