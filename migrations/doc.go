// Package migrations creates gormlock's own tables, and only those: the lease
// table (gormlock_leases, for repository.WithLeases) and the operation table
// (gormlock_operations, for repository.OpKey). Your entity tables, with their
// version columns, are yours to create with your own migrations; gormlock's
// never create or change them. The guide docs/getting-started.md shows
// where they fit in an application's schema.
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
//		"github.com/gormlock/gormlock/opendb/sqlite"
//	)
//
//	func main() {
//		db, err := sqlite.Open("app.db")
//		if err != nil {
//			log.Fatal(err)
//		}
//		sqlDB, err := db.DB()
//		if err != nil {
//			log.Fatal(err)
//		}
//		defer sqlDB.Close()
//		if err := migrations.Up(context.Background(), db); err != nil {
//			log.Fatal(err)
//		}
//	}
//
// The migrations are versioned SQL, one folder per supported dialect
// (sqlite/, postgres/, and mysql/ for MySQL and MariaDB, which
// gorm.io/driver/mysql both names "mysql"), embedded in the binary. Version
// 1 creates gormlock_leases, version 2 gormlock_operations. Up runs them
// itself, through db, and records each applied version in VersionTable; it
// needs no migration tool. The files carry goose's annotations ("-- +goose
// Up", "-- +goose Down"), so that an application that runs goose itself can
// take them as they are (FS).
//
// On SQLite and PostgreSQL each migration runs in one transaction with the
// row that records it. MySQL and MariaDB commit every CREATE TABLE, CREATE
// INDEX and DROP TABLE by itself: there a migration interrupted half-way
// may leave its table without its indexes, and the next Up would adopt the
// table as it is (below): drop it before running Up again.
//
// Several processes may run Up at once (every replica of a service at
// start-up): each migration is applied and recorded once. On PostgreSQL
// they take turns through a transaction-level advisory lock, so Up is safe
// behind PgBouncer in transaction mode; elsewhere a process that loses a
// race to another reads VersionTable again and carries on from there.
//
// On MySQL and MariaDB the tables are InnoDB, with a primary key each (as
// Galera needs), and their text columns are VARBINARY: keys compare byte for
// byte, where utf8mb4's collations would ignore trailing spaces or case.
// Their lengths fit InnoDB's 3072-byte key limit: a table name of up to 512
// bytes, a record key of up to 2560, an operation key of up to 255
// (repository.MaxOperationKeyLen), a lease owner of up to 1024; see the
// migrations' comments.
//
// # Side by side with your migrations
//
// gormlock records its versions in a table of its own, VersionTable
// (gormlock_schema_version), never in goose's default goose_db_version or
// another tool's table. An application that runs its own migrations 1, 2,
// ... and gormlock's on the same database, in either order, has both sets
// applied and neither skipped; Down of one leaves the other alone.
// VersionTable has the columns of goose's version table (id, version_id,
// is_applied, tstamp), and a row for version 0.
//
// # With another migration tool
//
// An application that keeps its whole schema in one tool (goose with its own
// files, golang-migrate, Atlas, ...) copies gormlock's SQL into its own
// migrations instead of calling Up. Scripts returns each migration's Up and
// Down SQL per dialect as plain strings (UpStatements and DownStatements split
// them for db.Exec); FS returns the files themselves, with their goose
// annotations. For golang-migrate, write each Script's Up and Down to
// NNN_gormlock_NAME.up.sql and NNN_gormlock_NAME.down.sql, with NNN in your
// own sequence (see the example of Scripts). Calling Up on such a database
// later is safe: it adopts the tables (below).
//
// # Tables that exist already
//
// When one of gormlock's migrations is not recorded in VersionTable but the
// table it creates exists with exactly the columns it creates, Up records
// the migration as applied instead of running it, and runs the pending
// migrations whose tables are missing. A table of that name with other
// columns stops Up with an error matching ErrTableExists, naming the table
// and its differences, before any of gormlock's tables is created.
package migrations
