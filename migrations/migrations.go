package migrations

import (
	"context"
	"embed"
	"fmt"
	"io/fs"

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/locking"
)

// VersionTable is the table gormlock's migrations are recorded in, one row
// per applied version. Its columns are those of goose's version table (id,
// version_id, is_applied, tstamp, and a row for version 0 written when the
// table is created), under a name of gormlock's, so that an application's
// own migrations (in goose_db_version, or another tool's table) and
// gormlock's never skip each other.
const VersionTable = "gormlock_schema_version"

//go:embed sqlite/*.sql postgres/*.sql mysql/*.sql
var files embed.FS

// FS returns the migration files of a dialect ("sqlite", "postgres" or
// "mysql", as gorm's Dialector.Name reports it): 00001_leases.sql and
// 00002_operations.sql, each with a "-- +goose Up" and a "-- +goose Down"
// section, ready for an application that runs them with goose itself.
// Another dialect is an error matching locking.ErrNotSupported.
func FS(dialect string) (fs.FS, error) {
	if _, ok := dialects[dialect]; !ok {
		return nil, fmt.Errorf("migrations: %w: no migrations for dialect %q", locking.ErrNotSupported, dialect)
	}
	return fs.Sub(files, dialect)
}

// Up applies every migration of gormlock's not applied yet, oldest first,
// creating VersionTable when it is missing, and creates no other tables
// than gormlock's. A migration whose table exists already with the columns
// it creates is recorded as applied instead (see "Tables that exist
// already" in the package documentation); one whose table exists with
// other columns is an error matching locking.ErrSchemaMismatch, returned before any of
// gormlock's tables is created.
//
// Each migration runs in a transaction with its row in VersionTable on
// SQLite and PostgreSQL; on MySQL and MariaDB, whose DDL commits by itself,
// its statements run one after another. Processes that run Up at the same
// time apply each migration once: on PostgreSQL each transaction first
// takes a transaction-level advisory lock (safe behind a pooler in
// transaction mode), and elsewhere Up re-reads VersionTable and tries again
// when another process got there first.
//
// Up on an up-to-date database changes nothing. ctx governs the whole run.
// A nil db is an error matching locking.ErrInvalidArgument, a dialect other
// than sqlite, postgres and mysql one matching locking.ErrNotSupported.
func Up(ctx context.Context, db *gorm.DB) error {
	r, err := newRunner(db)
	if err != nil {
		return err
	}
	return r.up(ctx)
}

// Down rolls back every applied migration of gormlock's, newest first,
// dropping gormlock's tables; it touches no other table, and changes
// nothing when no migration is applied. ctx governs the whole run.
func Down(ctx context.Context, db *gorm.DB) error {
	r, err := newRunner(db)
	if err != nil {
		return err
	}
	return r.down(ctx)
}

// Version returns the newest of gormlock's migrations applied, as recorded
// in VersionTable: 0 when none is, or when VersionTable does not exist.
// It changes nothing.
func Version(ctx context.Context, db *gorm.DB) (int64, error) {
	r, err := newRunner(db)
	if err != nil {
		return 0, err
	}
	st, err := r.read(db.WithContext(ctx))
	if err != nil {
		return 0, fmt.Errorf("migrations: version: %w", locking.Classify(err))
	}
	return st.newest(), nil
}
