package puresqlite_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/gormlock/gormlock/opendb/puresqlite"
)

// Open gives the file the settings of package opendb/sqlite without cgo.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "gormlock-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	db, err := puresqlite.Open(filepath.Join(dir, "app.db"))
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

func ExampleDSN() {
	dsn, err := puresqlite.DSN("app.db")
	fmt.Println(dsn, err)
	// Output:
	// file:app.db?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)&_txlock=immediate <nil>
}
