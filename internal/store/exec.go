// Package store is the layer below package repository: how a statement is
// sent (on a transaction of the context, or on its own where its outcome
// must be told), how it is shown to GORM's logger and callbacks, and how
// transactions begin, end and nest. Package repository builds its API on it;
// applications do not use it.
package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/dialect"
	"github.com/gormlock/gormlock/internal/sqlitegate"
	"github.com/gormlock/gormlock/locking"
)

// How a write's outcome is told.
//
// Inside a transaction nothing is applied before COMMIT, so a statement's
// error is definite: the transaction will not commit it (RunTx classifies
// the COMMIT). Outside a transaction a write statement commits by itself,
// and an error can leave its outcome unknown — the statement was sent, then
// the connection broke or the context ended before the answer. exec tells
// the two apart (locking.ClassifyWrite) and, where it can, keeps a deadline
// from producing an unknown outcome at all by bounding the wait on the
// database instead: on PostgreSQL the statement sets its own lock_timeout a
// little shorter than the time the context has left, so a write blocked on a
// row lock fails there, definitely not applied; on SQLite the wait for the
// write lock happens in Go (package sqlitegate) and the statement itself runs to
// its end.

// Stmt is one write statement of a repository.
type Stmt struct {
	Text string
	// Bounded is Text with one more parameter, last: the lock_timeout the
	// statement sets for itself (PostgreSQL); Text itself where the
	// dialect bounds a statement with a prefix (MariaDB's SET STATEMENT
	// max_statement_time, see dialect.Caps.StatementTimeout); "" where
	// the dialect bounds waits otherwise (SQLite) or cannot (MySQL).
	Bounded string
}

// Detach returns the context a write statement (Stmt), or a read by key,
// is sent with: on SQLite, ctx without its cancellation, once ctx is found
// alive (its error otherwise, nothing sent); ctx itself elsewhere, and when
// ctx cannot end.
//
// A write's outcome on SQLite is what its statement answers, and with a
// context that ends as it runs the answer is not the truth. The pure-Go
// driver (github.com/glebarez/go-sqlite v1.21.2, opendb/puresqlite's)
// answers nil for an Exec it never ran, with the previous statement's rows
// affected, and its interrupt can reach the connection's next statement
// instead; go-sqlite3 answers the context's error for a query's rows after
// a step that completed (an UPDATE ... RETURNING that was applied); and
// modernc.org/sqlite's own driver (v1.60.1, measured outside the suite)
// answered the context's error for 52 of 730 UPDATEs that had committed. A
// statement sent without a context that ends answers what it did.
//
// go-sqlite3 runs every statement, and every step of a query's rows, whose
// context can end in a goroutine of its own, so that it can interrupt it
// when the context ends (modernc's driver starts one per statement too),
// and database/sql starts one per query to close its rows: with a request's
// context, 3 to 5 goroutines started, and as many hand-overs, for one
// Mutate. On a hot row written by 32 workers in 4 processes that cost about
// a fifth of the throughput (15,900 against 19,500 operations per second
// with context.Background, CPU per operation 67 against 53 µs). A
// statement of one row by its key has nothing to interrupt: it runs for
// microseconds and never waits in SQLite for a lock (the gate waits for
// the write lock in Go, with the connection's busy timeout at 0, and ends
// that wait with ctx; a read in WAL mode does not wait). So ctx is looked
// at before the statement is sent, and once sent it runs to its end: what
// it did is what the caller is told, applied or not, as when ctx ends just
// after it. A write with SQL of the caller's (an expression, a hook's
// condition, conditions over many rows) runs to its end too: ctx bounds its
// wait for the write lock, not its run.
func (s Store) Detach(ctx context.Context) (context.Context, error) {
	return DetachOn(ctx, s.Caps.SingleWriter)
}

// DetachOn is Detach where no Store is at hand: sqlite says whether the
// statement goes to SQLite.
func DetachOn(ctx context.Context, sqlite bool) (context.Context, error) {
	if !sqlite || ctx.Done() == nil {
		return ctx, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return context.WithoutCancel(ctx), nil
}

// SendFunc sends one statement on pool and reads its result.
type SendFunc func(ctx context.Context, pool gorm.ConnPool, query string, args []any) error

// Store is a database as gormlock's calls use it: the repositories, and the
// package-level calls that take a *gorm.DB.
type Store struct {
	Gorm  *gorm.DB // a session without GORM's default write transaction
	SQLDB *sql.DB  // identity of the database, to match transactions in ctx
	Caps  dialect.Caps
	// Callbacks sends statements through GORM's callbacks (see "Logging
	// and tracing" in package repository's doc).
	Callbacks bool
	// Obs is told of gate waits and unknown outcomes; nil for none.
	Obs Observer
}

// Of returns the Store of db, or an error for a database gormlock does
// not support. For MySQL it asks the server, once per database, whether it
// is MySQL, MariaDB or a Galera cluster (see flavorOf).
func Of(db *gorm.DB, op string) (Store, error) {
	if db == nil || db.Config == nil || db.Dialector == nil || db.Statement == nil {
		return Store{}, locking.Invalid("%s: db is nil or not opened (use gorm.Open)", op)
	}
	name := db.Dialector.Name()
	caps, ok := dialect.Lookup(name)
	if !ok {
		return Store{}, fmt.Errorf("%w: %s: dialect %q (gormlock supports SQLite, PostgreSQL, MariaDB and MySQL)", locking.ErrNotSupported, op, name)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return Store{}, fmt.Errorf("%s: %w", op, err)
	}
	if name == dialect.MySQL {
		if caps, err = flavorOf(sqlDB); err != nil {
			return Store{}, fmt.Errorf("%s: %w", op, err)
		}
	}
	s := Store{
		Gorm:      WithCallerLogger(db.Session(&gorm.Session{SkipDefaultTransaction: true, NewDB: true})),
		SQLDB:     sqlDB,
		Caps:      caps,
		Callbacks: UsesCallbacks(db),
	}
	if src, ok := db.Config.Plugins[ObserverPluginName].(ObserverSource); ok {
		s.Obs = src.StoreObserver(SystemName(caps))
	}
	return s, nil
}

// flavors caches what each MySQL database said it is.
var flavors sync.Map // *sql.DB -> dialect.Caps

// flavorOf asks a MySQL server whether it is MySQL, MariaDB or a node of a
// Galera cluster: their locks and statements differ (see package dialect).
// The answer is kept for the *sql.DB.
func flavorOf(sqlDB *sql.DB) (dialect.Caps, error) {
	if c, ok := flavors.Load(sqlDB); ok {
		return c.(dialect.Caps), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var version, name, wsrep string
	if err := sqlDB.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return dialect.Caps{}, fmt.Errorf("asking the MySQL server its version: %w", locking.Classify(err))
	}
	err := sqlDB.QueryRowContext(ctx, "SHOW VARIABLES LIKE 'wsrep_on'").Scan(&name, &wsrep)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return dialect.Caps{}, fmt.Errorf("asking the MySQL server whether it is a Galera node: %w", locking.Classify(err))
	}
	c := dialect.Flavor(version, wsrep)
	flavors.Store(sqlDB, c)
	return c, nil
}

// conn returns the database or the transaction for ctx, and whether it is a
// transaction.
func (s Store) Conn(ctx context.Context) (*gorm.DB, bool) {
	if st, ok := ctx.Value(txKey{}).(*TxState); ok && st.sqlDB == s.SQLDB {
		return st.gormTx(), true
	}
	return s.Gorm, false
}

// Config returns the *gorm.Config whose settings gormlock's own
// statements follow in ctx (NowFunc), without making a *gorm.DB for a
// transaction. In one RunTx began it is the config of the *gorm.DB the
// transaction was begun on, as it is now: not Conn(ctx)'s copy, whose
// Logger gormlock wraps.
func (s Store) Config(ctx context.Context) *gorm.Config {
	if st, ok := ctx.Value(txKey{}).(*TxState); ok && st.sqlDB == s.SQLDB {
		if st.base != nil {
			return st.base.Config // a Session keeps its settings
		}
		return st.tx.Config
	}
	return s.Gorm.Config
}

// Pool returns the transaction ctx carries on the database and true, or
// nil and false: Conn's ConnPool in a transaction, without making a
// *gorm.DB for it.
func (s Store) Pool(ctx context.Context) (gorm.ConnPool, bool) {
	if st, ok := ctx.Value(txKey{}).(*TxState); ok && st.sqlDB == s.SQLDB {
		return st.pool, true
	}
	return nil, false
}

// exec runs the write statement st with args: in the transaction of ctx
// when there is one, otherwise as a statement that commits by itself. The
// error is classified; outside a transaction it matches
// locking.ErrCommitUnknown when the statement may have been applied although
// it failed.
func (s Store) Exec(ctx context.Context, st Stmt, args []any, send SendFunc) error {
	if pool, inTx := s.Pool(ctx); inTx {
		sctx, err := s.Detach(ctx)
		if err != nil {
			return err // nothing was sent
		}
		return locking.Classify(send(sctx, pool, st.Text, args))
	}
	return s.autocommit(ctx, st, args, send)
}

// ExecResult is exec for a statement whose result is its rows affected.
func (s Store) ExecResult(ctx context.Context, st Stmt, args []any) (n int64, err error) {
	err = s.Exec(ctx, st, args, func(ctx context.Context, pool gorm.ConnPool, query string, args []any) error {
		n, err = s.ExecSQL(ctx, pool, query, args)
		return err
	})
	return n, err
}

// ExecResultID is exec for a statement whose result is its rows affected
// and the LAST_INSERT_ID it set (see dialect.LastInsertID).
func (s Store) ExecResultID(ctx context.Context, st Stmt, args []any) (n, id int64, err error) {
	err = s.Exec(ctx, st, args, func(ctx context.Context, pool gorm.ConnPool, query string, args []any) error {
		n, id, err = s.ExecSQLID(ctx, pool, query, args, true)
		return err
	})
	return n, id, err
}

// autocommit runs st outside a transaction (see exec).
//
// It runs on a connection taken for it: database/sql sends a statement on
// the pool again, on another connection, when the driver answers
// driver.ErrBadConn, and pgx answers that after it sent a statement with
// the simple protocol and lost the answer — the write would run twice and
// be reported once. A pinned connection is never retried, and a failure to
// get one (the pool, the dial, the server's start-up) means nothing was
// sent: a definite error.
func (s Store) autocommit(ctx context.Context, st Stmt, args []any, send SendFunc) error {
	if err := ctx.Err(); err != nil {
		return err // nothing was sent
	}
	if s.Caps.SingleWriter {
		return s.autocommitSQLite(ctx, st, args, send, sqlitegate.Wait{})
	}
	query := st.Text
	budget, bounded := waitBudget(ctx)
	bounded = bounded && st.Bounded != ""
	if bounded {
		if prefix := s.Caps.StatementTimeout; prefix != "" {
			query = prefix + Seconds(budget) + " FOR " + st.Text
		} else {
			query = st.Bounded
			args = append(args[:len(args):len(args)], pgInterval(budget))
		}
	}
	var err error
	for attempt := 1; ; attempt++ {
		var sent bool
		sent, err = s.sendPinned(ctx, query, args, send)
		switch {
		case err == nil:
			return nil
		case !sent && (attempt == maxNotSentRetries || ctx.Err() != nil):
			return err // definite: never sent
		case !sent:
			// The connection was found broken before a byte of the
			// statement left (one the server closed while it was idle):
			// try another, as database/sql would.
			continue
		}
		break
	}
	if errors.Is(err, locking.ErrCommitUnknown) {
		return s.unknown(ctx, err)
	}
	return s.unknown(ctx, DeadlineBound(locking.ClassifyWrite(err), bounded))
}

// DeadlineBound returns err, the classified error of a statement; when the
// statement was bounded by its context's deadline (bounded) and the
// database gave up waiting for a lock or killed the statement at that
// bound, before the deadline, it is not applied: an error matching
// locking.ErrLockTimeout and context.DeadlineExceeded.
func DeadlineBound(err error, bounded bool) error {
	var de *locking.DatabaseError
	if bounded && errors.As(err, &de) && (de.Kind == locking.ErrLocked || de.Kind == locking.ErrLockTimeout) {
		return fmt.Errorf("%w: %w", context.DeadlineExceeded,
			&locking.DatabaseError{Kind: locking.ErrLockTimeout, Code: de.Code, Err: de.Err})
	}
	return err
}

// PrefixBound returns query bounded by ctx's deadline where the dialect
// bounds a statement with a prefix (MariaDB's SET STATEMENT
// max_statement_time ... FOR), for a statement in a transaction, and
// whether it did: the database then kills the statement a margin before
// the deadline, and its error is definite. Elsewhere it returns query as
// it is.
func (s Store) PrefixBound(ctx context.Context, query string) (string, bool) {
	prefix := s.Caps.StatementTimeout
	if prefix == "" {
		return query, false
	}
	budget, ok := waitBudget(ctx)
	if !ok {
		return query, false
	}
	return prefix + Seconds(budget) + " FOR " + query, true
}

// autocommitSQLite runs st on a connection of its own once it may take the
// write lock. SQLite runs statements in the process: whatever the error,
// the statement did not apply, so every error is definite.
//
// With an Observer, the wait it is told of runs from asking for the turn
// to the start of the statement that found the write lock free.
func (s Store) autocommitSQLite(ctx context.Context, st Stmt, args []any, send SendFunc, w sqlitegate.Wait) error {
	begin := s.obsNow()
	var c sqlitegate.Conn // on the stack: one write's turn
	err := sqlitegate.TakeInto(ctx, s.SQLDB, w, &c)
	if err != nil {
		s.gateWait(ctx, begin, err)
		return err
	}
	defer c.Release(ctx)
	var pool gorm.ConnPool = Pinned{c.SQL()}
	if wc := c.Writer(); wc != nil {
		pool = wc // the statement prepared on the gate's writer connection
	}
	var sent time.Time // when the last try of the statement began
	err = c.Lock(ctx, w, func() error {
		if s.Obs != nil {
			sent = time.Now()
		}
		sctx, err := s.Detach(ctx)
		if err != nil {
			return err // nothing was sent
		}
		return locking.Classify(send(sctx, pool, st.Text, args))
	})
	if s.Obs != nil {
		if sent.IsZero() || (err != nil && (locking.IsSQLiteBusy(err) || ctx.Err() != nil)) {
			s.gateWait(ctx, begin, err) // the lock never came free: all of it was a wait
		} else {
			s.Obs.GateWait(ctx, sent.Sub(begin), nil)
		}
	}
	return err
}

// maxNotSentRetries bounds the connections autocommit tries when each is
// found broken before the statement is sent, as database/sql's own retries
// are bounded.
const maxNotSentRetries = 3

// sendPinned sends query on a connection taken for it and reports whether
// it may have been sent: false when no connection could be had, or the
// driver says, on a connection where it can be trusted (see resends), that
// nothing was sent. The error is classified: definite when not sent;
// otherwise left for the caller, as the driver returned it, unless it must
// be unknown although the driver says "not sent".
func (s Store) sendPinned(ctx context.Context, query string, args []any, send SendFunc) (sent bool, err error) {
	conn, err := s.SQLDB.Conn(ctx)
	if err != nil {
		return false, fmt.Errorf("not sent: no connection: %w", locking.Classify(err))
	}
	cancelled := false
	defer func() {
		if cancelled {
			// A late cancel must not reach another caller's statement.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
		_ = conn.Close()
	}()
	trustNotSent := !resends(s.SQLDB, conn) // asked before sending, while conn is whole
	if canc := s.statementCanceller(ctx, conn); canc != nil || ctx.Err() != nil {
		if err := ctx.Err(); err != nil {
			return false, err // ended while the session was asked: not sent
		}
		// When ctx ends while the statement runs, it is cancelled on the
		// server and its answer awaited (see endOnServer): a definite
		// outcome, where a driver closing the connection would leave the
		// statement running on, and its outcome unknown.
		var forced error
		cancelled, forced, err = endOnServer(ctx, canc, false, func(ctx context.Context) error {
			return send(ctx, Pinned{conn}, query, args)
		})
		switch {
		case forced != nil && err != nil:
			err = locking.Unknown(err)
		case cancelled && err == nil:
			// The statement ended as the cancel came: it may have
			// committed, but an answer of success after a cancel does
			// not say it is safe — PostgreSQL (and MySQL's semi-sync)
			// answer it when the cancel ends the wait for a
			// synchronous replica, after the local commit.
			err = locking.Unknown(fmt.Errorf("%w: the write ended as it was cancelled on the server: it may have been applied", ctx.Err()))
		}
		cancelled = cancelled || forced != nil
	} else {
		err = send(ctx, Pinned{conn}, query, args)
	}
	switch {
	case err == nil:
		return true, nil
	case preparedStatementRefused(err):
		return false, locking.Classify(err)
	case !locking.NotSent(err):
		return true, err
	case !trustNotSent:
		// The driver says "not sent", but on this connection it says so
		// after sending too (see resends).
		return true, locking.Unknown(err)
	}
	return false, locking.Classify(err)
}

// statementCanceller returns the canceller of conn (see endOnServer) when
// a statement sent on it with ctx could outlive ctx on the server: on
// PostgreSQL and MySQL/MariaDB, with a context that can end. nil otherwise,
// and when ctx ended while the session was asked (nothing is sent then).
func (s Store) statementCanceller(ctx context.Context, conn *sql.Conn) canceller {
	if ctx.Done() == nil || s.Caps.SingleWriter {
		return nil
	}
	return newCanceller(ctx, s.SQLDB, conn, s.Caps.Dialector())
}

// preparedStatementRefused reports whether err is PostgreSQL refusing a
// statement pgx prepared and cached on the connection (its default mode on
// a direct connection), before running it: the prepared statement is gone
// (26000: DEALLOCATE or DISCARD ran on the session, or a pooler moved the
// client to another server connection), another with its name exists
// (42P05: a pooler's server connection shared by two clients), or the
// table changed under its cached plan (0A000, "cached plan must not change
// result type", after an ALTER TABLE). A statement outside a transaction
// that fails did nothing, and pgx dropped it from its cache: it is sent
// again, as a statement never sent is.
func preparedStatementRefused(err error) bool {
	return PreparedStatementGone(err) || locking.Code(err) == "0A000"
}

// PreparedStatementGone reports whether err is PostgreSQL refusing, before
// running it, a statement pgx had prepared on the connection, because the
// server connection is not the one it was prepared on (26000) or is shared
// with another client that prepared the same name (42P05): what a pooler in
// transaction mode does to pgx's cache_statement mode. pgx drops the
// statement from its cache, so the statement prepares again when sent
// again. In a transaction the refusal aborted the transaction, which then
// applied nothing: a caller that owns the transaction may run it again
// from the start. An outcome already unknown is never this.
func PreparedStatementGone(err error) bool {
	if errors.Is(err, locking.ErrCommitUnknown) {
		return false
	}
	switch locking.Code(err) {
	case "26000", "42P05":
		return true
	}
	return false
}

// waitBudget returns how long a statement sent now may wait on the database
// so that it gives up before ctx's deadline and says so: the time left
// minus a margin for the answer to come back, at least 1 ms. ok is false
// without a deadline.
//
// The margin is a quarter of the time left, at least minWaitMargin and at
// most a second: on a loaded machine the database's answer to a lock
// timeout, and the client's reading it, can take tens of milliseconds; a
// margin of a fifth with a 5 ms floor left 50 and 100 ms deadlines ending
// as unknown outcomes.
func waitBudget(ctx context.Context) (time.Duration, bool) {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0, false
	}
	left := time.Until(dl)
	margin := min(max(left/4, minWaitMargin), time.Second)
	return max(left-margin, time.Millisecond), true
}

// minWaitMargin is the least time waitBudget leaves between the database's
// own bound and the context's deadline.
const minWaitMargin = 25 * time.Millisecond

// pgInterval writes d as a PostgreSQL interval in whole milliseconds
// ("250ms"), at least 1.
func pgInterval(d time.Duration) string {
	return strconv.FormatInt(max(int64(d/time.Millisecond), 1), 10) + "ms"
}

// Seconds writes d as seconds with millisecond precision ("0.250"), at
// least 0.001, for MariaDB's max_statement_time.
func Seconds(d time.Duration) string {
	ms := max(int64(d/time.Millisecond), 1)
	return strconv.FormatInt(ms/1000, 10) + "." + fmt.Sprintf("%03d", ms%1000)
}

// QueryRowScan is a SendFunc that reads one row into dest; no row gives
// sql.ErrNoRows.
func (s Store) QueryRowScan(dest ...any) SendFunc {
	return func(ctx context.Context, pool gorm.ConnPool, query string, args []any) error {
		return s.ScanSQL(ctx, pool, query, args, dest...)
	}
}

// Pinned is a connection a statement must run on: SQLite's, on which
// gormlock waits for the write lock in Go. It implements gorm.TxCommitter
// so that plugins that route statements to other databases
// (gorm.io/plugin/dbresolver) leave it alone, as they leave transactions;
// nothing ever commits it.
type Pinned struct{ *sql.Conn }

var errPinned = errors.New("gormlock: a Pinned connection is not a transaction")

// Commit implements gorm.TxCommitter; it is never called.
func (Pinned) Commit() error { return errPinned }

// Rollback implements gorm.TxCommitter; it is never called.
func (Pinned) Rollback() error { return errPinned }

// IsNoRows reports a query that found no row.
func IsNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }
