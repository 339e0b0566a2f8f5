package sqlite_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/opendb/sqlite"
)

// Open creates the file if it is missing and opens it with WAL, a busy
// timeout and foreign keys on, as every connection of the pool reports.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "gormlock-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	db, err := sqlite.Open(filepath.Join(dir, "app.db"))
	if err != nil {
		panic(err)
	}
	sqlDB, _ := db.DB()
	defer sqlDB.Close()

	var journal string
	var busy, foreignKeys int
	db.Raw(`PRAGMA journal_mode`).Scan(&journal)
	db.Raw(`PRAGMA busy_timeout`).Scan(&busy)
	db.Raw(`PRAGMA foreign_keys`).Scan(&foreignKeys)
	fmt.Println("journal_mode:", journal, "busy_timeout:", busy, "foreign_keys:", foreignKeys)
	// Output:
	// journal_mode: wal busy_timeout: 10000 foreign_keys: 1
}

// DSN spells out Open's settings, for a program that opens the file with
// github.com/mattn/go-sqlite3 itself. It refuses what would not open the
// file named, such as an in-memory database.
func ExampleDSN() {
	dsn, err := sqlite.DSN("app.db")
	fmt.Println(dsn, err)
	_, err = sqlite.DSN(":memory:")
	fmt.Println(errors.Is(err, locking.ErrInvalidArgument))
	// Output:
	// file:app.db?_busy_timeout=10000&_foreign_keys=on&_journal_mode=WAL&_synchronous=NORMAL&_txlock=immediate <nil>
	// true
}
