// Package repository provides [Repository], a typed store for one GORM model
// whose every write is guarded by the record's version.
//
// The guides in the repository's docs/ folder tell when to use which call
// (docs/choosing-a-mode.md), how outcomes and operation keys work
// (docs/operation-keys.md) and what each database needs
// (docs/deploying.md); this package documentation is the reference.
//
// The smallest complete program:
//
//	package main
//
//	import (
//		"context"
//		"fmt"
//		"log"
//
//		"github.com/gormlock/gormlock/models"
//		"github.com/gormlock/gormlock/opendb/sqlite"
//		"github.com/gormlock/gormlock/repository"
//	)
//
//	type Wallet struct {
//		models.Model // the id and the version every write checks
//		Owner        string
//		Balance      int64
//	}
//
//	func main() {
//		ctx := context.Background()
//		db, err := sqlite.Open("app.db") // safe concurrent settings
//		if err != nil {
//			log.Fatal(err)
//		}
//		if err := db.AutoMigrate(&Wallet{}); err != nil {
//			log.Fatal(err)
//		}
//		wallets, err := repository.New[Wallet](db)
//		if err != nil {
//			log.Fatal(err)
//		}
//		w := &Wallet{Owner: "ann", Balance: 100}
//		if err := wallets.Create(ctx, w); err != nil {
//			log.Fatal(err)
//		}
//		// Read, change, write guarded by the version; re-run from a fresh
//		// read if someone else wrote first.
//		w, err = wallets.Mutate(ctx, w.ID, func(w *Wallet) error {
//			w.Balance -= 30
//			return nil
//		})
//		if err != nil {
//			log.Fatal(err)
//		}
//		fmt.Println(w.Owner, w.Balance) // ann 70
//	}
//
// # The surface, in layers
//
// What applications call, on *[Repository][T], built by [New]:
//
//   - reads: [Repository.Get], [Repository.Find];
//   - writes guarded by the version: [Repository.Create],
//     [Repository.Update], [Repository.Delete], [Repository.Restore],
//     [Repository.ForceIncrement], [Repository.UpdateMany];
//   - read-modify-write, re-run from a fresh read when another writer
//     wins: [Repository.Mutate], [Repository.Upsert]; and
//     [Repository.Apply] ([Add], [SetTo], [Expr], [If]), one guarded
//     statement for commutative changes such as counters (no read, nothing
//     to retry);
//   - row locks, held until the transaction in ctx ends:
//     [Repository.LockRow] and [Repository.LockRows] (with the LockOptions
//     [NoWait], [LockTimeout], [ForShare]), [Repository.MutateRowLocked]
//     (with NoWait, LockTimeout), [Repository.Claim];
//   - leases, time-limited locks that outlive transactions (get-and-lock):
//     [Repository.Leases] — [Leases.Acquire], [Leases.Get],
//     [Leases.Release], [Leases.Renew], [Leases.Update], [Leases.Delete],
//     [Leases.Sweep] — and [ReleaseOwnerLeases];
//   - transactions: [RunInTx], [InTx], [Tx], [WithTx]; operation keys:
//     [OpKey], [LookupOperation], [PurgeOperations];
//   - writers that are not moved to gormlock yet: [Plugin] (with
//     [GuardGORMUpdates], [StrictGORMWrites]); start-up checks:
//     [Repository.VerifySchema], [VerifyOperationSchema]; what a call did:
//     [Report], [WithMutateHook], [WithObserver], [ObserverPlugin].
//
// What adapters need (package rest): [Repository.Adapter] —
// [Adapter.ParseID], [Adapter.Identity], [Adapter.SetIdentity],
// [Adapter.CopyWritable], [Adapter.KeyAssignedByDatabase].
//
// Options come in families, one per kind of call, so that an option given
// to a call it does not apply to does not compile: [Option] (New's, all
// named With...; no per-call option is), [WriteOption] with [UpdateOption]
// and [DeleteOption], [ReadOption], [FindOption], [ClaimOption],
// [MutateOption] with [LockedMutateOption], [LockOption] with
// [LockWaitOption], [LeaseOption], and [ApplyOption]. Errors are the
// sentinels and types of package [locking], matched with errors.Is and
// errors.As.
//
// A guarded write is a single statement
//
//	UPDATE t SET <every column>, version = <next version> ... WHERE pk = ? AND version = ?
//
// and zero rows affected is never ignored: the caller gets an error matching
// [locking.ErrStaleData] (a *[locking.StaleDataError] naming the versions)
// when another writer got there first, or [locking.ErrNotFound] when the
// record is gone. Writes are never routed through [gorm.DB.Save], whose
// zero-rows fallback is an upsert that overwrites newer data.
//
// # Versions
//
// A version is a clock reading in microseconds: every write sets it to
// max(previous version + 1, now), so versions only grow per record and a
// record created again after a delete never repeats a version its earlier
// incarnation had. On PostgreSQL and MySQL "now" is the database's clock,
// read by the write itself; on SQLite it is the process's clock, read once
// the write holds the database's write lock.
//
// # Outcomes
//
// Every write's error says whether it was applied: nil means applied, an
// error matching [locking.ErrCommitUnknown] means the outcome is unknown
// (the statement or COMMIT was sent, and then the connection broke or ctx
// ended), any other error means not applied. A write made with an operation
// key ([OpKey]) applies at most once however often it is repeated, and
// [LookupOperation] tells whether it was applied.
//
// Mutate and Upsert re-run the whole read-modify-write under a bounded,
// jittered retry policy. RunInTx groups several repositories' writes into one
// transaction carried by the context.
//
// Supported databases are SQLite (through gorm.io/driver/sqlite, or the
// pure-Go github.com/glebarez/sqlite), PostgreSQL (gorm.io/driver/postgres)
// and MySQL 8 / MariaDB, Galera included (gorm.io/driver/mysql); open them
// with the modules under opendb (opendb/sqlite, opendb/puresqlite,
// opendb/postgres, opendb/mysql) for the settings gormlock relies on. New refuses any
// other dialect with an error matching locking.ErrNotSupported rather than
// run untested.
//
// Update, Delete and Get run their own SQL, built once by New, on the
// connection (or on the transaction from RunInTx, or one the application
// opened, see WithTx). Get fills the entity the way GORM's scan does, and
// reads a model with an AfterFind hook or a read-only field through GORM.
// Create and Find go through GORM.
//
// # Models
//
// A model is a struct with a primary key of one or several columns (see
// [Key]) and an int64 version field: a field named Version (models.Versioned,
// or models.Versioning beside [gorm.Model]) or one tagged
// `gormlock:"version"`. A gorm.DeletedAt field makes deletes soft (see
// Delete, Restore, IncludeDeleted). Anything New cannot honour is refused
// with an error that names it and what to do instead.
//
// # Hooks
//
// GORM runs a model's hooks from its callbacks: BeforeSave, BeforeCreate,
// AfterCreate and AfterSave around Create, AfterFind after a read. gormlock
// creates records and (for models with AfterFind) reads them through GORM,
// so those run as GORM runs them. Update, Delete and the other guarded
// writes are gormlock's own statements: gormlock runs the update and delete
// hooks around them itself, with GORM's semantics — BeforeSave,
// BeforeUpdate, the guarded UPDATE, AfterUpdate, AfterSave; BeforeDelete,
// the guarded DELETE, AfterDelete — in one transaction (the caller's, or one
// of its own), so that an error from any hook aborts the write and rolls
// back whatever the hooks wrote. A Before hook may change the entity's
// fields, and the write stores the changed values. Hooks receive a
// *gorm.DB on that transaction, bound to the call's context.
//
// # Logging and tracing
//
// gormlock sends most of its statements itself, prepared once by New, not
// through GORM's statement builder (that is what keeps a guarded Update
// near database/sql's speed). Every statement that reads or writes data is
// still shown to the application's GORM logger (db.Logger.Trace, as GORM
// does after each statement) with its SQL, arguments, rows and error. GORM's
// logger prints the first frame outside gorm.io, which is gormlock's; so the
// SQL it logs ends with a comment naming the caller outside gormlock:
//
//	UPDATE "products" SET ... WHERE "id" = 7 AND "version" = 1795... /* gormlock: orders/handler.go:88 */
//
// The comment is only in the log; it is not sent to the database. It is
// computed only when the logger asks for the SQL (that is, when it logs).
//
// When db has GORM plugins other than gormlock's own (Plugin) registered
// (db.Use: tracing such as gorm.io/plugin/opentelemetry, metrics,
// gorm.io/plugin/dbresolver), or
// the repository is built WithCallbacks, the statements go through GORM's
// Raw and Row callbacks instead (GORM's processor with the SQL already
// built), so every callback registered there sees them — a tracing plugin
// opens its span, and the GORM logger is called by GORM itself. It costs
// more per statement (docs/coming-from-gorm.md has the figures). BEGIN,
// COMMIT, ROLLBACK,
// savepoints and SQLite's connection settings (PRAGMA) are not shown,
// as GORM does not show its own.
//
// With gorm.io/plugin/dbresolver, every statement gormlock sends itself is
// marked as dbresolver's Write operation, and so are its reads through GORM
// that a write depends on (Get, Mutate's and Upsert's reads, locked reads,
// lease reads, the stale/not-found check): they run on the primary
// (source), never on a replica that may not have the latest version yet.
// Find follows dbresolver's policy (a replica).
//
// On SQLite, gormlock's writers in one process queue for the database's
// write lock at a first-come-first-served gate, and wait for it in Go, so
// the context ends every wait; between processes the heads of the queues
// take turns on an advisory lock of a side file, "<file>-gormlock" (see
// docs/deploying.md).
package repository
