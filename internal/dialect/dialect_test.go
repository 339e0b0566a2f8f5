package dialect_test

import (
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
