package locking_test

import (
	"errors"
	"fmt"

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/locking"
)

// db is the application's database in the examples below: a *gorm.DB
// opened with one of gormlock's openers (opendb/sqlite's Open,
// opendb/postgres's, ...), empty. These examples need a database, so go
// test compiles them here without running them; each one's last comment
// says what it prints on a fresh SQLite database.
var db *gorm.DB

// Classify turns the error of a write the database refused into one
// that matches a sentinel and carries the database's code.
func ExampleClassify() {
	if err := db.Exec(`CREATE TABLE users (email TEXT PRIMARY KEY)`).Error; err != nil {
		panic(err)
	}
	if err := db.Exec(`INSERT INTO users (email) VALUES ('ada@example.com')`).Error; err != nil {
		panic(err)
	}
	raw := db.Exec(`INSERT INTO users (email) VALUES ('ada@example.com')`).Error

	err := locking.Classify(raw)
	fmt.Println(errors.Is(err, locking.ErrAlreadyExists))
	fmt.Println(locking.Code(err))
	fmt.Println(locking.IsRetryable(err))
	// Prints:
	// true
	// SQLITE_CONSTRAINT_PRIMARYKEY
	// false
}

// Code reads the database's own code from a driver error, classified or
// not, for logs and metrics.
func ExampleCode() {
	if err := db.Exec(`CREATE TABLE users (email TEXT PRIMARY KEY, name TEXT NOT NULL)`).Error; err != nil {
		panic(err)
	}
	if err := db.Exec(`INSERT INTO users (email, name) VALUES ('ada@example.com', 'Ada')`).Error; err != nil {
		panic(err)
	}

	dup := locking.Classify(db.Exec(`INSERT INTO users (email, name) VALUES ('ada@example.com', 'Ada')`).Error)
	notNull := locking.Classify(db.Exec(`INSERT INTO users (email) VALUES ('bob@example.com')`).Error)
	noTable := db.Exec(`INSERT INTO nosuch (email) VALUES ('bob@example.com')`).Error // not classified
	fmt.Printf("%q\n", locking.Code(dup))
	fmt.Printf("%q\n", locking.Code(notNull))
	fmt.Printf("%q\n", locking.Code(noTable)) // SQLITE_ERROR, which gormlock does not classify
	fmt.Printf("%q\n", locking.Code(errors.New("not from a database")))
	// Prints:
	// "SQLITE_CONSTRAINT_PRIMARYKEY"
	// "SQLITE_CONSTRAINT_NOTNULL"
	// "SQLITE_1"
	// ""
}

// A write that breaks a foreign key, a CHECK or NOT NULL is refused with
// ErrConstraintViolation, naming what it broke where the database does.
func ExampleDatabaseError_constraint() {
	if err := db.Exec(`CREATE TABLE stock (sku TEXT PRIMARY KEY, qty INTEGER NOT NULL CONSTRAINT qty_not_negative CHECK (qty >= 0))`).Error; err != nil {
		panic(err)
	}
	err := locking.Classify(db.Exec(`INSERT INTO stock (sku, qty) VALUES ('lamp', -1)`).Error)

	var de *locking.DatabaseError
	if errors.Is(err, locking.ErrConstraintViolation) && errors.As(err, &de) {
		fmt.Println(de.Code, de.Constraint)
	}
	err = locking.Classify(db.Exec(`INSERT INTO stock (sku) VALUES ('desk')`).Error)
	if errors.Is(err, locking.ErrConstraintViolation) && errors.As(err, &de) {
		fmt.Println(de.Code, de.Column)
	}
	// Prints:
	// SQLITE_CONSTRAINT_CHECK qty_not_negative
	// SQLITE_CONSTRAINT_NOTNULL stock.qty
}

// Classify turns a driver error gormlock recognises into a DatabaseError,
// whose Kind is a sentinel and whose Code is the database's own.
func ExampleDatabaseError() {
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
	// Prints:
	// gormlock: record already exists
	// SQLITE_CONSTRAINT_UNIQUE
	// true
}
