// Package postgres opens a PostgreSQL database for gormlock through
// gorm.io/driver/postgres and pgx (pure Go: it builds with CGO_ENABLED=0).
//
//	db, err := postgres.Open("postgres://app@127.0.0.1:5432/app?sslmode=disable")
//	if err != nil {
//		log.Fatal(err)
//	}
//	repo, err := repository.New[Invoice](db)
//
// [Open] (and [DSN], for an application that opens the database itself) sets
// pgx's default_query_exec_mode to exec unless the DSN names a mode: pgx's
// own default, cache_statement, prepares named statements on the server
// connection, which a connection pooler in transaction mode (PgBouncer
// before 1.21) hands to other clients, whose statements then fail with
// SQLSTATE 42P05 or 26000. exec sends each statement with its parameters in
// one round trip and prepares nothing by name, so the same DSN works
// directly and behind a pooler in either mode. docs/deploying.md has the
// cost measured on a direct connection.
package postgres

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/notcommitted"
	"github.com/gormlock/gormlock/internal/opener"
	"github.com/gormlock/gormlock/locking"
)

// ExecMode is the pgx default_query_exec_mode DSN sets when the DSN names
// none.
const ExecMode = "exec"

const execModeParam = "default_query_exec_mode"

// DSN returns dsn, a pgx connection string (a URL, postgres://user@host:5432/db,
// or key=value pairs), with default_query_exec_mode=exec added unless it
// names a mode. Every other setting is kept. A dsn pgx cannot parse gives
// an error matching locking.ErrInvalidArgument that does not repeat the
// password.
func DSN(dsn string) (string, error) {
	if strings.TrimSpace(dsn) == "" {
		return "", locking.Invalid("postgres: DSN is empty")
	}
	if _, err := pgx.ParseConfig(dsn); err != nil {
		// pgx's error shows the DSN with its password masked.
		return "", locking.Invalid("postgres: DSN is not one pgx accepts: %v", err)
	}
	if strings.Contains(dsn, execModeParam) {
		return dsn, nil
	}
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", locking.Invalid("postgres: DSN is not a URL")
		}
		q := u.Query()
		q.Set(execModeParam, ExecMode)
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	return strings.TrimSpace(dsn) + " " + execModeParam + "=" + ExecMode, nil
}

// Open opens a PostgreSQL database from a pgx connection string (a URL,
// postgres://user@host:5432/db, or key=value pairs) with the settings DSN
// adds. opts are passed to gorm.Open; without any, GORM's logger is
// silenced. It connects once to check the server is reachable.
func Open(dsn string, opts ...gorm.Option) (*gorm.DB, error) {
	safe, err := DSN(dsn)
	if err != nil {
		return nil, err
	}
	db, err := gorm.Open(postgres.Open(safe), opener.Defaults(opts)...)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	return db, nil
}

func init() {
	// A COMMIT the server answered with ROLLBACK is definitely not
	// committed (see locking.ClassifyCommit).
	notcommitted.Register(pgx.ErrTxCommitRollback)
}
