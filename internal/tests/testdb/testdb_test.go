package testdb_test

import (
	"fmt"
	"strings"
	"testing"

	mysqlopen "github.com/gormlock/gormlock/opendb/mysql"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/internal/tests/testdb"
)

// recorder is a testing.TB that records Skipf and Fatalf instead of ending
// the test.
type recorder struct {
	testing.TB
	skipped, failed string
}

type stopped struct{}

func (r *recorder) Helper() {}

func (r *recorder) Skipf(format string, args ...any) {
	r.skipped = fmt.Sprintf(format, args...)
	panic(stopped{})
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	panic(stopped{})
}

func call(r *recorder, fn func(testing.TB)) {
	defer func() {
		if p := recover(); p != nil {
			if _, ok := p.(stopped); !ok {
				panic(p)
			}
		}
	}()
	fn(r)
}

// Without GORMLOCK_MARIADB_DSN the MariaDB tests skip, naming the variable;
// under CI=true they fail instead.
func TestMariaDBDSNWithoutTheVariable(t *testing.T) {
	t.Setenv(testdb.MariaDBEnv, "")
	for ci, want := range map[string]string{"": "skipped", "true": "failed"} {
		t.Run("CI="+ci, func(t *testing.T) {
			t.Setenv("CI", ci)
			r := &recorder{}
			call(r, func(tb testing.TB) { testdb.MariaDBDSN(tb) })
			got := map[string]string{"skipped": r.skipped, "failed": r.failed}
			assert.Contains(t, got[want], testdb.MariaDBEnv)
			for k, v := range got {
				if k != want {
					assert.Empty(t, v, k)
				}
			}
		})
	}
}

// MariaDB gives each test a database of its own, empty, and drops it when
// the test ends.
func TestMariaDBDatabaseIsFreshAndDropped(t *testing.T) {
	admin, err := mysqlopen.Open(testdb.MariaDBDSN(t))
	require.NoError(t, err)
	defer fixtures.Close(admin)

	var names [2]string
	t.Run("two tests", func(t *testing.T) {
		for i := range names {
			t.Run("test", func(t *testing.T) {
				db := testdb.MariaDB(t)
				require.NoError(t, db.Raw(`SELECT DATABASE()`).Scan(&names[i]).Error)
				assert.True(t, strings.HasPrefix(names[i], "gl_test_"), names[i])
				var tables int64
				require.NoError(t, db.Raw(`SELECT count(*) FROM information_schema.tables WHERE table_schema = DATABASE()`).Scan(&tables).Error)
				assert.Zero(t, tables, "a new database is empty")
				require.NoError(t, db.Exec(`CREATE TABLE t (id BIGINT PRIMARY KEY)`).Error)
			})
		}
	})
	assert.NotEqual(t, names[0], names[1])
	for _, name := range names {
		var n int64
		require.NoError(t, admin.Raw(`SELECT count(*) FROM information_schema.schemata WHERE schema_name = ?`, name).Scan(&n).Error)
		assert.Zero(t, n, "database %s was dropped", name)
	}
}

func TestOpenMariaDB(t *testing.T) {
	db := testdb.Open(t, "mariadb")
	assert.Equal(t, "mysql", db.Dialector.Name())
	for _, table := range []string{"gormlock_leases", "gormlock_operations", "accounts", "documents", "jobs"} {
		assert.True(t, db.Migrator().HasTable(table), table)
	}
}
