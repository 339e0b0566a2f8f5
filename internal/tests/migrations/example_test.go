package migrations_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/migrations"
	"github.com/gormlock/gormlock/opendb/sqlite"
)

// emptySQLite opens a new SQLite database in a temporary directory and
// returns a function that removes it.
func emptySQLite() (*gorm.DB, func()) {
	dir, err := os.MkdirTemp("", "gormlock-example")
	if err != nil {
		panic(err)
	}
	db, err := sqlite.Open(filepath.Join(dir, "app.db"))
	if err != nil {
		panic(err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		panic(err)
	}
	return db, func() { _ = sqlDB.Close(); _ = os.RemoveAll(dir) }
}

// tables prints the tables of a SQLite database.
func tables(db *gorm.DB) {
	var names []string
	if err := db.Raw(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`).Scan(&names).Error; err != nil {
		panic(err)
	}
	fmt.Println("tables:", names)
}

// Up creates gormlock's tables and records their versions in VersionTable;
// run again, it changes nothing.
func ExampleUp() {
	db, done := emptySQLite()
	defer done()
	ctx := context.Background()

	if err := migrations.Up(ctx, db); err != nil {
		panic(err)
	}
	tables(db)
	fmt.Println(migrations.Up(ctx, db))
	// Output:
	// tables: [gormlock_leases gormlock_operations gormlock_schema_version]
	// <nil>
}

// Tables created from Scripts by another migration tool are adopted: Up
// records them as applied instead of failing on them.
func ExampleUp_adopt() {
	db, done := emptySQLite()
	defer done()
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
	// Output:
	// <nil>
	// version: 2
}

// A table of one of gormlock's names with other columns stops Up before it
// creates anything.
func ExampleUp_tableExists() {
	db, done := emptySQLite()
	defer done()
	ctx := context.Background()
	if err := db.Exec(`CREATE TABLE gormlock_leases (id INTEGER PRIMARY KEY, note TEXT)`).Error; err != nil {
		panic(err)
	}

	err := migrations.Up(ctx, db)
	fmt.Println(errors.Is(err, migrations.ErrTableExists))
	fmt.Println(err)
	fmt.Println("operations table created:", db.Migrator().HasTable("gormlock_operations"))
	// Output:
	// true
	// migrations: table exists with other columns: table gormlock_leases exists and is not the one migration 1 creates: column resource is missing; column record_key is missing; column owner is missing; column token_hash is missing; column fence is missing; column acquired_ms is missing; column expires_ms is missing; column id is not the migration's; column note is not the migration's; drop or rename it
	// operations table created: false
}

// Down drops gormlock's tables and leaves the application's alone.
func ExampleDown() {
	db, done := emptySQLite()
	defer done()
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
	// Output:
	// tables: [gormlock_schema_version invoices]
	// version: 0
}

func ExampleVersion() {
	db, done := emptySQLite()
	defer done()
	ctx := context.Background()

	v, err := migrations.Version(ctx, db)
	fmt.Println(v, err)
	if err := migrations.Up(ctx, db); err != nil {
		panic(err)
	}
	v, err = migrations.Version(ctx, db)
	fmt.Println(v, err)
	// Output:
	// 0 <nil>
	// 2 <nil>
}
