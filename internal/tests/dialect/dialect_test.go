package dialect_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gormlock/gormlock/internal/dialect"
	"github.com/gormlock/gormlock/locking"
)

// Every supported database answers for every feature, and a feature it
// cannot provide is an ErrNotSupported error naming it, the database and why.
func TestTable(t *testing.T) {
	features := []dialect.Feature{dialect.RowLock, dialect.SharedLock, dialect.NoWait, dialect.LockTimeout, dialect.SkipLocked}
	want := map[string][]dialect.How{
		dialect.Postgres: {dialect.Native, dialect.Native, dialect.Native, dialect.Native, dialect.Native},
		dialect.SQLite:   {dialect.WriteLock, dialect.Unsupported, dialect.WriteLock, dialect.WriteLock, dialect.Unsupported},
		dialect.MariaDB:  {dialect.Native, dialect.Native, dialect.Native, dialect.Native, dialect.Native},
		dialect.MySQL:    {dialect.Native, dialect.Native, dialect.Native, dialect.Unsupported, dialect.Native},
		dialect.Galera:   {dialect.NodeLocal, dialect.NodeLocal, dialect.NodeLocal, dialect.NodeLocal, dialect.Unsupported},
	}
	why := map[string]string{
		dialect.SQLite: "SQLite has no row locks",
		dialect.MySQL:  "whole seconds",
		dialect.Galera: "held on one node only",
	}
	require.Equal(t, []string{"galera", "mariadb", "mysql", "postgres", "sqlite"}, dialect.Names())
	for _, name := range dialect.Names() {
		caps, ok := dialect.Lookup(name)
		require.True(t, ok, name)
		for i, f := range features {
			assert.Equal(t, want[name][i], caps.How(f), "%s %s", name, f)
			err := caps.Check(f)
			if want[name][i] == dialect.Unsupported {
				require.ErrorIs(t, err, locking.ErrNotSupported)
				assert.Contains(t, err.Error(), f.String()+" on "+name+": ")
				assert.Contains(t, err.Error(), why[name])
			} else {
				assert.NoError(t, err)
			}
		}
	}
	for _, name := range []string{"sqlserver", "sqlite3", ""} {
		_, ok := dialect.Lookup(name)
		assert.False(t, ok, name)
	}
	assert.Equal(t, "Feature(99)", dialect.Feature(99).String())

	// The server tells MySQL, MariaDB and a Galera node apart.
	assert.Equal(t, dialect.MariaDB, dialect.Flavor("10.11.19-MariaDB-0+deb12u1", "OFF").Name)
	assert.Equal(t, dialect.MariaDB, dialect.Flavor("10.11.19-MariaDB-0+deb12u1", "").Name)
	assert.Equal(t, dialect.Galera, dialect.Flavor("10.11.19-MariaDB-0+deb12u1", "ON").Name)
	assert.Equal(t, dialect.MySQL, dialect.Flavor("8.0.36", "").Name)
	for _, c := range []string{dialect.MariaDB, dialect.Galera, dialect.MySQL} {
		caps, _ := dialect.Lookup(c)
		assert.Equal(t, dialect.MySQL, caps.Dialector())
	}
}

// The deployment guide shows users the capability table; it must say what
// the code does.
func TestDocsMatchTable(t *testing.T) {
	readme, err := os.ReadFile("../../../docs/deploying.md")
	require.NoError(t, err)
	words := map[dialect.How]string{dialect.Native: "native", dialect.WriteLock: "write lock", dialect.Unsupported: "not supported", dialect.NodeLocal: "node-local"}
	var columns []dialect.Caps
	for _, name := range []string{dialect.Postgres, dialect.SQLite, dialect.MariaDB, dialect.MySQL, dialect.Galera} {
		c, _ := dialect.Lookup(name)
		columns = append(columns, c)
	}
	rows := 0
	for _, line := range strings.Split(string(readme), "\n") {
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if len(cells) != 1+len(columns) {
			continue
		}
		for _, f := range []dialect.Feature{dialect.RowLock, dialect.SharedLock, dialect.NoWait, dialect.LockTimeout, dialect.SkipLocked} {
			name := f.String()
			if f != dialect.LockTimeout {
				name = "`" + name + "`"
			}
			if strings.HasPrefix(cells[0], name+" (") {
				rows++
				var want []string
				for _, c := range columns {
					want = append(want, words[c.How(f)])
				}
				assert.Equal(t, want, cells[1:], "docs/deploying.md row %q", line)
			}
		}
	}
	assert.Equal(t, 5, rows, "docs/deploying.md's capability table has one row per feature")
}
