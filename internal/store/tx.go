package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/dialect"
	"github.com/gormlock/gormlock/internal/sqlitegate"
	"github.com/gormlock/gormlock/locking"
)

type txKey struct{}

// TxState is what RunInTx puts in the context.
type TxState struct {
	sqlDB *sql.DB
	// pool is the transaction: a *sqlitegate.Tx, an *ownTx, or the
	// ConnPool of the application's transaction (WithTx).
	pool gorm.ConnPool
	// tx is the *gorm.DB on pool, made from base in ctx the first time a
	// statement goes through GORM (gormTx): a transaction whose statements
	// are all gormlock's own (MutateRowLocked's, most often) makes none,
	// which saves two Statement clones per call.
	txOnce sync.Once
	tx     *gorm.DB
	base   *gorm.DB
	ctx    context.Context
	iso    sql.IsolationLevel // as RunInTx was asked; LevelDefault otherwise
	// commitInCtx: send COMMIT as a statement bound to the context
	// (MySQL: see runBegun).
	commitInCtx bool
	// checkAlive: ask before COMMIT whether the transaction is still
	// open (Galera: see runBegun).
	checkAlive bool
	// own is the transaction RunInTx began on PostgreSQL or MySQL (tx's
	// ConnPool), whose COMMIT ends with the call's context; nil on SQLite
	// and for a transaction of the application's (WithTx).
	own *ownTx
	// obs is told of a COMMIT whose outcome is unknown; nil for none.
	obs Observer

	mu sync.Mutex
	// released: ReleaseAfter rolled the transaction back from another
	// goroutine, to release its locks; it must never be committed.
	released bool
	// rolledBack is the error of a statement after which the database
	// rolled the whole transaction back by itself (MySQL's deadlock
	// victim, a Galera transaction aborted by a replicated write): a
	// COMMIT sent after it would answer OK and commit nothing.
	rolledBack error
}

// NoteRolledBack records, in the transaction ctx carries on sqlDB, that
// the database rolled it back after err (see TxState.rolledBack). Only
// MySQL rolls a whole transaction back on a statement's error and then
// accepts a COMMIT; PostgreSQL refuses the COMMIT of an aborted
// transaction itself, and so does SQLite (after an interrupted write).
func NoteRolledBack(ctx context.Context, s Store, err error) {
	if err == nil || s.Caps.Dialector() != dialect.MySQL || !errors.Is(locking.Classify(err), locking.ErrDeadlock) {
		return
	}
	if st, ok := ctx.Value(txKey{}).(*TxState); ok && st.sqlDB == s.SQLDB {
		st.mu.Lock()
		if st.rolledBack == nil {
			st.rolledBack = err
		}
		st.mu.Unlock()
	}
}

// RunInTx is repository.RunInTx; see its documentation.
func RunInTx(ctx context.Context, db *gorm.DB, fn func(ctx context.Context) error, opts ...*sql.TxOptions) (err error) {
	if fn == nil {
		return locking.Invalid("RunInTx: fn is nil")
	}
	s, err := Of(db, "RunInTx")
	if err != nil {
		return err
	}
	if outer, ok := ctx.Value(txKey{}).(*TxState); ok && outer.sqlDB == s.SQLDB {
		if len(opts) > 0 {
			return locking.Invalid("RunInTx: nested in another transaction, it runs in a savepoint and cannot take its own TxOptions")
		}
		// Nested: a savepoint of our own, not GORM's Transaction, which
		// skips the savepoint when DisableNestedTransaction is set and
		// ignores a failed ROLLBACK TO.
		return InSavepoint(ctx, outer.gormTx(), func() error { return fn(ctx) })
	}
	var o *sql.TxOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	return s.RunTx(ctx, db, o, sqlitegate.Wait{}, "RunInTx", fn)
}

// JoinOrRunTx runs fn in the transaction ctx carries, or else in one of
// its own (RunTx on s.Gorm; op names the caller in errors).
func (s Store) JoinOrRunTx(ctx context.Context, op string, fn func(context.Context) error) error {
	if _, inTx := s.Pool(ctx); inTx {
		return fn(ctx)
	}
	return s.RunTx(ctx, s.Gorm, nil, sqlitegate.Wait{}, op, fn)
}

// SavepointOrRunTx is JoinOrRunTx that runs fn in a savepoint of the
// transaction ctx carries, so that its failure does not abort the caller's
// transaction.
func (s Store) SavepointOrRunTx(ctx context.Context, op string, fn func(context.Context) error) error {
	if tx, inTx := s.Conn(ctx); inTx {
		return InSavepoint(ctx, tx, func() error { return fn(ctx) })
	}
	return s.RunTx(ctx, s.Gorm, nil, sqlitegate.Wait{}, op, fn)
}

// RunTx begins a transaction on db (the caller's *gorm.DB, whose settings
// the transaction keeps), runs fn with it in its context and commits it;
// when fn returns an error or panics, it rolls back instead. w bounds the
// wait for SQLite's write lock. op names the caller in errors.
func (s Store) RunTx(ctx context.Context, db *gorm.DB, o *sql.TxOptions, w sqlitegate.Wait, op string, fn func(context.Context) error) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d := db.Config.DefaultTransactionTimeout; d > 0 {
		// As GORM's Begin: a transaction whose context has no deadline
		// ends after the config's DefaultTransactionTimeout.
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, d)
			defer cancel()
		}
	}
	st := &TxState{sqlDB: s.SQLDB, obs: s.Obs, base: db, ctx: ctx}
	if o != nil {
		st.iso = o.Isolation
	}
	if s.Caps.SingleWriter {
		if o != nil && o.Isolation != sql.LevelDefault && o.Isolation != sql.LevelSerializable {
			return fmt.Errorf("%w: %s: SQLite transactions are serializable; isolation level %v", locking.ErrNotSupported, op, o.Isolation)
		}
		readOnly := o != nil && o.ReadOnly
		begin := s.obsNow()
		tx, err := sqlitegate.Begin(ctx, s.SQLDB, w, readOnly)
		if !readOnly {
			s.gateWait(ctx, begin, err) // a read-only transaction waits for nobody
		}
		if err != nil {
			return fmt.Errorf("%s: begin: %w", op, err)
		}
		st.pool = tx
	} else {
		if s.Caps.Dialector() == dialect.MySQL && (o == nil || o.Isolation == sql.LevelDefault) {
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
		tx, end, err := beginOwn(ctx, s.SQLDB, o, s.Caps.Dialector())
		if err != nil {
			return fmt.Errorf("%s: begin: %w", op, locking.Classify(err))
		}
		defer func() {
			if uerr := end(); uerr != nil && err != nil {
				err = fmt.Errorf("%w (and the transaction could not be confirmed ended on the server within %v: %w)", err, goneWait, uerr)
			}
		}()
		st.pool = tx
		st.own = tx
		st.commitInCtx = s.Caps.Dialector() == dialect.MySQL
		st.checkAlive = s.Caps.Name == dialect.Galera
	}
	return runBegun(ctx, st, op, fn)
}

// rollbackTimeout bounds the ROLLBACK of a transaction whose context has
// ended: the server is given that long to answer before the connection is
// closed and dropped from the pool.
const rollbackTimeout = 5 * time.Second

// ownTx is a transaction RunInTx began: a *sql.Tx on a connection taken
// for it, whose life is not tied to the caller's context. database/sql rolls
// back a transaction whose context ends in a goroutine of its own, so a
// call could return while its transaction was still open on the server
// (measured: up to 42 ms, idle in transaction, holding its row locks).
// Here the caller's context bounds the wait for a connection, BEGIN and
// COMMIT, each statement (through the statement's own context), and the
// ROLLBACK is sent and waited for by RunInTx itself, bounded by
// rollbackTimeout: when RunInTx returns, the transaction has ended on the
// server, or its connection is closed and dropped.
type ownTx struct {
	*sql.Tx
	cancel context.CancelFunc // ends the transaction's own context
	db     *sql.DB
	// canc cancels a statement of the transaction on the server when the
	// caller's context ends while it runs (see guard); nil when the
	// driver offers no way.
	canc canceller

	mu sync.Mutex
	// cancelSent: a statement was cancelled on the server; the
	// connection is not given back to the pool, where a late cancel
	// could reach another caller's statement.
	cancelSent bool
	// forced says why the connection was closed while a statement ran
	// on the server (which may then outlive it); nil when it was not.
	forced error
}

// socketAborted returns why the wait on t's connection's socket was ended
// while one of its statements ran (see aborter), or nil: the connection
// then takes no COMMIT.
func (t *ownTx) socketAborted() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if errors.Is(t.forced, errSocketAborted) {
		return t.forced
	}
	return nil
}

// wasCancelled reports whether a statement of t was cancelled on the
// server (see guard).
func (t *ownTx) wasCancelled() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cancelSent
}

// GetDBConn implements gorm.GetDBConnector: GORM's DB() on the transaction
// returns the database, as it does for a *sql.Tx.
func (t *ownTx) GetDBConn() (*sql.DB, error) { return t.db, nil }

// beginOwn begins an ownTx on db; end releases its connection once the
// transaction has been committed or rolled back. When the connection was
// closed while a statement ran on the server (see guard), end then makes
// sure the session is gone (ensureEnded) and returns why that could not be
// confirmed, or nil.
func beginOwn(ctx context.Context, db *sql.DB, o *sql.TxOptions, d string) (*ownTx, func() error, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, nil, err
	}
	canc := newCanceller(ctx, db, conn, d)
	if err := ctx.Err(); err != nil {
		// Ended while the session's id was asked (the driver then
		// closed the connection): nothing was begun.
		_ = conn.Close()
		return nil, nil, err
	}
	txCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var tx *sql.Tx
	err = bounded(ctx, cancel, 0, func() error {
		var err error
		tx, err = conn.BeginTx(txCtx, o)
		return err
	})
	if err != nil {
		cancel()
		_ = conn.Close()
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			err = fmt.Errorf("%w: %w", cerr, err)
		}
		return nil, nil, err
	}
	t := &ownTx{Tx: tx, cancel: cancel, db: db, canc: canc}
	return t, func() error {
		cancel()
		t.mu.Lock()
		forced := t.forced
		discard := t.cancelSent || forced != nil
		t.mu.Unlock()
		if discard {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn }) // closes it
		}
		_ = conn.Close() // first: a pool of one connection has it back for KILL
		if forced != nil {
			return t.ensureEnded(forced)
		}
		return nil
	}, nil
}

// bounded runs step, which works under the transaction's own context, and
// ends that context (cancel) when ctx ends first, or after limit when it is
// positive: the driver then gives up the step and closes the connection.
func bounded(ctx context.Context, cancel context.CancelFunc, limit time.Duration, step func() error) error {
	done := make(chan struct{})
	stopped := make(chan struct{})
	var timer <-chan time.Time
	if limit > 0 {
		t := time.NewTimer(limit)
		defer t.Stop()
		timer = t.C
	}
	go func() {
		defer close(stopped)
		select {
		case <-done:
		case <-ctx.Done():
			cancel()
		case <-timer:
			cancel()
		}
	}()
	err := step()
	close(done)
	<-stopped
	return err
}

// commit commits; when ctx ends first, the driver gives the COMMIT up and
// its outcome is unknown.
func (t *ownTx) commit(ctx context.Context) error {
	return bounded(ctx, t.cancel, 0, t.Tx.Commit)
}

// Rollback implements gorm.TxCommitter: it sends ROLLBACK and waits for
// the answer, at most rollbackTimeout, whatever the caller's context says.
//
// A ROLLBACK that fails after a statement was cancelled on the server (a
// late cancel can reach it) leaves the session to be confirmed ended as
// a closed connection's is (see end in beginOwn).
func (t *ownTx) Rollback() error {
	err := bounded(context.Background(), t.cancel, rollbackTimeout, t.Tx.Rollback)
	if err != nil && !errors.Is(err, sql.ErrTxDone) {
		t.mu.Lock()
		if t.cancelSent && t.forced == nil && t.canc != nil {
			t.forced = fmt.Errorf("the ROLLBACK after a cancel failed: %w", err)
		}
		t.mu.Unlock()
	}
	return err
}

// runBegun runs fn with the begun transaction st in its context and commits
// it; when fn returns an error or panics, it rolls back instead. op names
// the caller in a commit error, which is classified by ClassifyCommit.
func runBegun(ctx context.Context, st *TxState, op string, fn func(context.Context) error) error {
	committed := false
	defer func() {
		if !committed {
			_ = st.rollback()
		}
	}()
	if err := fn(context.WithValue(ctx, txKey{}, st)); err != nil {
		return endedBy(ctx, err)
	}
	st.mu.Lock()
	gone, released := st.rolledBack, st.released
	st.mu.Unlock()
	if released {
		return fmt.Errorf("%s: not committed: the transaction was rolled back to release its locks", op)
	}
	if gone != nil {
		// fn went on after the database had rolled the transaction back
		// (it ignored the error): never COMMIT it, which would answer OK.
		return fmt.Errorf("%s: not committed: the database rolled the transaction back after: %w", op, locking.Classify(gone))
	}
	if err := ctx.Err(); err != nil {
		// Not sent: the deferred rollback ends the transaction.
		return fmt.Errorf("%s: not committed: %w", op, err)
	}
	if st.own != nil {
		if err := st.own.socketAborted(); err != nil {
			// A statement's context ended and its connection was cut
			// (fn went on): a COMMIT would fail unsent and look unknown;
			// the server rolls the transaction back as the connection
			// closes.
			return fmt.Errorf("%s: not committed: the transaction's connection was closed while a statement ran: %w", op, err)
		}
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
		err := st.pool.QueryRowContext(ctx, "SELECT @@in_transaction").Scan(&open)
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
		if _, err := st.pool.ExecContext(ctx, "COMMIT"); err != nil {
			_ = st.rollback()
			return st.commitFailed(ctx, op, err)
		}
		_ = st.committer().Commit()
		if st.own != nil && st.own.wasCancelled() {
			// The COMMIT answered OK after KILL QUERY reached it: a
			// semi-synchronous wait for a replica ends that way after
			// the local commit, so the write may not survive a failover.
			return st.commitFailed(ctx, op, fmt.Errorf("the COMMIT ended as it was cancelled on the server: %w", ctx.Err()))
		}
		return nil
	}
	if st.own != nil {
		if err := st.own.commit(ctx); err != nil {
			return st.commitFailed(ctx, op, err)
		}
		return nil
	}
	if err := st.committer().Commit(); err != nil {
		return st.commitFailed(ctx, op, err)
	}
	return nil
}

// endedBy returns err, the error of a transaction's statement, with ctx's
// error in its chain when ctx has ended and err is the statement's
// interruption by it: SQLite's SQLITE_INTERRUPT, which the pure-Go driver
// answers rather than the context's error for an INSERT ... RETURNING
// (GORM's Create) interrupted as it ran.
func endedBy(ctx context.Context, err error) error {
	cerr := ctx.Err()
	if cerr == nil || errors.Is(err, cerr) || locking.Code(err) != "SQLITE_9" {
		return err
	}
	return fmt.Errorf("%w: %w", cerr, err)
}

// gormTx returns the transaction as a *gorm.DB (see TxState.tx).
func (st *TxState) gormTx() *gorm.DB {
	st.txOnce.Do(func() {
		st.tx = WithCallerLogger(st.base).Session(&gorm.Session{NewDB: true, Context: st.ctx, SkipDefaultTransaction: true})
		st.tx.Statement.ConnPool = st.pool
	})
	return st.tx
}

// committer is the transaction's commit and rollback. RunTx's
// transactions (a *sqlitegate.Tx, an *ownTx) are gorm.TxCommitters; for
// anything else it fails as GORM's Commit and Rollback do.
func (st *TxState) committer() gorm.TxCommitter {
	if c, ok := st.pool.(gorm.TxCommitter); ok && c != nil {
		return c
	}
	return invalidTx{}
}

// invalidTx is the committer of a transaction that is none.
type invalidTx struct{}

func (invalidTx) Commit() error   { return gorm.ErrInvalidTransaction }
func (invalidTx) Rollback() error { return gorm.ErrInvalidTransaction }

// rollback rolls back RunTx's transaction, as GORM's Rollback would.
func (st *TxState) rollback() error { return st.committer().Rollback() }

// commitFailed classifies the error of the transaction's COMMIT (see
// locking.ClassifyCommit), tells the observer when its outcome is unknown,
// and names op in it.
func (st *TxState) commitFailed(ctx context.Context, op string, err error) error {
	err = locking.ClassifyCommit(err)
	if st.obs != nil && errors.Is(err, locking.ErrCommitUnknown) {
		st.obs.UnknownOutcome(ctx, err)
	}
	return fmt.Errorf("%s: commit: %w", op, err)
}

// ReleaseAfter arranges for the transaction ctx carries, one RunTx began,
// to be rolled back from another goroutine after d, which releases its
// locks, unless the returned stop is called first. stop reports whether the
// transaction was rolled back, and returns once the rollback is over;
// the transaction then fails every statement and is never committed. In a
// transaction of the application's (WithTx), or none, nothing is
// arranged and stop reports false.
func ReleaseAfter(ctx context.Context, d time.Duration) (stop func() bool) {
	st, ok := ctx.Value(txKey{}).(*TxState)
	if !ok {
		return func() bool { return false }
	}
	c, ok := st.pool.(gorm.TxCommitter)
	if !ok || (st.own == nil && !isGateTx(c)) {
		return func() bool { return false }
	}
	const (
		running = iota
		stopped
		releasing
	)
	var state atomic.Int32
	done := make(chan struct{})
	t := time.AfterFunc(d, func() {
		defer close(done)
		if !state.CompareAndSwap(running, releasing) {
			return
		}
		st.mu.Lock()
		st.released = true
		st.mu.Unlock()
		_ = c.Rollback() // bounded: ownTx.Rollback; SQLite's is in the process
	})
	return func() bool {
		if state.CompareAndSwap(running, stopped) {
			t.Stop()
			return false
		}
		<-done
		return true
	}
}

// isGateTx reports whether c is a transaction of SQLite's writer gate.
func isGateTx(c gorm.TxCommitter) bool {
	_, ok := c.(*sqlitegate.Tx)
	return ok
}

var savepointSeq atomic.Uint64

// InSavepoint runs fn inside a savepoint of the transaction tx and rolls
// back to it when fn returns an error or panics, so that only fn's writes are
// undone and (on PostgreSQL) the transaction stays usable. A failed ROLLBACK
// TO is reported with fn's error.
func InSavepoint(ctx context.Context, tx *gorm.DB, fn func() error) (err error) {
	name := "gormlock_sp" + strconv.FormatUint(savepointSeq.Add(1), 10)
	// On SQLite SAVEPOINT and RELEASE are sent with a context that does
	// not end, once ctx is found alive, as every statement of gormlock's
	// (see Detach): given one that ends as it runs, the pure-Go driver
	// answers nil for a statement it never ran.
	sqlite := tx.Dialector != nil && tx.Dialector.Name() == dialect.SQLite
	sctx, err := DetachOn(ctx, sqlite)
	if err != nil {
		return err
	}
	if err := tx.WithContext(sctx).SavePoint(name).Error; err != nil {
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
	if sctx, err = DetachOn(ctx, sqlite); err != nil {
		return err // not released: rolled back to the savepoint
	}
	if err := tx.WithContext(sctx).Exec("RELEASE SAVEPOINT " + name).Error; err != nil {
		return fmt.Errorf("release savepoint: %w", locking.Classify(err))
	}
	return nil
}

// InTx is repository.InTx; see its documentation.
func InTx(ctx context.Context) bool {
	_, ok := ctx.Value(txKey{}).(*TxState)
	return ok
}

// WithTx is repository.WithTx; see its documentation.
func WithTx(ctx context.Context, tx *gorm.DB) (context.Context, error) {
	if tx == nil || tx.Statement == nil {
		return ctx, locking.Invalid("WithTx: tx is nil")
	}
	if _, ok := tx.Statement.ConnPool.(gorm.TxCommitter); !ok {
		return ctx, locking.Invalid("WithTx: the *gorm.DB is not in a transaction (pass the tx of db.Transaction, or of db.Begin)")
	}
	s, err := Of(tx, "WithTx")
	if err != nil {
		return ctx, err
	}
	st := &TxState{sqlDB: s.SQLDB, tx: WithCallerLogger(tx.Session(&gorm.Session{NewDB: true}))}
	st.pool = st.tx.Statement.ConnPool
	st.txOnce.Do(func() {}) // tx is made
	return context.WithValue(ctx, txKey{}, st), nil
}

// Tx is repository.Tx; see its documentation.
func Tx(ctx context.Context, db *gorm.DB) *gorm.DB {
	if db == nil {
		return nil
	}
	if st, ok := ctx.Value(txKey{}).(*TxState); ok {
		if sqlDB, err := db.DB(); err == nil && st.sqlDB == sqlDB {
			return st.gormTx().WithContext(ctx)
		}
	}
	return db.WithContext(ctx)
}

// Isolation returns the isolation level the transaction ctx carries on
// sqlDB was begun with, and whether ctx carries one.
func Isolation(ctx context.Context, sqlDB *sql.DB) (sql.IsolationLevel, bool) {
	st, ok := ctx.Value(txKey{}).(*TxState)
	if !ok || st.sqlDB != sqlDB {
		return 0, false
	}
	return st.iso, true
}
