// Package testdb gives tests real, isolated databases: a fresh SQLite file
// per test, and a fresh PostgreSQL schema per test when a server is
// configured.
//
// Set GORMLOCK_POSTGRES_DSN (for example
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable) to run the
// PostgreSQL half of the tests. Without it they are skipped with a message
// naming the variable, unless CI=true, where a missing or unreachable server
// fails the test instead.
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

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/exampledb"
	"github.com/gormlock/gormlock/opendb"
)

// PostgresEnv is the environment variable holding the PostgreSQL DSN.
const PostgresEnv = "GORMLOCK_POSTGRES_DSN"

// Dialects lists the databases Each runs on, in order.
var Dialects = []string{"sqlite", "postgres"}

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
// exampledb.Migrate (gormlock's tables and the example models'), that is
// dropped when the test ends.
func Open(t testing.TB, dialect string) *gorm.DB {
	t.Helper()
	var db *gorm.DB
	switch dialect {
	case "sqlite":
		db = SQLite(t)
	case "postgres":
		db = Postgres(t)
	default:
		t.Fatalf("testdb: unknown dialect %q", dialect)
	}
	if err := exampledb.Migrate(context.Background(), db); err != nil {
		t.Fatalf("testdb: migrate %s: %v", dialect, err)
	}
	return db
}

// SQLite returns an empty SQLite database in a new file under t.TempDir(),
// opened with opendb.SQLite.
func SQLite(t testing.TB) *gorm.DB {
	t.Helper()
	return sqliteAt(t, filepath.Join(t.TempDir(), "test.db"))
}

// OpenSQLiteFile opens (creating) the SQLite file at path with
// opendb.SQLite and migrates it as Open does, for tests that open a second
// client of the same file.
func OpenSQLiteFile(t testing.TB, path string) *gorm.DB {
	t.Helper()
	db := sqliteAt(t, path)
	if err := exampledb.Migrate(context.Background(), db); err != nil {
		t.Fatalf("testdb: migrate %s: %v", path, err)
	}
	return db
}

func sqliteAt(t testing.TB, path string) *gorm.DB {
	t.Helper()
	db, err := opendb.SQLite(path)
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	t.Cleanup(func() { _ = opendb.Close(db) })
	return db
}

// PostgresDSN returns the configured DSN, skipping the test when none is set
// (failing it under CI=true).
func PostgresDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(PostgresEnv)
	if dsn == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("testdb: CI=true but %s is not set; CI must test PostgreSQL", PostgresEnv)
		}
		t.Skipf("PostgreSQL tests skipped: set %s=postgres://postgres@127.0.0.1:5432/test?sslmode=disable to run them", PostgresEnv)
	}
	return dsn
}

// Postgres returns a connection to a new, empty schema of the configured
// PostgreSQL database; the schema is dropped when the test ends.
func Postgres(t testing.TB) *gorm.DB {
	t.Helper()
	db, err := opendb.Postgres(PostgresSchema(t))
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	sqlDB, _ := db.DB()
	sqlDB.SetMaxOpenConns(40)
	t.Cleanup(func() { _ = opendb.Close(db) })
	return db
}

// PostgresSchema creates a new, empty schema in the configured PostgreSQL
// database and returns a DSN whose search_path is that schema, for code that
// opens its own connection. The schema is dropped when the test ends, after
// the cleanups registered later (closing that code's connections) ran.
func PostgresSchema(t testing.TB) string {
	t.Helper()
	dsn := PostgresDSN(t)
	admin, err := opendb.Postgres(dsn)
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
		_ = opendb.Close(admin)
	})
	return exampledb.WithSearchPath(dsn, schema)
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
