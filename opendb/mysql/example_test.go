package mysql_test

import (
	"errors"
	"fmt"
	"log"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/opendb/mysql"
)

// Open opens MySQL or MariaDB with the settings DSN adds, and checks them on
// a first connection. The example has no output: it needs a server, so go
// test compiles it without running it.
func ExampleOpen() {
	db, err := mysql.Open("app:secret@tcp(localhost:3306)/shop")
	if errors.Is(err, locking.ErrInvalidArgument) {
		log.Fatalf("fix the DSN: %v", err) // e.g. clientFoundRows=false, a non-strict sql_mode
	}
	if err != nil {
		log.Fatalf("opening MySQL: %v", err)
	}
	sqlDB, _ := db.DB()
	defer sqlDB.Close()
	// db is a *gorm.DB: pass it to migrations.Up, repository.New, ...
}

// DSN adds the settings gormlock relies on to a DSN, in any of its forms,
// and keeps the DSN's own (timeout here).
func ExampleDSN() {
	dsn, err := mysql.DSN("mysql://app:secret@db.internal/shop?timeout=5s")
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
func ExampleDSN_refused() {
	for _, dsn := range []string{
		"app:secret@tcp(db.internal:3306)/shop?clientFoundRows=false",
		"app:secret@tcp(db.internal:3306)/shop?charset=latin1",
	} {
		_, err := mysql.DSN(dsn)
		fmt.Println(errors.Is(err, locking.ErrInvalidArgument), strings.Contains(err.Error(), "secret"))
	}
	// Output:
	// true false
	// true false
}
