package opendb_test

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/glebarez/sqlite"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/opendb"
)

// settings prints the SQLite settings opendb relies on, as one connection
// of db reports them.
func settings(db *gorm.DB) {
	var journal string
	var busy, foreignKeys int
	if err := db.Raw(`PRAGMA journal_mode`).Scan(&journal).Error; err != nil {
		panic(err)
	}
	if err := db.Raw(`PRAGMA busy_timeout`).Scan(&busy).Error; err != nil {
		panic(err)
	}
	if err := db.Raw(`PRAGMA foreign_keys`).Scan(&foreignKeys).Error; err != nil {
		panic(err)
	}
	fmt.Println("journal_mode:", journal, "busy_timeout:", busy, "foreign_keys:", foreignKeys)
}

func ExampleSQLite() {
	dir, err := os.MkdirTemp("", "gormlock-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	db, err := opendb.SQLite(filepath.Join(dir, "app.db")) // created if missing
	if err != nil {
		panic(err)
	}
	defer opendb.Close(db)
	settings(db)
	// Output:
	// journal_mode: wal busy_timeout: 10000 foreign_keys: 1
}

// Close closes the pool: every later statement fails.
func ExampleClose() {
	dir, err := os.MkdirTemp("", "gormlock-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	db, err := opendb.SQLite(filepath.Join(dir, "app.db"))
	if err != nil {
		panic(err)
	}

	fmt.Println(opendb.Close(db))
	fmt.Println(db.Exec(`SELECT 1`).Error)
	// Output:
	// <nil>
	// sql: database is closed
}

// Open picks the database from the DSN; "sqlite:PATH" (or a plain path)
// opens SQLite, as SQLite does.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "gormlock-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	db, err := opendb.Open("sqlite:" + filepath.Join(dir, "app.db"))
	if err != nil {
		panic(err)
	}
	defer opendb.Close(db)
	fmt.Println(db.Dialector.Name())
	// Output:
	// sqlite
}

// SQLiteDSN spells out the settings of SQLite, for a tool that opens the
// file with github.com/mattn/go-sqlite3 itself. It refuses what would not
// open the file named, such as an in-memory database.
func ExampleSQLiteDSN() {
	dsn, err := opendb.SQLiteDSN("app.db")
	fmt.Println(dsn, err)

	_, err = opendb.SQLiteDSN(":memory:")
	fmt.Println(errors.Is(err, locking.ErrInvalidArgument))
	// Output:
	// file:app.db?_busy_timeout=10000&_foreign_keys=on&_journal_mode=WAL&_synchronous=NORMAL&_txlock=immediate <nil>
	// true
}

// PureGoSQLite opens SQLite with the same settings without cgo, through the
// dialector constructor of a pure-Go driver.
func ExamplePureGoSQLite() {
	dir, err := os.MkdirTemp("", "gormlock-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	db, err := opendb.PureGoSQLite(sqlite.Open, filepath.Join(dir, "app.db"))
	if err != nil {
		panic(err)
	}
	defer opendb.Close(db)
	settings(db)
	// Output:
	// journal_mode: wal busy_timeout: 10000 foreign_keys: 1
}

func ExamplePureGoSQLiteDSN() {
	dsn, err := opendb.PureGoSQLiteDSN("app.db")
	fmt.Println(dsn, err)
	// Output:
	// file:app.db?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)&_txlock=immediate <nil>
}

// MySQLDSN adds the settings gormlock relies on to a DSN, in any of its
// forms, and keeps the DSN's own (timeout here).
func ExampleMySQLDSN() {
	dsn, err := opendb.MySQLDSN("mysql://app:secret@db.internal/shop?timeout=5s")
	if err != nil {
		panic(err)
	}
	base, query, _ := strings.Cut(dsn, "?")
	fmt.Println(base)
	params, _ := url.ParseQuery(query)
	for _, name := range slices.Sorted(maps.Keys(params)) {
		fmt.Printf("  %s=%s\n", name, params.Get(name))
	}
	// Output:
	// app:secret@tcp(db.internal:3306)/shop
	//   charset=utf8mb4
	//   clientFoundRows=true
	//   collation=utf8mb4_general_ci
	//   parseTime=true
	//   sql_mode=CONCAT(@@sql_mode, ',STRICT_ALL_TABLES')
	//   time_zone='+00:00'
	//   timeout=5s
}

// A DSN that contradicts a setting gormlock needs is refused, without
// repeating its password.
func ExampleMySQLDSN_refused() {
	for _, dsn := range []string{
		"app:secret@tcp(db.internal:3306)/shop?clientFoundRows=false",
		"app:secret@tcp(db.internal:3306)/shop?charset=latin1",
	} {
		_, err := opendb.MySQLDSN(dsn)
		fmt.Println(errors.Is(err, locking.ErrInvalidArgument), strings.Contains(err.Error(), "secret"))
	}
	// Output:
	// true false
	// true false
}
