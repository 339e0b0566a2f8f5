// Package repository provides Repository[T], a typed store for one GORM model
// whose every write is guarded by the record's version.
//
// A guarded write is a single statement
//
//	UPDATE t SET <every column>, version = version+1 ... WHERE pk = ? AND version = ?
//
// and zero rows affected is never ignored: the caller gets an error matching
// locking.ErrStaleData (a *locking.StaleDataError naming the versions) when
// another writer got there first, or locking.ErrNotFound when the record is
// gone. Writes are never routed through gorm.DB.Save, whose zero-rows fallback
// is an upsert that overwrites newer data.
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
// GORM.
// Create and Find go through GORM.
package repository
