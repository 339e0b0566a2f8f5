// Package exampledb opens the database of the example programs and the
// benchmark command: the one a DSN names, or an embedded SQLite file in a
// temporary directory, migrated either way.
package exampledb

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/migrations"
	"github.com/gormlock/gormlock/opendb"
)

// Open opens the database dsn names (what opendb.Open accepts: a
// postgres:// URL, "sqlite:PATH" or a SQLite file path) or, when dsn is
// empty, the SQLite file name.db in a new temporary directory, and applies
// the migrations. closeDB closes the database and removes the temporary
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
	if err := migrations.Up(ctx, db); err != nil {
		return nil, nil, errors.Join(err, closeDB())
	}
	return db, closeDB, nil
}

// WithSearchPath returns dsn, a PostgreSQL URL or key=value DSN, with its
// search_path set to schema, so a connection opened with it creates and
// finds tables in that schema.
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
