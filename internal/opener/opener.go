// Package opener holds what the database openers under opendb/ share: GORM's
// defaults for a database they open, and the SQLite settings both SQLite
// openers (the cgo driver and the pure-Go one) apply and check.
package opener

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/gormlock/gormlock/locking"
)

// Defaults returns opts, or, when there are none, a GORM config with the
// logger silenced.
func Defaults(opts []gorm.Option) []gorm.Option {
	if len(opts) > 0 {
		return opts
	}
	return []gorm.Option{&gorm.Config{Logger: logger.Discard}}
}

// Close closes db's connection pool.
func Close(db *gorm.DB) error {
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	return sqlDB.Close()
}

// SQLiteBusyTimeout is how long a SQLite connection waits for another
// connection's write lock before giving up with SQLITE_BUSY.
const SQLiteBusyTimeout = 10 * time.Second

// CheckSQLitePath refuses a path that is not a plain file path: SQLite
// would open something else than the file named, or an in-memory database
// per connection. who names the opener in the error.
func CheckSQLitePath(who, path string) error {
	switch {
	case path == "":
		return locking.Invalid("%s: SQLite path is empty", who)
	case path == ":memory:" || strings.Contains(path, "mode=memory"):
		return locking.Invalid("%s: in-memory SQLite gives every pooled connection its own empty database; use a file (for tests, one in t.TempDir())", who)
	case strings.HasPrefix(path, "file:"):
		return locking.Invalid("%s: SQLite path %q is a URI; pass a plain file path", who, path)
	case strings.ContainsAny(path, "?#"):
		return locking.Invalid("%s: SQLite path %q contains '?' or '#'; pass a plain file path", who, path)
	}
	return nil
}

// SQLiteURI returns the file: URI of path, without a query. SQLite decodes
// %XX in URI file names: '%' is escaped so the file opened is the one named.
func SQLiteURI(path string) string {
	return "file:" + strings.ReplaceAll(path, "%", "%25")
}

// CheckSQLiteSettings reads back, on one connection of db, the settings
// both SQLite openers ask for: WAL, SQLiteBusyTimeout, foreign keys and
// synchronous=NORMAL. A driver that did not apply them gives an error
// matching locking.ErrNotSupported; remedy says what to use instead.
func CheckSQLiteSettings(db *gorm.DB, remedy string) error {
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
		if err := scanPragma(ctx, conn, p.pragma, p.dest); err != nil {
			return err
		}
	}
	if journal != "wal" || busy != SQLiteBusyTimeout.Milliseconds() || fk != 1 || sync != 1 {
		return fmt.Errorf("%w: the driver did not apply the DSN's settings (journal_mode=%s busy_timeout=%d foreign_keys=%d synchronous=%d; want wal, %d, 1, 1): %s",
			locking.ErrNotSupported, journal, busy, fk, sync, SQLiteBusyTimeout.Milliseconds(), remedy)
	}
	return nil
}

func scanPragma(ctx context.Context, conn *sql.Conn, pragma string, dest any) error {
	if err := conn.QueryRowContext(ctx, pragma).Scan(dest); err != nil {
		return fmt.Errorf("reading %s: %w", pragma, err)
	}
	return nil
}
