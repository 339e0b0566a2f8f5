package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/opendb/postgres"
)

// A DSN that names a mode keeps it, and DSN does not connect for it (the
// hosts here do not exist); a DSN pgx cannot parse is refused without its
// password.
func TestDSNKeepsANamedMode(t *testing.T) {
	for _, in := range []string{
		"postgres://app@db.invalid/shop?default_query_exec_mode=cache_statement",
		"postgres://app@db.invalid:5432/shop?sslmode=disable&default_query_exec_mode=exec",
		"host=db.invalid dbname=shop default_query_exec_mode=simple_protocol",
	} {
		got, err := postgres.DSN(context.Background(), in)
		if err != nil || got != in {
			t.Errorf("DSN(%q) = %q, %v; want it unchanged", in, got, err)
		}
	}
	for _, bad := range []string{"", "  ", "postgres://app:s3cret@db:notaport/shop"} {
		_, err := postgres.DSN(context.Background(), bad)
		if !errors.Is(err, locking.ErrInvalidArgument) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("DSN(%q): %v; want ErrInvalidArgument without the password", bad, err)
		}
	}
}

// A DSN that names no mode needs the server's answer: one that cannot be
// reached is an error, not a guess.
func TestDSNWithoutAServerIsAnError(t *testing.T) {
	_, err := postgres.DSN(context.Background(), "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=5")
	if err == nil || errors.Is(err, locking.ErrInvalidArgument) {
		t.Fatalf("DSN with nothing listening: %v; want the connection's error", err)
	}
}
