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

// Code reads the database's own code from a driver error, classified or
// not, for logs and metrics.
func ExampleCode() {
	db, _, done := exampleSQLite()
	defer done()
	if err := db.Exec(`CREATE TABLE users (email TEXT PRIMARY KEY, name TEXT NOT NULL)`).Error; err != nil {
		panic(err)
	}
	if err := db.Exec(`INSERT INTO users (email, name) VALUES ('ada@example.com', 'Ada')`).Error; err != nil {
		panic(err)
	}

	dup := locking.Classify(db.Exec(`INSERT INTO users (email, name) VALUES ('ada@example.com', 'Ada')`).Error)
	notNull := locking.Classify(db.Exec(`INSERT INTO users (email) VALUES ('bob@example.com')`).Error)
	fmt.Printf("%q\n", locking.Code(dup))
	fmt.Printf("%q\n", locking.Code(notNull)) // SQLITE_CONSTRAINT_NOTNULL, which gormlock does not classify
	fmt.Printf("%q\n", locking.Code(errors.New("not from a database")))
	// Output:
	// "SQLITE_CONSTRAINT_PRIMARYKEY"
	// "SQLITE_1299"
	// ""
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

// Classify turns a driver error gormlock recognises into a DatabaseError,
// whose Kind is a sentinel and whose Code is the database's own.
func ExampleDatabaseError() {
	db, _, done := exampleSQLite()
	defer done()
	if err := db.Exec(`CREATE TABLE users (email TEXT NOT NULL UNIQUE)`).Error; err != nil {
		panic(err)
	}
	if err := db.Exec(`INSERT INTO users (email) VALUES ('ada@example.com')`).Error; err != nil {
		panic(err)
	}
	err := locking.Classify(db.Exec(`INSERT INTO users (email) VALUES ('ada@example.com')`).Error)

	var de *locking.DatabaseError
	if errors.As(err, &de) {
		fmt.Println(de.Kind)
		fmt.Println(de.Code)
		fmt.Println(de.Err != nil) // the driver's error, reachable with errors.As too
	}
	// Output:
	// gormlock: record already exists
	// SQLITE_CONSTRAINT_UNIQUE
	// true
}
