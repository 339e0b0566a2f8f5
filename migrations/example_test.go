package migrations_test

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/migrations"
)

// FS returns the migration files, with their goose annotations, for an
// application that runs them with goose itself or copies them.
func ExampleFS() {
	fsys, err := migrations.FS("postgres")
	if err != nil {
		panic(err)
	}
	names, _ := fs.Glob(fsys, "*.sql")
	fmt.Println(names)

	_, err = migrations.FS("oracle")
	fmt.Println(errors.Is(err, locking.ErrNotSupported))
	// Output:
	// [00001_leases.sql 00002_operations.sql]
	// true
}

// UpStatements are ready for db.Exec one at a time, without comments.
func ExampleScript_UpStatements() {
	scripts, err := migrations.Scripts("sqlite")
	if err != nil {
		panic(err)
	}
	for _, stmt := range scripts[1].UpStatements() {
		fmt.Println(strings.Join(strings.Fields(stmt)[:3], " "), "...")
	}
	// Output:
	// CREATE TABLE gormlock_operations ...
	// CREATE INDEX gormlock_operations_expires_idx ...
}

// DownStatements undo a script's Up; run the scripts' newest first.
func ExampleScript_DownStatements() {
	scripts, err := migrations.Scripts("mysql")
	if err != nil {
		panic(err)
	}
	for i := len(scripts) - 1; i >= 0; i-- {
		fmt.Println(scripts[i].DownStatements())
	}
	// Output:
	// [DROP TABLE gormlock_operations]
	// [DROP TABLE gormlock_leases]
}

// VersionTrigger gives the SQL of the version trigger for a migration tool:
// here a PostgreSQL migration for the tokens table, one statement at a
// time.
func ExampleVersionTrigger() {
	s, err := migrations.VersionTrigger("postgres", "tokens", "version", "id")
	if err != nil {
		panic(err)
	}
	for _, stmt := range s.UpStatements() {
		fmt.Println(strings.Join(strings.Fields(stmt)[:5], " "), "...")
	}
	for _, stmt := range s.DownStatements() {
		fmt.Println(stmt)
	}

	// SQLite's trigger finds the row by its key, so it needs the key
	// columns.
	_, err = migrations.VersionTrigger("sqlite", "tokens", "version")
	fmt.Println(errors.Is(err, locking.ErrInvalidArgument))
	// Output:
	// CREATE OR REPLACE FUNCTION "gormlock_version_tokens"() ...
	// CREATE OR REPLACE TRIGGER "gormlock_version_tokens" ...
	// CREATE OR REPLACE TRIGGER "gormlock_first_version_tokens" ...
	// DROP TRIGGER IF EXISTS "gormlock_first_version_tokens" ON "tokens"
	// DROP TRIGGER IF EXISTS "gormlock_version_tokens" ON "tokens"
	// DROP FUNCTION IF EXISTS "gormlock_version_tokens"()
	// true
}
