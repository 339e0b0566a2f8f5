package sqlitegate

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// The writer connection.
//
// The writers of one process take turns at the gate, so one connection
// serves them all as well as one each: the gate keeps the connection a
// write outside a transaction ran on (a Writer) for the next such write,
// instead of giving it back to the pool and taking one again, with its busy
// timeout at 0 while it is kept (set once, not on every write), and with
// the statements the writes ran prepared on it: the next write of the same
// statement binds and steps it, without SQLite preparing it again.
//
// The connection is the application's pool's, so the gate keeps it only
// while that costs the application nothing: it gives it back (busy timeout
// restored, statements closed) when no write came for writerLinger, at
// once when the pool is limited to fewer than minHeldPool connections, is
// full, or someone waited for one of its connections since the gate took
// it, and when a transaction begins (Begin takes it over). A DB.Close does
// not wait for it: it closes when the linger ends, or at the next write,
// which then fails as it would without gormlock (see dbClosed).

// writerLinger is how long the gate keeps its writer connection without a
// write: the callers of a busy database write again well within it; an
// idle application gets its connection back soon after.
const writerLinger = time.Millisecond

// lingerNS is the linger in force, in nanoseconds; 0 for writerLinger.
var lingerNS atomic.Int64

// lingerFor returns how long the gate keeps an unused writer connection.
func lingerFor() time.Duration {
	if d := lingerNS.Load(); d > 0 {
		return time.Duration(d)
	}
	return writerLinger
}

// SetWriterLinger makes the gates keep their writer connections for d
// without a write, until the function it returns restores writerLinger
// and gives back every writer connection kept then. It is for tests that
// count a call's allocations: a connection given back and taken again
// between two calls allocates, and a loaded machine can space two calls
// by more than writerLinger.
func SetWriterLinger(d time.Duration) (restore func()) {
	lingerNS.Store(int64(d))
	return func() {
		lingerNS.Store(0)
		sqliteGates.Range(func(_, v any) bool {
			v.(*sqliteGate).giveBackHeld()
			return true
		})
	}
}

// giveBackHeld gives the writer connection the gate keeps back to its
// pool, unless a writer has it.
func (g *sqliteGate) giveBackHeld() {
	g.hmu.Lock()
	w := g.held
	if w == nil || w.inUse {
		g.hmu.Unlock()
		return
	}
	g.held = nil
	g.hmu.Unlock()
	w.close(false)
}

// minHeldPool is the least connection limit (SetMaxOpenConns) of a pool
// the gate keeps a connection of between writes; 0 (no limit) counts as
// enough. With fewer, a connection kept idle is one the application can
// miss: MaxOpenConns(1), common with SQLite, would make every other use of
// the pool wait for the linger.
const minHeldPool = 4

// maxWriterStmts bounds the statements prepared on a writer connection:
// beyond it they are all closed and prepared again as they come.
const maxWriterStmts = 64

// openStmts counts the statements prepared on writer connections and not
// closed yet, for tests (OpenWriterStatements).
var openStmts atomic.Int64

// OpenWriterStatements returns how many statements are prepared on the
// gates' writer connections now, in this process. Tests use it to see that
// a connection given back to its pool leaves none behind.
func OpenWriterStatements() int64 { return openStmts.Load() }

// Writer is the connection the gate keeps for the writes of its process
// outside transactions (see "The writer connection"). It is the
// gorm.ConnPool such a write's statement runs on: ExecContext, QueryContext
// and QueryRowContext run the statement prepared on the connection. Like
// a transaction, it implements gorm.TxCommitter, so that plugins routing
// statements to other databases (gorm.io/plugin/dbresolver) leave it
// alone; nothing ever commits it.
type Writer struct {
	conn *sql.Conn
	// busy is the connection's busy_timeout (ms) to restore when it goes
	// back to the pool; it is 0 while the gate keeps it.
	busy int64
	// ckpt is the connection's wal_autocheckpoint to restore when it goes
	// back to the pool, -1 when the gate left it alone; it is 0 while the
	// gate keeps it (see "Checkpoints off the writer's turn").
	ckpt int64
	// stmts are the statements prepared on it, by text and by whether
	// they were run for Exec or for a query: a text prepared for a query
	// is never run by Exec (see stmt).
	stmts map[stmtKey]*sql.Stmt
	// broken says a statement found the connection closed: it goes back
	// to the pool as bad.
	broken bool
	// waits is the pool's WaitCount when the gate last looked.
	waits int64
	// inUse says a writer has it; used that one had it since the linger
	// timer last looked. Both under the gate's hmu.
	inUse, used bool
}

// stmtKey is a prepared statement's text and whether it runs for Exec.
type stmtKey struct {
	query string
	exec  bool
}

var errWriterNotTx = errors.New("gormlock: the SQLite writer connection is not a transaction")

// Commit implements gorm.TxCommitter; it is never called.
func (*Writer) Commit() error { return errWriterNotTx }

// Rollback implements gorm.TxCommitter; it is never called.
func (*Writer) Rollback() error { return errWriterNotTx }

// ExecContext implements gorm.ConnPool.
func (w *Writer) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st, err := w.stmt(ctx, query, true)
	if err != nil {
		return nil, err
	}
	var res sql.Result
	if st == nil {
		res, err = w.conn.ExecContext(ctx, query, args...)
	} else {
		res, err = st.ExecContext(ctx, args...)
	}
	w.check(err)
	return res, err
}

// check marks the connection broken when err says it is closed (the
// driver found it bad, and database/sql closed it): the gate must not keep
// it for the next write.
func (w *Writer) check(err error) {
	if err != nil && (errors.Is(err, sql.ErrConnDone) || errors.Is(err, driver.ErrBadConn)) {
		w.broken = true
	}
}

// QueryContext implements gorm.ConnPool.
func (w *Writer) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := w.stmt(ctx, query, false)
	if err != nil {
		return nil, err
	}
	var rows *sql.Rows
	if st == nil {
		rows, err = w.conn.QueryContext(ctx, query, args...)
	} else {
		rows, err = st.QueryContext(ctx, args...)
	}
	w.check(err)
	return rows, err
}

// QueryRowContext implements gorm.ConnPool.
func (w *Writer) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	st, err := w.stmt(ctx, query, false)
	if err != nil || st == nil {
		// A statement that failed to prepare fails here again, with
		// its error in the Row.
		return w.conn.QueryRowContext(ctx, query, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

// PrepareContext implements gorm.ConnPool: a statement of the caller's,
// which closes it, prepared on the connection.
func (w *Writer) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return w.conn.PrepareContext(ctx, query)
}

// stmt returns query prepared on the connection, preparing it the first
// time, or nil for a statement not to keep prepared: several statements in
// one text, or (exec) one that returns rows that Exec would leave unread,
// its statement — and its write transaction — open until the next run.
func (w *Writer) stmt(ctx context.Context, query string, exec bool) (*sql.Stmt, error) {
	k := stmtKey{query, exec}
	if st, ok := w.stmts[k]; ok {
		return st, nil
	}
	if strings.IndexByte(query, ';') >= 0 || (exec && containsFold(query, "RETURNING")) || savepoint(query) {
		return nil, nil
	}
	if len(w.stmts) >= maxWriterStmts {
		w.closeStmts()
	}
	st, err := w.conn.PrepareContext(ctx, query)
	if err != nil {
		w.check(err)
		return nil, err
	}
	if w.stmts == nil {
		w.stmts = make(map[stmtKey]*sql.Stmt)
	}
	w.stmts[k] = st
	openStmts.Add(1)
	return st, nil
}

// savepoint reports whether query is a savepoint's statement (SAVEPOINT,
// RELEASE, ROLLBACK TO): each names its savepoint, a name seldom used
// twice, so preparing them would only fill the cache.
func savepoint(query string) bool {
	for _, p := range []string{"SAVEPOINT", "RELEASE", "ROLLBACK TO"} {
		if len(query) >= len(p) && strings.EqualFold(query[:len(p)], p) {
			return true
		}
	}
	return false
}

// containsFold reports whether s contains the upper-case ASCII word up,
// in any case.
func containsFold(s, up string) bool {
	for i := 0; i+len(up) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(up)], up) {
			return true
		}
	}
	return false
}

// closeStmts closes the statements prepared on the connection.
func (w *Writer) closeStmts() {
	for q, st := range w.stmts {
		_ = st.Close()
		delete(w.stmts, q)
		openStmts.Add(-1)
	}
}

// close gives the connection back to the pool: statements closed, busy
// timeout restored. A connection whose timeout cannot be restored, or
// that is bad, is dropped from the pool.
func (w *Writer) close(bad bool) {
	w.closeStmts()
	if !bad {
		_, err := w.conn.ExecContext(context.Background(), "PRAGMA busy_timeout = "+strconv.FormatInt(w.busy, 10))
		if err == nil && w.ckpt >= 0 {
			err = restoreAutocheckpoint(w.conn, w.ckpt)
		}
		bad = err != nil
	}
	if bad {
		_ = w.conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	_ = w.conn.Close()
}

// doneCtx is a context that has ended, for dbClosed.
var doneCtx = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// dbClosed reports whether sqlDB was closed: DB.Conn answers "database is
// closed" before it looks at its context, and with a context that has
// ended it takes no connection. DB.Close does not close a connection
// taken from the pool until it goes back, so the gate looks before it
// lends its writer connection and before it keeps it: a write after
// DB.Close fails as it does without gormlock, and the connection (with
// the database file) closes with the write before it.
func dbClosed(sqlDB *sql.DB) bool {
	_, err := sqlDB.Conn(doneCtx)
	return err != nil && !errors.Is(err, context.Canceled)
}

// poolLets reports whether a pool with stats st lets the gate keep one of
// its connections idle between writes: no limit, or a limit of
// minHeldPool or more with a connection to spare, and nobody waited for a
// connection since the gate last looked (waited).
func poolLets(st sql.DBStats, waited bool) bool {
	if st.MaxOpenConnections == 0 {
		return true
	}
	return !waited && st.MaxOpenConnections >= minHeldPool && st.InUse < st.MaxOpenConnections
}

// takeWriter takes the gate's writer connection for the writer with the
// turn, or returns nil when the gate keeps none. With own, the caller
// takes it over (a transaction): the gate keeps it no more, and its
// statements are closed.
func (g *sqliteGate) takeWriter(own bool) *Writer {
	g.hmu.Lock()
	w := g.held
	if w != nil {
		if own {
			g.held = nil
		} else {
			w.inUse, w.used = true, true
		}
	}
	g.hmu.Unlock()
	if w != nil && own {
		w.closeStmts()
	}
	return w
}

// putWriter is the end of a write on w: the gate keeps w for the next one
// if the pool allows (poolLets), and lets it go otherwise, or when bad.
func (g *sqliteGate) putWriter(sqlDB *sql.DB, w *Writer, bad bool) {
	bad = bad || w.broken
	closed := !bad && dbClosed(sqlDB)
	if w.ckpt >= 0 && !bad && !closed && g.catchUpDue() {
		g.caughtUp(w.catchUp()) // with the turn still held: see checkpoint.go
		bad = w.broken
	}
	g.hmu.Lock()
	if w.ckpt >= 0 && !closed {
		g.committed(sqlDB)
	}
	st := sqlDB.Stats()
	waited := st.WaitCount != w.waits
	w.waits = st.WaitCount
	if !bad && !closed && poolLets(st, waited) {
		w.inUse = false
		if g.held != w {
			g.held = w
			if g.linger == nil {
				g.linger = time.AfterFunc(lingerFor(), g.lingerOver)
			} else {
				g.linger.Reset(lingerFor())
			}
		}
		g.hmu.Unlock()
		return
	}
	if g.held == w {
		g.held = nil
	}
	g.hmu.Unlock()
	w.close(bad)
}

// lingerOver runs every writerLinger while the gate keeps a writer
// connection: it gives the connection back if no write used it since.
func (g *sqliteGate) lingerOver() {
	g.hmu.Lock()
	w := g.held
	if w == nil {
		g.hmu.Unlock()
		return
	}
	if w.inUse || w.used {
		w.used = false
		g.linger.Reset(lingerFor())
		g.hmu.Unlock()
		return
	}
	g.held = nil
	g.hmu.Unlock()
	w.close(false)
}
