package repository

import (
	"context"
	"database/sql"

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/store"
)

// RunInTx runs fn in a database transaction on db and commits it when fn
// returns nil; when fn returns an error or panics, the transaction is rolled
// back and the error (or panic) is passed on.
//
// fn receives a context that carries the transaction: every Repository built
// on the same database uses it for calls made with that context, so several
// repositories' guarded writes commit or roll back together. A stale write
// inside fn returns its error to fn; returning it rolls everything back.
// RunInTx inside RunInTx (same database) runs fn in a savepoint of the outer
// transaction; it then takes no opts (an error matching
// locking.ErrInvalidArgument says so). ctx governs the whole transaction: when
// it is cancelled the transaction is rolled back. opts, if given, sets the
// isolation level and read-only mode.
//
// On MySQL and MariaDB the transaction is READ COMMITTED unless opts asks
// for another level (their default is REPEATABLE READ, PostgreSQL's is READ
// COMMITTED): a read-modify-write that retries inside it reads the latest
// committed version.
//
// On SQLite the transaction begins IMMEDIATE (it holds the database's write
// lock from its start, as with opendb's settings), after waiting in Go for
// the other writers of this process and of other processes — a wait ctx can
// end. ReadOnly transactions begin DEFERRED and wait for no one.
//
// The COMMIT's outcome is told truthfully: nil when committed; an error
// matching locking.ErrCommitUnknown when the COMMIT was sent and the
// connection broke or ctx ended before the answer (RunInTx never retries
// it); any other error means nothing was committed.
//
// Entities written inside a rolled-back transaction keep the versions the
// writes gave them in memory; load them again before reusing them.
func RunInTx(ctx context.Context, db *gorm.DB, fn func(ctx context.Context) error, opts ...*sql.TxOptions) error {
	return store.RunInTx(ctx, db, fn, opts...)
}

// InTx reports whether ctx carries a transaction from RunInTx.
func InTx(ctx context.Context) bool { return store.InTx(ctx) }

// WithTx returns a context carrying tx, a transaction the application
// opened with GORM (db.Transaction's tx, or db.Begin()), so that repository
// calls made with that context run in it, as inside RunInTx: their writes
// commit or roll back with the application's. gormlock never commits or
// rolls back tx itself; RunInTx with the returned context runs in a
// savepoint of it. A *gorm.DB that is not in a transaction gives an error
// matching locking.ErrInvalidArgument.
//
//	err := db.Transaction(func(tx *gorm.DB) error {
//		ctx, err := repository.WithTx(ctx, tx)
//		if err != nil {
//			return err
//		}
//		if err := tx.Create(&audit).Error; err != nil {
//			return err
//		}
//		return orders.Update(ctx, order) // same transaction
//	})
//
// On SQLite, tx should have begun IMMEDIATE (opendb's default, _txlock):
// a transaction that began DEFERRED takes the write lock at its first write
// and can fail there with SQLITE_BUSY.
func WithTx(ctx context.Context, tx *gorm.DB) (context.Context, error) { return store.WithTx(ctx, tx) }

// Tx returns the *gorm.DB for plain GORM calls made with ctx on db's
// database: the transaction RunInTx (or WithTx) put in ctx, or db itself
// when there is none, bound to ctx either way. Inside RunInTx, use it for
// the GORM calls that must be part of the transaction:
//
//	err := repository.RunInTx(ctx, db, func(ctx context.Context) error {
//		if err := repository.Tx(ctx, db).Create(&audit).Error; err != nil {
//			return err
//		}
//		return orders.Update(ctx, order)
//	})
//
// A GORM call on db itself would run outside the transaction: on
// PostgreSQL it would not roll back with it, and on SQLite it would wait
// for the write lock the transaction holds until its busy timeout ends.
func Tx(ctx context.Context, db *gorm.DB) *gorm.DB { return store.Tx(ctx, db) }

// WithCallbacks makes the repository send its statements through GORM's
// callbacks (see "Logging and tracing" in the package doc) even when no
// plugin other than gormlock's own (Plugin) is registered: for callbacks an
// application registered itself with db.Callback(). With on false, they
// never go through callbacks, even with plugins registered (the fast path;
// the logger still sees them).
func WithCallbacks(on bool) Option {
	return func(o *options) error {
		o.callbacks = &on
		return nil
	}
}
