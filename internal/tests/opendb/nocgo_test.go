//go:build !cgo

package opendb_test

import (
	"os"
	"path/filepath"
	"testing"

	sqliteopen "github.com/gormlock/gormlock/opendb/sqlite"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gormlock/gormlock/locking"
)

// cgo reports whether the tests were built with cgo, which sqlite.Open
// needs.
const cgo = false

// Built with CGO_ENABLED=0 (`make nocgo` runs it), SQLite refuses at once
// with an error that names the cause and the remedies, and creates no file.
func TestSQLiteWithoutCgo(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.db")
	for name, open := range map[string]func() error{
		"Open": func() error { _, err := sqliteopen.Open(path); return err },
	} {
		t.Run(name, func(t *testing.T) {
			err := open()
			require.ErrorIs(t, err, locking.ErrNotSupported)
			assert.NotErrorIs(t, err, locking.ErrInvalidArgument)
			assert.Equal(t, locking.ErrNotSupported.Error()+": sqlite: open "+path+
				": gorm.io/driver/sqlite needs cgo (its driver, github.com/mattn/go-sqlite3, is C) and this program was built with CGO_ENABLED=0; "+
				"build it with CGO_ENABLED=1 and a C compiler, or open the file with github.com/gormlock/gormlock/opendb/puresqlite",
				err.Error())
		})
	}
	_, err := sqliteopen.Open("")
	require.ErrorIs(t, err, locking.ErrInvalidArgument, "a bad path is still reported as such")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "no file was created")
}
