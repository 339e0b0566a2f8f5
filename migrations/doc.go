// Package migrations creates gormlock's own tables, and only those: the lease
// table (gormlock_leases, for repository.WithLeases) and the operation table
// (gormlock_operations, for repository.OpKey). Your entity tables, with their
// version columns, are yours to create with your own migrations; gormlock's
// never create or change them.
//
// The smallest complete program:
//
//	package main
//
//	import (
//		"context"
//		"log"
//
//		"github.com/gormlock/gormlock/migrations"
//		"github.com/gormlock/gormlock/opendb"
//	)
//
//	func main() {
//		db, err := opendb.SQLite("app.db")
//		if err != nil {
//			log.Fatal(err)
//		}
//		defer opendb.Close(db)
//		if err := migrations.Up(context.Background(), db); err != nil {
//			log.Fatal(err)
//		}
//	}
//
// The migrations are versioned SQL, one folder per supported dialect
// (sqlite/, postgres/, and mysql/ for MySQL and MariaDB, which
// gorm.io/driver/mysql both names "mysql"), embedded in the binary and
// applied with pressly/goose. Version 1 creates gormlock_leases, version 2
// gormlock_operations.
//
// On MySQL and MariaDB the tables are InnoDB, with a primary key each (as
// Galera needs), and their text columns are VARBINARY: keys compare byte for
// byte, where utf8mb4's collations would ignore trailing spaces or case.
// Their lengths fit InnoDB's 3072-byte key limit: a table name of up to 512
// bytes, a record key of up to 2560, an operation key of up to 255
// (repository.MaxOperationKeyLen), a lease owner of up to 1024; see the
// migrations' comments.
//
//	if err := migrations.Up(ctx, db); err != nil { ... }
//
// # Side by side with your migrations
//
// gormlock records its versions in a table of its own, VersionTable
// (gormlock_schema_version), never in goose's default goose_db_version. An
// application that runs its own goose migrations 1, 2, ... (recorded in
// goose_db_version) and gormlock's on the same database, in either order, has
// both sets applied and neither skipped; Down of one leaves the other alone.
//
// # With another migration tool
//
// An application that keeps its whole schema in one tool (goose with its own
// files, golang-migrate, Atlas, ...) copies gormlock's SQL into its own
// migrations instead of calling Up. Scripts returns each migration's Up and
// Down SQL per dialect as plain strings (UpStatements and DownStatements split
// them for db.Exec); FS returns the goose files themselves. For
// golang-migrate, write each Script's Up and Down to
// NNN_gormlock_NAME.up.sql and NNN_gormlock_NAME.down.sql, with NNN in your
// own sequence (see the example of Scripts). Calling Up on such a database
// later is safe: it adopts the tables (below).
//
// # Tables that exist already; upgrading from an older gormlock
//
// When one of gormlock's migrations is not recorded in VersionTable but the
// table it creates exists with exactly the columns it creates, Up records
// the migration as applied instead of running it. A table of that name with
// other columns stops Up with an error matching ErrTableExists, naming the
// table and its differences, before any of gormlock's tables is created.
//
// This adopts a database migrated by a gormlock that kept its versions in
// goose_db_version (where versions 1 and 2 created the example tables
// accounts, documents and jobs, 3 gormlock_leases and 4
// gormlock_operations): Up records gormlock_leases and gormlock_operations
// in VersionTable and creates whichever is missing. It never reads or
// changes goose_db_version, and never drops the example tables. After
// upgrading:
//
//   - If no goose migrations of your own ever ran on the database, every row
//     of goose_db_version is the old gormlock's: drop the table
//     (DROP TABLE goose_db_version), or your own goose migrations 1 to 4 will
//     be skipped should you start using goose.
//   - If yours did, both sets shared goose_db_version, and whichever ran
//     second skipped those of its versions 1 to 4 the other had recorded.
//     Up now creates gormlock's tables where they were skipped; for yours,
//     check that what your migrations 1 to 4 create exists, and apply the
//     missing ones by hand. goose_db_version then records yours only.
//   - Drop accounts, documents and jobs unless you use the example models.
package migrations
