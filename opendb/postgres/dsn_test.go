package postgres_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/opendb/postgres"
)

func TestDSNSetsTheExecMode(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://app@db:5432/shop?sslmode=disable", "postgres://app@db:5432/shop?default_query_exec_mode=exec&sslmode=disable"},
		{"postgresql://app@db/shop", "postgresql://app@db/shop?default_query_exec_mode=exec"},
		{"host=db user=app dbname=shop", "host=db user=app dbname=shop default_query_exec_mode=exec"},
		{"postgres://app@db/shop?default_query_exec_mode=cache_statement", "postgres://app@db/shop?default_query_exec_mode=cache_statement"},
		{"host=db dbname=shop default_query_exec_mode=simple_protocol", "host=db dbname=shop default_query_exec_mode=simple_protocol"},
	} {
		got, err := postgres.DSN(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("DSN(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "  ", "postgres://app:s3cret@db:notaport/shop"} {
		_, err := postgres.DSN(bad)
		if !errors.Is(err, locking.ErrInvalidArgument) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("DSN(%q): %v; want ErrInvalidArgument without the password", bad, err)
		}
	}
}
