package mysql_test

import (
	"testing"

	"github.com/gormlock/gormlock/internal/tests/testdb"
)

// setup gives the examples their MYSQL_DSN: a fresh database on the
// configured MariaDB server (the test skips without one, and fails under
// CI=true).
func setup(t *testing.T) {
	t.Setenv("MYSQL_DSN", testdb.MariaDBDatabase(t))
}
