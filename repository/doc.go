// Package repository provides Repository[T], a typed store for one GORM model
// whose every write is guarded by the record's version.
//
// A guarded write is a single statement
//
//	UPDATE t SET <every column>, version = <next version> ... WHERE pk = ? AND version = ?
//
// and zero rows affected is never ignored: the caller gets an error matching
// locking.ErrStaleData (a *locking.StaleDataError naming the versions) when
// another writer got there first, or locking.ErrNotFound when the record is
// gone. Writes are never routed through gorm.DB.Save, whose zero-rows fallback
// is an upsert that overwrites newer data.
//
// # Versions
//
// A version is a clock reading in microseconds: every write sets it to
// max(previous version + 1, now), so versions only grow per record and a
// record created again after a delete never repeats a version its earlier
// incarnation had (version.go says how "now" is read on each database).
//
// # Outcomes
//
// Every write's error says whether it was applied: nil means applied, an
// error matching locking.ErrCommitUnknown means the outcome is unknown (the
// statement or COMMIT was sent, and then the connection broke or ctx ended),
// any other error means not applied. A write made with an operation key
// (OpKey) applies at most once however often it is repeated, and
// LookupOperation tells whether it was applied.
//
// Mutate and Upsert re-run the whole read-modify-write under a bounded,
// jittered retry policy. RunInTx groups several repositories' writes into one
// transaction carried by the context.
//
// Supported databases are SQLite (through gorm.io/driver/sqlite; open it with
// package opendb for safe concurrent settings) and PostgreSQL (through
// gorm.io/driver/postgres). New refuses any other dialect with an error
// matching locking.ErrNotSupported rather than run untested.
//
// Update, Delete and Get run their own SQL, built once by New, on the
// connection (or on the transaction from RunInTx); they do not run GORM's
// hooks, callbacks or logger. Get fills the entity the way GORM's scan does,
// and reads a model with an AfterFind hook or a read-only field through
// GORM. Create and Find go through GORM.
//
// On SQLite, gormlock's writers in one process queue for the database's
// write lock at a first-come-first-served gate, and wait for it in Go, so
// the context ends every wait (see sqlite.go).
package repository
