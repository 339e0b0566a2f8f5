package locking_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	sqliteopen "github.com/gormlock/gormlock/opendb/sqlite"

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/locking"
)

// exampleSQLite opens a SQLite database in a temporary directory and returns
// it with its path and a function that removes it.
func exampleSQLite() (db *gorm.DB, path string, done func()) {
	dir, err := os.MkdirTemp("", "gormlock-example")
	if err != nil {
		panic(err)
	}
	path = filepath.Join(dir, "example.db")
	db, err = sqliteopen.Open(path)
	if err != nil {
		panic(err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		panic(err)
	}
	return db, path, func() { _ = sqlDB.Close(); _ = os.RemoveAll(dir) }
}

// A SQLite connection that does not wait for the write lock gets
// SQLITE_BUSY while another connection holds it; Classify makes it
// ErrLocked.
func ExampleIsSQLiteBusy() {
	db, path, done := exampleSQLite()
	defer done()
	if err := db.Exec(`CREATE TABLE counters (n INTEGER NOT NULL)`).Error; err != nil {
		panic(err)
	}

	other, err := sqliteopen.Open(path)
	if err != nil {
		panic(err)
	}
	sqlDB, err := other.DB()
	if err != nil {
		panic(err)
	}
	defer sqlDB.Close()
	sqlDB.SetMaxOpenConns(1) // so the PRAGMA below holds for every statement
	if err := other.Exec(`PRAGMA busy_timeout = 0`).Error; err != nil {
		panic(err)
	}

	_ = db.Transaction(func(tx *gorm.DB) error { // BEGIN IMMEDIATE: holds the write lock
		if err := tx.Exec(`INSERT INTO counters (n) VALUES (1)`).Error; err != nil {
			return err
		}
		raw := other.Exec(`INSERT INTO counters (n) VALUES (2)`).Error
		fmt.Println(locking.IsSQLiteBusy(raw))
		err := locking.Classify(raw)
		fmt.Println(errors.Is(err, locking.ErrLocked), locking.Code(err))
		return nil
	})
	// Output:
	// true
	// true SQLITE_BUSY
}
