package repository

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/dialect"
	"github.com/gormlock/gormlock/locking"
)

type txKey struct{}

// txState is what RunInTx puts in the context.
type txState struct {
	sqlDB *sql.DB
	tx    *gorm.DB
	iso   sql.IsolationLevel // as RunInTx was asked; LevelDefault otherwise
	// commitInCtx: send COMMIT as a statement bound to the context
	// (MySQL: see runBegun).
	commitInCtx bool
	// checkAlive: ask before COMMIT whether the transaction is still
	// open (Galera: see runBegun).
	checkAlive bool

	mu sync.Mutex
	// rolledBack is the error of a statement after which the database
	// rolled the whole transaction back by itself (MySQL's deadlock
	// victim, a Galera transaction aborted by a replicated write): a
	// COMMIT sent after it would answer OK and commit nothing.
	rolledBack error
}

// noteRolledBack records, in the transaction ctx carries on sqlDB, that
// the database rolled it back after err (see txState.rolledBack). Only
// MySQL rolls a whole transaction back on a statement's error and then
// accepts a COMMIT; PostgreSQL refuses the COMMIT of an aborted
// transaction itself.
func noteRolledBack(ctx context.Context, s store, err error) {
	if err == nil || s.caps.Dialector() != dialect.MySQL || !errors.Is(locking.Classify(err), locking.ErrDeadlock) {
		return
	}
	if st, ok := ctx.Value(txKey{}).(*txState); ok && st.sqlDB == s.sqlDB {
		st.mu.Lock()
		if st.rolledBack == nil {
			st.rolledBack = err
		}
		st.mu.Unlock()
	}
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
func RunInTx(ctx context.Context, db *gorm.DB, fn func(ctx context.Context) error, opts ...*sql.TxOptions) (err error) {
	if fn == nil {
		return locking.Invalid("RunInTx: fn is nil")
	}
	s, err := storeOf(db, "RunInTx")
	if err != nil {
		return err
	}
	if outer, ok := ctx.Value(txKey{}).(*txState); ok && outer.sqlDB == s.sqlDB {
		if len(opts) > 0 {
			return locking.Invalid("RunInTx: nested in another transaction, it runs in a savepoint and cannot take its own TxOptions")
		}
		// Nested: a savepoint of our own, not GORM's Transaction, which
		// skips the savepoint when DisableNestedTransaction is set and
		// ignores a failed ROLLBACK TO.
		return inSavepoint(ctx, outer.tx, func() error { return fn(ctx) })
	}
	var o *sql.TxOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	return s.runTx(ctx, db, o, lockWait{}, "RunInTx", fn)
}

// joinOrRunTx runs fn in the transaction ctx carries, or else in one of
// its own (runTx on s.db; op names the caller in errors).
func (s store) joinOrRunTx(ctx context.Context, op string, fn func(context.Context) error) error {
	if _, inTx := s.conn(ctx); inTx {
		return fn(ctx)
	}
	return s.runTx(ctx, s.db, nil, lockWait{}, op, fn)
}

// savepointOrRunTx is joinOrRunTx that runs fn in a savepoint of the
// transaction ctx carries, so that its failure does not abort the caller's
// transaction.
func (s store) savepointOrRunTx(ctx context.Context, op string, fn func(context.Context) error) error {
	if tx, inTx := s.conn(ctx); inTx {
		return inSavepoint(ctx, tx, func() error { return fn(ctx) })
	}
	return s.runTx(ctx, s.db, nil, lockWait{}, op, fn)
}

// runTx begins a transaction on db (the caller's *gorm.DB, whose settings
// the transaction keeps), runs fn with it in its context and commits it;
// when fn returns an error or panics, it rolls back instead. w bounds the
// wait for SQLite's write lock. op names the caller in errors.
func (s store) runTx(ctx context.Context, db *gorm.DB, o *sql.TxOptions, w lockWait, op string, fn func(context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	st := &txState{sqlDB: s.sqlDB}
	db = withCallerLogger(db)
	if o != nil {
		st.iso = o.Isolation
	}
	if s.caps.SingleWriter {
		if o != nil && o.Isolation != sql.LevelDefault && o.Isolation != sql.LevelSerializable {
			return fmt.Errorf("%w: %s: SQLite transactions are serializable; isolation level %v", locking.ErrNotSupported, op, o.Isolation)
		}
		tx, err := beginSQLite(ctx, s.sqlDB, w, o != nil && o.ReadOnly)
		if err != nil {
			return fmt.Errorf("%s: begin: %w", op, err)
		}
		st.tx = db.Session(&gorm.Session{NewDB: true, Context: ctx, SkipDefaultTransaction: true})
		st.tx.Statement.ConnPool = tx
	} else {
		if s.caps.Dialector() == dialect.MySQL && (o == nil || o.Isolation == sql.LevelDefault) {
			// READ COMMITTED, as PostgreSQL's default: each statement sees
			// what is committed when it starts, so a read-modify-write
			// retried inside the transaction (Mutate) reads the new
			// version instead of REPEATABLE READ's old snapshot.
			rc := sql.TxOptions{Isolation: sql.LevelReadCommitted}
			if o != nil {
				rc.ReadOnly = o.ReadOnly
			}
			o = &rc
		}
		tx := db.WithContext(ctx).Begin(optsOf(o)...)
		if tx.Error != nil {
			return fmt.Errorf("%s: begin: %w", op, locking.Classify(tx.Error))
		}
		st.tx = tx
		st.commitInCtx = s.caps.Dialector() == dialect.MySQL
		st.checkAlive = s.caps.Name == dialect.Galera
	}
	return runBegun(ctx, st, op, fn)
}

func optsOf(o *sql.TxOptions) []*sql.TxOptions {
	if o == nil {
		return nil
	}
	return []*sql.TxOptions{o}
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
	st.mu.Lock()
	gone := st.rolledBack
	st.mu.Unlock()
	if gone != nil {
		// fn went on after the database had rolled the transaction back
		// (it ignored the error): never COMMIT it, which would answer OK.
		return fmt.Errorf("%s: not committed: the database rolled the transaction back after: %w", op, locking.Classify(gone))
	}
	if err := ctx.Err(); err != nil {
		// Not sent: the deferred rollback ends the transaction.
		return fmt.Errorf("%s: not committed: %w", op, err)
	}
	if st.checkAlive {
		// Galera aborts a transaction that conflicts with a write
		// replicated from another node at any time, also between two of
		// its statements. The next statement is then told (1213) — but a
		// prepared SELECT is not: it runs after the rollback, outside any
		// transaction, and answers rows, and the COMMIT that follows
		// answers OK for writes that were rolled back (measured: 7 of 240
		// acknowledged increments lost when a transaction ended with a
		// read). So before COMMIT, ask — in a plain statement, which is
		// told — whether the transaction is still open.
		var open int
		err := st.tx.Statement.ConnPool.QueryRowContext(ctx, "SELECT @@in_transaction").Scan(&open)
		switch {
		case err != nil:
			return fmt.Errorf("%s: not committed: %w", op, locking.Classify(err))
		case open == 0:
			return fmt.Errorf("%s: not committed: the cluster rolled the transaction back (a conflict with a write on another node): %w",
				op, &locking.DatabaseError{Kind: locking.ErrDeadlock, Code: "1213", Err: errors.New("transaction no longer open before COMMIT")})
		}
	}
	committed = true // a failed COMMIT ends the transaction as well
	if st.commitInCtx && ctx.Done() != nil {
		// go-sql-driver/mysql's Commit waits for the answer with no
		// deadline: a lost answer would hold the call forever, whatever
		// ctx says. As a statement, COMMIT ends with ctx (the driver closes
		// the connection), and the outcome is then unknown. database/sql's
		// own Commit that follows finds no transaction on the server and
		// changes nothing; its error cannot undo the commit made.
		if _, err := st.tx.Statement.ConnPool.ExecContext(ctx, "COMMIT"); err != nil {
			_ = st.tx.Rollback()
			return fmt.Errorf("%s: commit: %w", op, locking.ClassifyCommit(err))
		}
		_ = st.tx.Commit()
		return nil
	}
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
func WithTx(ctx context.Context, tx *gorm.DB) (context.Context, error) {
	if tx == nil || tx.Statement == nil {
		return ctx, locking.Invalid("WithTx: tx is nil")
	}
	if _, ok := tx.Statement.ConnPool.(gorm.TxCommitter); !ok {
		return ctx, locking.Invalid("WithTx: the *gorm.DB is not in a transaction (pass the tx of db.Transaction, or of db.Begin)")
	}
	s, err := storeOf(tx, "WithTx")
	if err != nil {
		return ctx, err
	}
	return context.WithValue(ctx, txKey{}, &txState{sqlDB: s.sqlDB, tx: withCallerLogger(tx.Session(&gorm.Session{NewDB: true}))}), nil
}

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
func Tx(ctx context.Context, db *gorm.DB) *gorm.DB {
	if db == nil {
		return nil
	}
	if st, ok := ctx.Value(txKey{}).(*txState); ok {
		if sqlDB, err := db.DB(); err == nil && st.sqlDB == sqlDB {
			return st.tx.WithContext(ctx)
		}
	}
	return db.WithContext(ctx)
}
