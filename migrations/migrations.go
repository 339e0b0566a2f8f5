// Package migrations holds gormlock's versioned SQL migrations, one folder per
// supported dialect (sqlite/, postgres/), embedded in the binary and applied
// with pressly/goose. Version 1 creates the example models' tables (accounts,
// documents); version 2 the work-queue example's (jobs);
// version 3 the lease table (gormlock_leases); version 4 the operation table
// (gormlock_operations).
//
//	if err := migrations.Up(ctx, db); err != nil { ... }
//
// The applied version is recorded in goose's table, goose_db_version.
package migrations

import (
	"context"
	"embed"
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/locking"
)

//go:embed sqlite/*.sql postgres/*.sql
var files embed.FS

var dialects = map[string]goose.Dialect{
	"sqlite":   goose.DialectSQLite3,
	"postgres": goose.DialectPostgres,
}

// FS returns the migration files of a dialect ("sqlite" or "postgres", as
// gorm's Dialector.Name reports it), for use with other tools.
func FS(dialect string) (fs.FS, error) {
	if _, ok := dialects[dialect]; !ok {
		return nil, fmt.Errorf("%w: migrations: no migrations for dialect %q", locking.ErrNotSupported, dialect)
	}
	return fs.Sub(files, dialect)
}

// Provider returns a goose provider of db's dialect's migrations, for
// status, up-to and down-to operations beyond Up and Down.
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
	p, err := goose.NewProvider(dialects[name], sqlDB, fsys)
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	return p, nil
}

// Up applies every migration not applied yet. ctx governs the whole run.
func Up(ctx context.Context, db *gorm.DB) error {
	p, err := Provider(db)
	if err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrations: up: %w", err)
	}
	return nil
}

// Down rolls back every applied migration, newest first. ctx governs the
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

// Version returns the newest applied migration version (0 when none).
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
