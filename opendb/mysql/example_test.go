package mysql_test

import (
	"errors"
	"fmt"
	"log"
	"maps"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/opendb/mysql"
)

// Open opens MySQL or MariaDB with the settings DSN adds, and checks them on
// a first connection. The DSN here comes from the environment
// (app:secret@tcp(localhost:3306)/shop, say). The example needs a server,
// so go test compiles it without running it; its last comment says what it
// prints.
func ExampleOpen() {
	db, err := mysql.Open(os.Getenv("MYSQL_DSN"))
	if errors.Is(err, locking.ErrInvalidArgument) {
		log.Fatalf("fix the DSN: %v", err) // e.g. clientFoundRows=false, a non-strict sql_mode
	}
	if err != nil {
		log.Fatalf("opening MySQL: %v", err)
	}
	sqlDB, _ := db.DB()
	defer sqlDB.Close()
	// db is a *gorm.DB: pass it to migrations.Up, repository.New, ...
	var zone, charset string
	db.Raw(`SELECT @@session.time_zone, @@session.character_set_connection`).Row().Scan(&zone, &charset)
	fmt.Println(db.Dialector.Name(), zone, charset)
	// Prints:
	// mysql +00:00 utf8mb4
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

// GORM's documentation writes MySQL DSNs with loc=Local: DSN keeps loc, and
// gives the session loc's time zone, so that NOW() and TIMESTAMP columns
// agree with the times the driver sends. Here loc names a zone that keeps
// one offset, which the session takes; a zone with daylight saving time is
// set by name ('Europe/Berlin'), which the server knows from its time zone
// tables.
func ExampleDSN_loc() {
	dsn, err := mysql.DSN("app:secret@tcp(db.internal:3306)/shop?charset=utf8mb4&parseTime=True&loc=Asia%2FShanghai")
	if err != nil {
		panic(err)
	}
	_, query, _ := strings.Cut(dsn, "?")
	params, _ := url.ParseQuery(query)
	fmt.Println("loc:", params.Get("loc"))
	fmt.Println("time_zone:", params.Get("time_zone"))
	// Output:
	// loc: Asia/Shanghai
	// time_zone: '+08:00'
}
