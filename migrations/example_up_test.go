package migrations_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/migrations"
)

// db is the application's database in the examples: a *gorm.DB opened
// with one of gormlock's openers (opendb/sqlite's Open, opendb/postgres's,
// ...), empty. The examples need a database, so go test compiles them here
// without running them; each one's last comment says what it prints on a
// fresh SQLite database.
var db *gorm.DB

// tables prints the tables of db, but SQLite's own (sqlite_sequence).
func tables(db *gorm.DB) {
	all, err := db.Migrator().GetTables()
	if err != nil {
		panic(err)
	}
	var names []string
	for _, n := range all {
		if !strings.HasPrefix(n, "sqlite_") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	fmt.Println("tables:", names)
}

// Up creates gormlock's tables and records their versions in VersionTable;
// run again, it changes nothing.
func ExampleUp() {
	ctx := context.Background()

	if err := migrations.Up(ctx, db); err != nil {
		panic(err)
	}
	tables(db)
	fmt.Println(migrations.Up(ctx, db))
	// Prints:
	// tables: [gormlock_leases gormlock_operations gormlock_schema_version]
	// <nil>
}

// Tables created from Scripts by another migration tool are adopted: Up
// records them as applied instead of failing on them.
func ExampleUp_adopt() {
	ctx := context.Background()
	scripts, err := migrations.Scripts(db.Dialector.Name())
	if err != nil {
		panic(err)
	}
	for _, s := range scripts {
		for _, stmt := range s.UpStatements() {
			if err := db.Exec(stmt).Error; err != nil {
				panic(err)
			}
		}
	}

	fmt.Println(migrations.Up(ctx, db))
	v, _ := migrations.Version(ctx, db)
	fmt.Println("version:", v)
	// Prints:
	// <nil>
	// version: 2
}

// A table of one of gormlock's names with other columns stops Up before it
// creates anything.
func ExampleUp_tableExists() {
	ctx := context.Background()
	if err := db.Exec(`CREATE TABLE gormlock_leases (id INTEGER PRIMARY KEY, note TEXT)`).Error; err != nil {
		panic(err)
	}

	err := migrations.Up(ctx, db)
	fmt.Println(errors.Is(err, locking.ErrSchemaMismatch))
	fmt.Println(err)
	fmt.Println("operations table created:", db.Migrator().HasTable("gormlock_operations"))
	// Prints:
	// true
	// migrations: gormlock: schema mismatch: table gormlock_leases exists and is not the one migration 1 creates: column resource is missing; column record_key is missing; column owner is missing; column token_hash is missing; column fence is missing; column acquired_ms is missing; column expires_ms is missing; column id is not the migration's; column note is not the migration's; drop or rename it
	// operations table created: false
}

// Down drops gormlock's tables and leaves the application's alone.
func ExampleDown() {
	ctx := context.Background()
	if err := db.Exec(`CREATE TABLE invoices (id INTEGER PRIMARY KEY)`).Error; err != nil {
		panic(err)
	}
	if err := migrations.Up(ctx, db); err != nil {
		panic(err)
	}

	if err := migrations.Down(ctx, db); err != nil {
		panic(err)
	}
	tables(db)
	v, _ := migrations.Version(ctx, db)
	fmt.Println("version:", v)
	// Prints:
	// tables: [gormlock_schema_version invoices]
	// version: 0
}

// Version is the number of gormlock's last migration applied: 0 before Up.
func ExampleVersion() {
	ctx := context.Background()

	v, err := migrations.Version(ctx, db)
	fmt.Println(v, err)
	if err := migrations.Up(ctx, db); err != nil {
		panic(err)
	}
	v, err = migrations.Version(ctx, db)
	fmt.Println(v, err)
	// Prints:
	// 0 <nil>
	// 2 <nil>
}
