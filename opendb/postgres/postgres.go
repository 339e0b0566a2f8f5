// Package postgres opens a PostgreSQL database for gormlock through
// gorm.io/driver/postgres and pgx (pure Go: it builds with CGO_ENABLED=0).
//
//	db, err := postgres.Open("postgres://app@127.0.0.1:5432/app?sslmode=disable")
//	if err != nil {
//		log.Fatal(err)
//	}
//	repo, err := repository.New[Invoice](db)
package postgres

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/notcommitted"
	"github.com/gormlock/gormlock/internal/opener"
	"github.com/gormlock/gormlock/locking"
)

// Open opens a PostgreSQL database from a pgx connection string (a URL,
// postgres://user@host:5432/db, or key=value pairs). opts are passed to
// gorm.Open; without any, GORM's logger is silenced. It connects once to
// check the server is reachable.
func Open(dsn string, opts ...gorm.Option) (*gorm.DB, error) {
	if strings.TrimSpace(dsn) == "" {
		return nil, locking.Invalid("postgres: DSN is empty")
	}
	db, err := gorm.Open(postgres.Open(dsn), opener.Defaults(opts)...)
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
