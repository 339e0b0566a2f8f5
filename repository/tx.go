package repository

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/locking"
)

type txKey struct{}

// txState is what RunInTx puts in the context.
type txState struct {
	sqlDB *sql.DB
	tx    *gorm.DB
	iso   sql.IsolationLevel // as RunInTx was asked; LevelDefault otherwise
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
		// Nested: a savepoint of our own, not GORM's Transaction, which
		// skips the savepoint when DisableNestedTransaction is set and
		// ignores a failed ROLLBACK TO.
		return inSavepoint(ctx, outer.tx, func() error { return fn(ctx) })
	}
	tx := db.WithContext(ctx).Begin(opts...)
	if tx.Error != nil {
		return fmt.Errorf("RunInTx: begin: %w", locking.Classify(tx.Error))
	}
	st := &txState{sqlDB: sqlDB, tx: tx}
	if len(opts) > 0 && opts[0] != nil {
		st.iso = opts[0].Isolation
	}
	return runBegun(ctx, st, "RunInTx", fn)
}

// runBegun runs fn with the begun transaction st in its context and commits
// it; when fn returns an error or panics, it rolls back instead. op names
// the caller in a commit error, which is classified by ClassifyCommit.
func runBegun(ctx context.Context, st *txState, op string, fn func(context.Context) error) error {
	committed := false
	defer func() {
		if !committed {
			st.tx.Rollback()
		}
	}()
	if err := fn(context.WithValue(ctx, txKey{}, st)); err != nil {
		return err
	}
	committed = true // a failed COMMIT ends the transaction as well
	if err := st.tx.Commit().Error; err != nil {
		return fmt.Errorf("%s: commit: %w", op, locking.ClassifyCommit(err))
	}
	return nil
}

var savepointSeq atomic.Uint64

// inSavepoint runs fn inside a savepoint of the transaction tx and rolls
// back to it when fn returns an error or panics, so that only fn's writes are
// undone and (on PostgreSQL) the transaction stays usable. A failed ROLLBACK
// TO is reported with fn's error.
func inSavepoint(ctx context.Context, tx *gorm.DB, fn func() error) (err error) {
	name := "gormlock_sp" + strconv.FormatUint(savepointSeq.Add(1), 10)
	if err := tx.WithContext(ctx).SavePoint(name).Error; err != nil {
		return fmt.Errorf("savepoint: %w", locking.Classify(err))
	}
	done := false
	defer func() {
		if done && err == nil {
			return
		}
		// Runs on panic too; the panic then goes on.
		if rerr := tx.WithContext(context.WithoutCancel(ctx)).RollbackTo(name).Error; rerr != nil {
			err = errors.Join(err, fmt.Errorf("rollback to savepoint: %w", locking.Classify(rerr)))
		}
	}()
	err = fn()
	done = true
	if err != nil {
		return err
	}
	if err := tx.WithContext(ctx).Exec("RELEASE SAVEPOINT " + name).Error; err != nil {
		return fmt.Errorf("release savepoint: %w", locking.Classify(err))
	}
	return nil
}

// InTx reports whether ctx carries a transaction from RunInTx.
func InTx(ctx context.Context) bool {
	_, ok := ctx.Value(txKey{}).(*txState)
	return ok
}
