// Package migrations creates gormlock's own tables, and only those: the lease
// table (gormlock_leases, for repository.WithLeases) and the operation table
// (gormlock_operations, for repository.OpKey). Your entity tables, with their
// version columns, are yours to create with your own migrations; gormlock's
// never create or change them. The guide docs/getting-started.md shows
// where they fit in an application's schema. Only when asked does this
// package add to one of your tables: the optional version trigger (see "A
// version trigger for writers outside gormlock" below).
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
// 1 creates gormlock_leases, version 2 gormlock_operations. [Up] runs them
// itself, through db, and records each applied version in [VersionTable]; it
// needs no migration tool. The files carry goose's annotations ("-- +goose
// Up", "-- +goose Down"), so that an application that runs goose itself can
// take them as they are ([FS]).
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
// migrations instead of calling Up. [Scripts] returns each migration's Up and
// Down SQL per dialect as plain strings ([Script.UpStatements] and
// [Script.DownStatements] split them for db.Exec); FS returns the files themselves, with their goose
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
// columns stops Up with an error matching [locking.ErrSchemaMismatch], naming the table
// and its differences, before any of gormlock's tables is created.
//
// # A version trigger for writers outside gormlock
//
// The version guard protects a record from writers that advance its version.
// Raw SQL, another service or a tool that updates a versioned table and
// leaves the version as it was goes unnoticed: a guarded writer holding a
// copy read before that UPDATE passes its guard and overwrites the change.
// [CreateVersionTrigger] adds a trigger to a model's table that advances the
// version on every UPDATE that leaves it unchanged, to max(previous + 1, the
// database's clock in microseconds) as gormlock's own writes do; the guarded
// writer's copy is then stale, its Update fails with [locking.ErrStaleData],
// and Mutate reads again and re-runs. [DropVersionTrigger] removes the
// trigger, and [VersionTrigger] gives its SQL for an application's own
// migration tool.
//
// An INSERT is the same danger in another form: one that leaves the
// version to the column's default (or writes a counter's 1) gives every
// incarnation of a key the same first version, so a copy of a deleted
// record passes the guard of the record created again under its key and
// overwrites it. A second trigger, on INSERT, gives such a row a first
// version from the database's clock instead; it takes any version below
// 10^15 (no clock reading in microseconds is) for a default, and keeps a
// larger one, which is a clock reading the writer took (gormlock's Create
// and its GORM plugin's). On SQLite, whose clock has milliseconds only, a
// third trigger, on DELETE, notes the largest version a deleted row of the
// table had, and an INSERT's version is raised above it: a key deleted and
// inserted again within one millisecond still starts above every version
// its earlier row had ([VersionTrigger] has the details).
//
// The trigger is optional. An application whose every write goes through
// gormlock's repository, or through GORM with gormlock's GORM plugin, has no
// use for it: those writes change the version themselves, and the trigger
// leaves every UPDATE that changes the version as it is (one that sets it to
// the value it has counts as leaving it unchanged). An UPDATE through plain
// GORM, without the plugin, is advanced like raw SQL, so the entity it was
// made from holds an old version afterwards: read it again before a guarded
// write.
//
// What it costs: on PostgreSQL and SQLite a WHEN clause compares the old and
// new version, and only an UPDATE that left it unchanged runs the trigger's
// body: a PL/pgSQL function on PostgreSQL, a second UPDATE of the row on
// SQLite, whose triggers cannot change the row being written. MySQL's and
// MariaDB's triggers have no WHEN clause: the trigger's one SET statement
// runs for every row updated. The trigger fires for every row an UPDATE
// matches, also when the UPDATE changes nothing, so such an UPDATE makes
// copies of the row stale too.
//
// The INSERT trigger costs a comparison per row inserted (a WHEN clause on
// PostgreSQL and SQLite, an IF on MySQL and MariaDB), and its body runs
// only for a row without a version of its own; on SQLite an INSERT also
// reads the floor, and a DELETE writes it.
//
// What it does not see: an INSERT (or REPLACE) that writes an old clock
// reading as the version (a row copied back with its version), on
// PostgreSQL and MySQL the first version given within the same
// microsecond as a deleted row's last one, MySQL's and MariaDB's
// foreign-key cascades, which
// fire no trigger, and PostgreSQL sessions with session_replication_role set
// to replica (logical replication's apply workers, some bulk loaders), which
// fire no ordinary trigger. On SQLite an UPDATE ... RETURNING version returns
// the version from before the trigger ran, and the trigger's clock has
// milliseconds only. With MySQL's or MariaDB's statement-based binary log a
// replica runs the trigger again with its own clock and its versions differ
// from the primary's: replicate rows (binlog_format=ROW, as Galera does,
// where the trigger runs on the node that took the write).
package migrations
