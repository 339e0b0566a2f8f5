package migrations

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/locking"
)

// VersionTable is the table gormlock's migrations are recorded in: goose's
// version table under a name of gormlock's, so that an application's own
// goose migrations (in goose_db_version, or a table of its choice) and
// gormlock's never skip each other.
const VersionTable = "gormlock_schema_version"

//go:embed sqlite/*.sql postgres/*.sql mysql/*.sql
var files embed.FS

// dialects maps gorm's Dialector.Name to goose's dialect. "mysql" is the
// name of gorm.io/driver/mysql's dialector, for MySQL and MariaDB alike.
var dialects = map[string]goose.Dialect{
	"sqlite":   goose.DialectSQLite3,
	"postgres": goose.DialectPostgres,
	"mysql":    goose.DialectMySQL,
}

// FS returns the goose migration files of a dialect ("sqlite", "postgres" or
// "mysql", as gorm's Dialector.Name reports it): 00001_leases.sql and
// 00002_operations.sql, each with a "-- +goose Up" and a "-- +goose Down"
// section. Another dialect is an error matching locking.ErrNotSupported.
func FS(dialect string) (fs.FS, error) {
	if _, ok := dialects[dialect]; !ok {
		return nil, fmt.Errorf("%w: migrations: no migrations for dialect %q", locking.ErrNotSupported, dialect)
	}
	return fs.Sub(files, dialect)
}

// Provider returns a goose provider of gormlock's migrations for db's
// dialect, recording them in VersionTable, for status, up-to and down-to
// operations beyond Up and Down. Its Up does not adopt existing tables as
// Up does.
func Provider(db *gorm.DB) (*goose.Provider, error) {
	if db == nil {
		return nil, locking.Invalid("migrations: db is nil")
	}
	name := db.Dialector.Name()
	fsys, err := FS(name)
	if err != nil {
		return nil, err
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	p, err := goose.NewProvider(dialects[name], sqlDB, fsys, goose.WithTableName(VersionTable))
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	return p, nil
}

// Up applies every migration of gormlock's not applied yet, creating
// VersionTable when it is missing, and creates no other tables than
// gormlock's. A migration whose table exists already with the columns it
// creates is recorded as applied instead (see "Tables that exist already"
// in the package documentation); one whose table exists with other columns
// is an error matching ErrTableExists, returned before any of gormlock's
// tables is created.
// Up on an up-to-date database changes nothing. ctx governs the whole run.
func Up(ctx context.Context, db *gorm.DB) error {
	p, err := Provider(db)
	if err != nil {
		return err
	}
	if err := adopt(ctx, db, p); err != nil {
		if errors.Is(err, ErrTableExists) {
			return err // its text starts with "migrations:" already
		}
		return fmt.Errorf("migrations: up: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrations: up: %w", err)
	}
	return nil
}

// Down rolls back every applied migration of gormlock's, newest first,
// dropping gormlock's tables; it touches no other table. ctx governs the
// whole run.
func Down(ctx context.Context, db *gorm.DB) error {
	p, err := Provider(db)
	if err != nil {
		return err
	}
	if _, err := p.DownTo(ctx, 0); err != nil {
		return fmt.Errorf("migrations: down: %w", err)
	}
	return nil
}

// Version returns the newest of gormlock's migrations applied (0 when
// none), as recorded in VersionTable, which it creates when it is missing.
func Version(ctx context.Context, db *gorm.DB) (int64, error) {
	p, err := Provider(db)
	if err != nil {
		return 0, err
	}
	v, err := p.GetDBVersion(ctx)
	if err != nil {
		return 0, fmt.Errorf("migrations: version: %w", err)
	}
	return v, nil
}
