package repository_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/gormlock/gormlock/migrations"
	"github.com/gormlock/gormlock/opendb/sqlite"
)

// setup gives the examples db as package repository's example file
// describes it: a fresh SQLite database with gormlock's tables and the
// examples' entities'.
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
	if err := migrations.Up(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	if err := d.AutoMigrate(&Account{}, &Document{}, &Job{}); err != nil {
		t.Fatal(err)
	}
	db = d
}
