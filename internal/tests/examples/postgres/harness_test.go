package postgres_test

import (
	"testing"

	"github.com/gormlock/gormlock/internal/tests/testdb"
)

// setup gives the examples their POSTGRES_DSN: the configured PostgreSQL
// server (the test skips without one, and fails under CI=true).
func setup(t *testing.T) {
	t.Setenv("POSTGRES_DSN", testdb.PostgresDSN(t))
}
