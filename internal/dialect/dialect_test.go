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
	}
	require.Equal(t, []string{"postgres", "sqlite"}, dialect.Names())
	for _, name := range dialect.Names() {
		caps, ok := dialect.Lookup(name)
		require.True(t, ok, name)
		for i, f := range features {
			assert.Equal(t, want[name][i], caps.How(f), "%s %s", name, f)
			err := caps.Check(f)
			if want[name][i] == dialect.Unsupported {
				require.ErrorIs(t, err, locking.ErrNotSupported)
				assert.Contains(t, err.Error(), f.String()+" on "+name+": SQLite has no row locks")
			} else {
				assert.NoError(t, err)
			}
		}
	}
	for _, name := range []string{"mysql", "sqlite3", ""} {
		_, ok := dialect.Lookup(name)
		assert.False(t, ok, name)
	}
	assert.Equal(t, "Feature(99)", dialect.Feature(99).String())
}

// README.md shows users the capability table; it must say what the code does.
func TestREADMEMatchesTable(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	words := map[dialect.How]string{dialect.Native: "native", dialect.WriteLock: "write lock", dialect.Unsupported: "not supported"}
	pg, _ := dialect.Lookup(dialect.Postgres)
	lite, _ := dialect.Lookup(dialect.SQLite)
	rows := 0
	for _, line := range strings.Split(string(readme), "\n") {
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if len(cells) != 3 {
			continue
		}
		for _, f := range []dialect.Feature{dialect.RowLock, dialect.SharedLock, dialect.NoWait, dialect.LockTimeout, dialect.SkipLocked} {
			name := f.String()
			if f != dialect.LockTimeout {
				name = "`" + name + "`"
			}
			if strings.HasPrefix(cells[0], name+" (") {
				rows++
				assert.Equal(t, []string{words[pg.How(f)], words[lite.How(f)]}, cells[1:], "README row %q", line)
			}
		}
	}
	assert.Equal(t, 5, rows, "the README's capability table has one row per feature")
}
