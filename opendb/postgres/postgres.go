// Package postgres opens a PostgreSQL database for gormlock through
// gorm.io/driver/postgres and pgx (pure Go: it builds with CGO_ENABLED=0).
//
//	db, err := postgres.Open("postgres://app@127.0.0.1:5432/app?sslmode=disable")
//	if err != nil {
//		log.Fatal(err)
//	}
//	repo, err := repository.New[Invoice](db)
//
// Pass the DSN as it is, direct or through a pooler: [Open] (and [DSN], for
// an application that opens the database itself) picks pgx's
// default_query_exec_mode unless the DSN names one. It connects once and
// asks the server for its process id: on a direct connection that is the
// process id the connection's start-up message gave, and the mode is
// [DirectExecMode], pgx's own default and its fastest, which prepares each
// statement once per connection and caches it. A connection pooler (PgBouncer
// in transaction or session mode, and others) answers the start-up with a
// cancel key of its own, and then the mode is [PoolerExecMode]: a pooler in
// transaction mode hands a server connection, with the statements prepared
// on it, to other clients, whose statements then fail with SQLSTATE 42P05 or
// 26000; exec prepares nothing by name and works through any pooler.
// docs/deploying.md has both modes' cost measured.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/notcommitted"
	"github.com/gormlock/gormlock/internal/opener"
	"github.com/gormlock/gormlock/locking"
)

// The default_query_exec_mode values Open and DSN choose between when the
// DSN names none.
const (
	// DirectExecMode is the mode on a direct connection to PostgreSQL:
	// pgx's own default, which prepares each statement once per
	// connection and caches it.
	DirectExecMode = "cache_statement"
	// PoolerExecMode is the mode behind a connection pooler: each
	// statement is sent with its parameters in one round trip, and
	// nothing is prepared by name.
	PoolerExecMode = "exec"
)

const execModeParam = "default_query_exec_mode"

// connectTimeout bounds Open's connection when the DSN sets no
// connect_timeout.
const connectTimeout = 30 * time.Second

// DSN returns dsn, a pgx connection string (a URL,
// postgres://user@host:5432/db, or key=value pairs), with the
// default_query_exec_mode Open would use: the one dsn names, or else,
// after connecting once within ctx, DirectExecMode on a direct connection
// and PoolerExecMode through a pooler. Every other setting is kept. A dsn
// pgx cannot parse gives an error matching locking.ErrInvalidArgument that
// does not repeat the password; a server that cannot be reached, the
// connection's error.
func DSN(ctx context.Context, dsn string) (string, error) {
	named, err := check(dsn)
	if err != nil || named {
		return dsn, err
	}
	mode, err := Detect(ctx, dsn)
	if err != nil {
		return "", err
	}
	return withMode(dsn, mode)
}

// Detect connects to the server dsn names and returns the
// default_query_exec_mode for it: DirectExecMode when the server's own
// process id (pg_backend_pid()) is the one the connection's start-up
// message carried, which is so on a direct connection (and through a
// plain TCP proxy); PoolerExecMode when they differ, as they do through
// PgBouncer and other poolers, which answer the start-up with a cancel key
// of their own. It sends one query, in the simple protocol, and closes the
// connection. dsn's own default_query_exec_mode is ignored.
func Detect(ctx context.Context, dsn string) (string, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return "", locking.Invalid("postgres: DSN is not one pgx accepts: %v", err)
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	if _, ok := ctx.Deadline(); !ok && cfg.ConnectTimeout == 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, connectTimeout)
		defer cancel()
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return "", fmt.Errorf("postgres: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var pid int64
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		return "", fmt.Errorf("postgres: asking the server for its process id: %w", err)
	}
	if pid == int64(conn.PgConn().PID()) {
		return DirectExecMode, nil
	}
	return PoolerExecMode, nil
}

// check validates dsn and reports whether it names a
// default_query_exec_mode.
func check(dsn string) (named bool, err error) {
	if strings.TrimSpace(dsn) == "" {
		return false, locking.Invalid("postgres: DSN is empty")
	}
	if _, err := pgx.ParseConfig(dsn); err != nil {
		// pgx's error shows the DSN with its password masked.
		return false, locking.Invalid("postgres: DSN is not one pgx accepts: %v", err)
	}
	return strings.Contains(dsn, execModeParam), nil
}

// withMode returns dsn with default_query_exec_mode=mode added.
func withMode(dsn, mode string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", locking.Invalid("postgres: DSN is not a URL")
		}
		q := u.Query()
		q.Set(execModeParam, mode)
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	return strings.TrimSpace(dsn) + " " + execModeParam + "=" + mode, nil
}

// Open opens a PostgreSQL database from a pgx connection string (a URL,
// postgres://user@host:5432/db, or key=value pairs) with the
// default_query_exec_mode DSN picks: unless the DSN names one, it connects
// once to tell a direct connection (DirectExecMode) from a pooler
// (PoolerExecMode), which also checks that the server is reachable. opts
// are passed to gorm.Open; without any, GORM's logger is silenced.
func Open(dsn string, opts ...gorm.Option) (*gorm.DB, error) {
	full, err := DSN(context.Background(), dsn)
	if errors.Is(err, locking.ErrInvalidArgument) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	db, err := gorm.Open(postgres.Open(full), opener.Defaults(opts)...)
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
