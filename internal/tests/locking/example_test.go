package locking_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	sqliteopen "github.com/gormlock/gormlock/opendb/sqlite"

	"github.com/gormlock/gormlock/locking"
)

func ExampleClassify() {
	dir, err := os.MkdirTemp("", "gormlock-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	db, err := sqliteopen.Open(filepath.Join(dir, "example.db"))
	if err != nil {
		panic(err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		panic(err)
	}
	defer sqlDB.Close()

	if err := db.Exec(`CREATE TABLE users (email TEXT PRIMARY KEY)`).Error; err != nil {
		panic(err)
	}
	if err := db.Exec(`INSERT INTO users (email) VALUES ('ada@example.com')`).Error; err != nil {
		panic(err)
	}
	raw := db.Exec(`INSERT INTO users (email) VALUES ('ada@example.com')`).Error

	err = locking.Classify(raw)
	fmt.Println(errors.Is(err, locking.ErrAlreadyExists))
	fmt.Println(locking.Code(err))
	fmt.Println(locking.IsRetryable(err))
	// Output:
	// true
	// SQLITE_CONSTRAINT_PRIMARYKEY
	// false
}
