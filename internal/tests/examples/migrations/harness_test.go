package migrations_test

import (
	"path/filepath"
	"testing"

	"github.com/gormlock/gormlock/opendb/sqlite"
)

// setup gives the examples db as package migrations' example file
// describes it: a fresh, empty SQLite database.
func setup(t *testing.T) {
	d, err := sqlite.Open(filepath.Join(t.TempDir(), "example.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if sqlDB, err := d.DB(); err == nil {
			_ = sqlDB.Close()
		}
	})
	db = d
}
