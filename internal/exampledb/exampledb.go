// Package exampledb opens the database of the example programs and the
// benchmark command: the one a DSN names, or an embedded SQLite file in a
// temporary directory, migrated either way with gormlock's migrations and
// the examples' own.
//
// The examples' migrations create the example models' tables (version 1:
// accounts and documents; version 2: jobs), one folder per dialect under
// migrations/ (sqlite, postgres, and mysql for MySQL and MariaDB), and are
// recorded in VersionTable, apart from gormlock's (package migrations) and
// from an application's goose_db_version.
package exampledb

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/migrations"
	"github.com/gormlock/gormlock/opendb"
)

// VersionTable is the goose version table of the examples' migrations.
const VersionTable = "gormlock_examples_version"

//go:embed migrations/sqlite/*.sql migrations/postgres/*.sql migrations/mysql/*.sql
var files embed.FS

// dialects maps gorm's Dialector.Name to goose's dialect; "mysql" is
// gorm.io/driver/mysql's, for MySQL and MariaDB.
var dialects = map[string]goose.Dialect{
	"sqlite":   goose.DialectSQLite3,
	"postgres": goose.DialectPostgres,
	"mysql":    goose.DialectMySQL,
}

// Provider returns a goose provider of the examples' migrations for db's
// dialect, recording them in VersionTable. Another dialect than sqlite,
// postgres and mysql is an error matching locking.ErrNotSupported.
func Provider(db *gorm.DB) (*goose.Provider, error) {
	if db == nil {
		return nil, locking.Invalid("exampledb: db is nil")
	}
	name := db.Dialector.Name()
	d, ok := dialects[name]
	if !ok {
		return nil, fmt.Errorf("%w: exampledb: no migrations for dialect %q", locking.ErrNotSupported, name)
	}
	fsys, err := fs.Sub(files, "migrations/"+name)
	if err != nil {
		return nil, err
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, fmt.Errorf("exampledb: %w", err)
	}
	p, err := goose.NewProvider(d, sqlDB, fsys, goose.WithTableName(VersionTable))
	if err != nil {
		return nil, fmt.Errorf("exampledb: %w", err)
	}
	return p, nil
}

// Migrate applies gormlock's migrations (migrations.Up: gormlock_leases,
// gormlock_operations) and then the examples' (accounts, documents, jobs),
// each set where it is not applied yet. Like migrations.Up, it takes an
// example migration whose tables all exist already (created by a gormlock
// whose own migrations created them) as applied. ctx governs the whole run.
func Migrate(ctx context.Context, db *gorm.DB) error {
	if err := migrations.Up(ctx, db); err != nil {
		return err
	}
	p, err := Provider(db)
	if err != nil {
		return err
	}
	if err := adopt(ctx, db, p); err != nil {
		return fmt.Errorf("exampledb: up: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("exampledb: up: %w", err)
	}
	return nil
}

// created lists, by version, the tables each of the examples' migrations
// creates.
var created = map[int64][]string{1: {"accounts", "documents"}, 2: {"jobs"}}

// adopt records as applied the pending migrations whose tables all exist,
// oldest first, up to the first one whose tables do not.
func adopt(ctx context.Context, db *gorm.DB, p *goose.Provider) error {
	status, err := p.Status(ctx)
	if err != nil {
		return err
	}
	var found []int64
	for _, st := range status {
		if st.State == goose.StateApplied {
			continue
		}
		tables := created[st.Source.Version]
		var exist int
		for _, t := range tables {
			if db.WithContext(ctx).Migrator().HasTable(t) {
				exist++
			}
		}
		if exist == 0 {
			break
		}
		if exist < len(tables) {
			return fmt.Errorf("migration %d creates %s, and only some of them exist",
				st.Source.Version, strings.Join(tables, ", "))
		}
		found = append(found, st.Source.Version)
	}
	if len(found) == 0 {
		return nil
	}
	store, err := database.NewStore(dialects[db.Dialector.Name()], VersionTable)
	if err != nil {
		return err
	}
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	tx, err := sqlDB.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	for _, v := range found {
		if err := store.Insert(ctx, tx, database.InsertRequest{Version: v}); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// Down rolls back the examples' migrations and then gormlock's, dropping
// every table Migrate created but the two version tables. ctx governs the
// whole run.
func Down(ctx context.Context, db *gorm.DB) error {
	p, err := Provider(db)
	if err != nil {
		return err
	}
	if _, err := p.DownTo(ctx, 0); err != nil {
		return fmt.Errorf("exampledb: down: %w", err)
	}
	return migrations.Down(ctx, db)
}

// Open opens the database dsn names (what opendb.Open accepts: a
// postgres:// URL, a MySQL or MariaDB DSN such as
// root@tcp(127.0.0.1:3306)/test or mysql://..., "sqlite:PATH" or a SQLite
// file path) or, when dsn is
// empty, the SQLite file name.db in a new temporary directory, and applies
// gormlock's and the examples' migrations (Migrate). closeDB closes the database and removes the temporary
// directory.
func Open(ctx context.Context, dsn, name string) (db *gorm.DB, closeDB func() error, err error) {
	cleanup := func() error { return nil }
	if dsn == "" {
		dir, err := os.MkdirTemp("", "gormlock-"+name+"-")
		if err != nil {
			return nil, nil, err
		}
		cleanup = func() error { return os.RemoveAll(dir) }
		dsn = filepath.Join(dir, name+".db")
	}
	db, err = opendb.Open(dsn)
	if err != nil {
		return nil, nil, errors.Join(err, cleanup())
	}
	closeDB = func() error { return errors.Join(opendb.Close(db), cleanup()) }
	if err := Migrate(ctx, db); err != nil {
		return nil, nil, errors.Join(err, closeDB())
	}
	return db, closeDB, nil
}

// WithSearchPath returns dsn, a PostgreSQL URL or key=value DSN, with its
// search_path set to schema, so a connection opened with it creates and
// finds tables in that schema. It is PostgreSQL's; a MySQL DSN names its
// database itself.
func WithSearchPath(dsn, schema string) string { return WithParam(dsn, "search_path", schema) }

// WithParam returns dsn, a PostgreSQL URL or key=value DSN, with the
// connection parameter key set to value (a plain word: no spaces or
// quotes).
func WithParam(dsn, key, value string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err == nil {
			q := u.Query()
			q.Set(key, value)
			u.RawQuery = q.Encode()
			return u.String()
		}
	}
	return dsn + " " + key + "=" + value
}

// Versions names record versions v1, v2, ... in the order a program first
// prints them, so the example programs' output reads (and compares) the same
// on every run: a real version is a clock reading such as 1795401280989319
// (see "Versions" in package repository). The zero value is ready to use.
type Versions struct{ names map[int64]string }

// Name returns the name of version v: the same name every time, and a new
// one (the next vN) the first time.
func (n *Versions) Name(v int64) string {
	if n.names == nil {
		n.names = map[int64]string{}
	}
	name, ok := n.names[v]
	if !ok {
		name = "v" + strconv.Itoa(len(n.names)+1)
		n.names[v] = name
	}
	return name
}
