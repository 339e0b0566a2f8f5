package repository

import (
	"context"
	"database/sql"
	"fmt"

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/locking"
)

type txKey struct{}

// txState is what RunInTx puts in the context.
type txState struct {
	sqlDB *sql.DB
	tx    *gorm.DB
}

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
// A failed COMMIT whose outcome is unknown (the connection broke) returns an
// error matching locking.ErrCommitUnknown; RunInTx never retries it.
//
// Entities written inside a rolled-back transaction keep the versions the
// writes gave them in memory; load them again before reusing them.
func RunInTx(ctx context.Context, db *gorm.DB, fn func(ctx context.Context) error, opts ...*sql.TxOptions) (err error) {
	if db == nil {
		return locking.Invalid("RunInTx: db is nil")
	}
	if fn == nil {
		return locking.Invalid("RunInTx: fn is nil")
	}
	sqlDB, err := db.DB()
	if err != nil {
		return fmt.Errorf("RunInTx: %w", err)
	}
	if outer, ok := ctx.Value(txKey{}).(*txState); ok && outer.sqlDB == sqlDB {
		if len(opts) > 0 {
			return locking.Invalid("RunInTx: nested in another transaction, it runs in a savepoint and cannot take its own TxOptions")
		}
		// Nested: GORM's Transaction on a transaction uses a savepoint.
		return outer.tx.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			return fn(context.WithValue(ctx, txKey{}, &txState{sqlDB: sqlDB, tx: tx}))
		})
	}
	tx := db.WithContext(ctx).Begin(opts...)
	if tx.Error != nil {
		return fmt.Errorf("RunInTx: begin: %w", locking.Classify(tx.Error))
	}
	committed := false
	defer func() {
		if !committed {
			tx.Rollback()
		}
	}()
	if err := fn(context.WithValue(ctx, txKey{}, &txState{sqlDB: sqlDB, tx: tx})); err != nil {
		return err
	}
	committed = true // a failed COMMIT ends the transaction as well
	if err := tx.Commit().Error; err != nil {
		return fmt.Errorf("RunInTx: commit: %w", locking.ClassifyCommit(err))
	}
	return nil
}

// InTx reports whether ctx carries a transaction from RunInTx.
func InTx(ctx context.Context) bool {
	_, ok := ctx.Value(txKey{}).(*txState)
	return ok
}
