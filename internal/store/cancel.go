package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gormlock/gormlock/internal/dialect"
	"github.com/gormlock/gormlock/locking"
)

// A transaction RunTx began ends on the server before RunInTx returns,
// also when the caller's context ends while one of fn's statements runs
// (a sleep, a long query, a wait for another session's row lock).
//
// A driver left to itself gives up such a statement by closing its
// connection (go-sql-driver/mysql; pgx sets a deadline on it): the call
// returns at once, but the server goes on running the statement, holding
// the transaction's row locks, until the statement ends — MariaDB every
// time, a lock wait up to innodb_lock_wait_timeout. So the statements of a
// transaction RunTx began run under a context that does not end with the
// caller's; when the caller's ends, the statement is cancelled on the
// server (MySQL/MariaDB: KILL QUERY over another connection of the pool;
// PostgreSQL: the protocol's cancel request, which PgBouncer forwards to
// the server connection the client is linked to), and the call waits for
// its answer, at most cancelWait. The transaction's connection is then
// whole, and the ROLLBACK that follows is sent and answered on it.
//
// When the server cannot be asked (no connection for the KILL, a cancel
// request that fails) or does not answer within cancelWait, the
// statement's connection is closed as the driver would have, and on MySQL
// and MariaDB the session is killed and waited for until it is gone from
// the process list (at most goneWait); if that cannot be confirmed, the
// error says so. (KILL names the session by its id on the server the
// connection reached, which a restart of that server within those seconds
// could give to another session; ids count up from the start, so that
// would take as many connections in that time as the old server had
// seen.)

// The bounds of the waits after the caller's context ended. A healthy
// server answers a cancel in milliseconds; the bounds are for one that
// cannot be reached or answers nothing (a network partition, a stalled
// proxy), after which the call returns within about 2 s of its context's
// end (4 s when a MySQL session must then be killed and awaited).
const (
	// cancelWait bounds the wait for the answer of a statement cancelled
	// on the server.
	cancelWait = time.Second
	// killTimeout bounds getting a connection for KILL and sending it,
	// and sending PostgreSQL's cancel request.
	killTimeout = time.Second
	// goneWait bounds killing a session and waiting until it is gone.
	goneWait = 2 * time.Second
)

// errSocketAborted marks endOnServer's forced error when it ended the
// wait on the connection's socket itself (see aborter): the connection is
// unusable from then on, also when its statement answered.
var errSocketAborted = errors.New("the connection's socket was aborted")

// canceller cancels the statement running on one connection, on the server.
type canceller interface {
	// cancel asks the server to end the statement running on the
	// connection (the transaction stays open).
	cancel(ctx context.Context) error
	// gone ends the connection's session on the server, if the server can
	// be told, and reports once it is gone (nil), or why that could not
	// be confirmed.
	gone(ctx context.Context) error
}

// newCanceller returns the canceller of conn, a connection of db on a
// database of dialector d (dialect.Postgres, dialect.MySQL), or nil when it
// has none: a driver other than pgx and go-sql-driver/mysql (lib/pq
// cancels on the server itself), or a failure to ask the session's id. It
// runs before the transaction begins: ctx bounds it.
func newCanceller(ctx context.Context, db *sql.DB, conn *sql.Conn, d string) canceller {
	var dc any
	_ = conn.Raw(func(c any) error { dc = c; return nil })
	switch d {
	case dialect.Postgres:
		if t := reflect.TypeOf(dc); t == nil || t.Kind() != reflect.Pointer {
			return nil // pgx's driver.Conn is a pointer; a key must be comparable
		}
		if c, ok := pgCancellers.load(dc); ok {
			return c.(pgCanceller)
		}
		if pg := pgCancelRequester(dc); pg != nil {
			pgCancellers.store(dc, pgCanceller{pg})
			return pgCanceller{pg}
		}
	case dialect.MySQL:
		if t := reflect.TypeOf(dc); t == nil || t.Kind() != reflect.Pointer || t.Elem().PkgPath() != "github.com/go-sql-driver/mysql" {
			return nil
		}
		if s, ok := mysqlSessions.load(dc); ok {
			return mysqlCanceller{db: db, session: s.(mysqlSession)}
		}
		var s mysqlSession
		if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID(), @@hostname, @@port").Scan(&s.id, &s.host, &s.port); err != nil {
			return nil
		}
		mysqlSessions.store(dc, s)
		return mysqlCanceller{db: db, session: s}
	}
	return nil
}

// pgCancelRequester returns the *pgconn.PgConn under dc, a connection of
// pgx's database/sql driver (stdlib.Conn: Conn() *pgx.Conn, whose
// PgConn() has CancelRequest), or nil. The methods are looked up by name
// so that gormlock imports no driver.
func pgCancelRequester(dc any) interface {
	CancelRequest(context.Context) error
} {
	call := func(v reflect.Value, name string) (reflect.Value, bool) {
		m := v.MethodByName(name)
		if !m.IsValid() || m.Type().NumIn() != 0 || m.Type().NumOut() != 1 {
			return reflect.Value{}, false
		}
		out := m.Call(nil)[0]
		if out.Kind() != reflect.Pointer || out.IsNil() {
			return reflect.Value{}, false
		}
		return out, true
	}
	v := reflect.ValueOf(dc)
	if !v.IsValid() {
		return nil
	}
	pgx, ok := call(v, "Conn")
	if !ok {
		return nil
	}
	pg, ok := call(pgx, "PgConn")
	if !ok {
		return nil
	}
	c, _ := pg.Interface().(interface {
		CancelRequest(context.Context) error
	})
	return c
}

// pgCanceller sends PostgreSQL's cancel request for one connection: over
// a new connection to the same server (or pooler), with the key the
// server (or pooler) gave it.
type pgCanceller struct {
	pg interface{ CancelRequest(context.Context) error }
}

func (c pgCanceller) cancel(ctx context.Context) error { return c.pg.CancelRequest(ctx) }

// abort gives the connection's socket (pgconn.PgConn.Conn) a deadline in
// the past, as pgx itself does when a statement's context ends: the
// statement's wait on it ends at once, and pgx closes the connection;
// false when the socket cannot be reached.
// A socket that refuses deadlines (a custom dialer's) is closed instead.
func (c pgCanceller) abort() bool {
	pc, ok := c.pg.(interface{ Conn() net.Conn })
	if !ok {
		return false
	}
	conn := pc.Conn()
	if conn == nil {
		return false
	}
	if err := conn.SetDeadline(time.Now()); err != nil {
		_ = conn.Close()
	}
	return true
}

// canAbort reports whether abort can close the socket.
func (c pgCanceller) canAbort() bool {
	pc, ok := c.pg.(interface{ Conn() net.Conn })
	return ok && pc.Conn() != nil
}

// aborter is a canceller that can also end the wait on its connection's
// socket itself (pgCanceller): the statement then runs under a context
// that cannot end, so the drivers watch nothing (pgx's context watcher;
// outside a transaction database/sql's goroutine per query — in a
// *sql.Tx database/sql still watches the transaction's own context), and
// endOnServer aborts where it would otherwise end the statement's context.
type aborter interface {
	canAbort() bool
	abort() bool
}

// gone cannot be told on PostgreSQL: behind PgBouncer the backend's pid is
// not known to the client.
func (pgCanceller) gone(context.Context) error {
	return errors.New("PostgreSQL's session cannot be asked about from another connection")
}

// mysqlSession identifies a MySQL or MariaDB session: its CONNECTION_ID(),
// and the server that runs it (another server behind a proxy has
// sessions of the same ids).
type mysqlSession struct {
	id   uint64
	host string
	port int
}

// mysqlSessions caches the session of each go-sql-driver/mysql connection
// (its driver.Conn), asked once per connection; pgCancellers the canceller
// of each pgx connection, found by reflection once per connection instead
// of for every statement whose context can end.
var mysqlSessions, pgCancellers connCache

// maxCachedConns bounds a connCache.
const maxCachedConns = 1024

// connCache holds a value per driver connection (a pointer). Entries of
// connections the pool closed are never removed one by one: past
// maxCachedConns the cache starts again, and the values are found again,
// once per connection.
type connCache struct {
	m sync.Map
	n atomic.Int64
}

func (c *connCache) load(dc any) (any, bool) { return c.m.Load(dc) }

func (c *connCache) store(dc, v any) {
	if c.n.Add(1) > maxCachedConns {
		c.m.Clear()
		c.n.Store(1)
	}
	c.m.Store(dc, v)
}

// mysqlCanceller kills a statement or a session of db's server with KILL,
// sent over another connection of db's pool.
type mysqlCanceller struct {
	db      *sql.DB
	session mysqlSession
}

// mysqlUnknownThread is ER_NO_SUCH_THREAD: the session is gone already.
const mysqlUnknownThread = "1094"

func (c mysqlCanceller) kill(ctx context.Context, what string) error {
	conn, err := c.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var s mysqlSession
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID(), @@hostname, @@port").Scan(&s.id, &s.host, &s.port); err != nil {
		return err
	}
	if s.host != c.session.host || s.port != c.session.port {
		return fmt.Errorf("the pool's connection reached server %s:%d, the session runs on %s:%d", s.host, s.port, c.session.host, c.session.port)
	}
	if _, err := conn.ExecContext(ctx, what+strconv.FormatUint(c.session.id, 10)); err != nil && locking.Code(err) != mysqlUnknownThread {
		return err
	}
	return nil
}

func (c mysqlCanceller) cancel(ctx context.Context) error { return c.kill(ctx, "KILL QUERY ") }

// gone kills the session (it rolls its transaction back) and waits until
// it has left the process list, which the server does after the rollback.
func (c mysqlCanceller) gone(ctx context.Context) error {
	if err := c.kill(ctx, "KILL CONNECTION "); err != nil {
		return fmt.Errorf("killing the session %d: %w", c.session.id, err)
	}
	for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		var n int
		err := c.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?", c.session.id).Scan(&n)
		switch {
		case err != nil:
			return fmt.Errorf("asking whether the session %d is gone: %w", c.session.id, err)
		case n == 0:
			return nil
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("the session %d was killed but is still in the process list: %w", c.session.id, ctx.Err())
		case <-t.C:
		}
	}
}

// guard runs a statement of the transaction (run, with the context it is
// to use) so that it ends with ctx on the server (see above and
// endOnServer).
func (t *ownTx) guard(ctx context.Context, keep bool, run func(context.Context) error) error {
	if t.canc == nil || ctx.Done() == nil {
		return run(ctx)
	}
	sent, forced, err := endOnServer(ctx, t.canc, keep, run)
	if sent || forced != nil {
		t.mu.Lock()
		t.cancelSent = t.cancelSent || sent
		if forced != nil && !errors.Is(t.forced, errSocketAborted) {
			t.forced = forced // an aborted socket stays the reason: no COMMIT on it
		}
		t.mu.Unlock()
	}
	return err
}

// endOnServer runs a statement on one connection (run, with the context
// it is to use) under a context that does not end with ctx; when ctx ends
// first, it cancels the statement on the server with canc and waits for
// its answer, at most cancelWait. It reports whether a cancel was sent
// (the connection should then not go back to the pool, where a late
// cancel could reach another statement; a cancel request that failed
// counts, since it may have reached the server), and forced: why the
// connection had to be closed instead (the server could not be asked, or
// did not answer), nil when it was not — also when, with an aborter, the
// statement answered before its socket was aborted: that answer is then
// its outcome, as when the cancel came too late. The statement's error,
// when ctx ended, matches ctx's error and keeps the server's.
//
// A query's rows are read after it returns, under the context the query
// ran with: keep leaves that context alive (it ends with nothing to free
// once the rows are closed).
func endOnServer(ctx context.Context, canc canceller, keep bool, run func(context.Context) error) (sent bool, forced, err error) {
	if err := ctx.Err(); err != nil {
		return false, nil, err // not sent
	}
	var stmtCtx context.Context
	var stop func()
	ended := func() {}
	if a, ok := canc.(aborter); ok && a.canAbort() {
		// Nothing for the drivers to watch: the socket's wait is
		// ended instead of the context (see aborter) — only while the
		// statement runs: a socket aborted after its statement ended
		// would fail the next statement on it (a COMMIT, unsent, would
		// look unknown).
		var mu sync.Mutex
		finished := false
		stmtCtx = context.WithoutCancel(ctx)
		stop = func() {
			mu.Lock()
			defer mu.Unlock()
			if !finished {
				a.abort()
				forced = fmt.Errorf("%w: %w", errSocketAborted, forced)
				return
			}
			// The statement answered before: nothing was closed, and its
			// answer is its outcome.
			forced = nil
		}
		ended = func() {
			mu.Lock()
			finished = true
			mu.Unlock()
		}
	} else {
		stmtCtx, stop = context.WithCancel(context.WithoutCancel(ctx))
		if !keep {
			defer stop()
		}
	}
	done := make(chan struct{})
	watched := make(chan struct{})
	var refused error // the cancel request's failure
	stopWatching := context.AfterFunc(ctx, func() {
		defer close(watched)
		kctx, kcancel := context.WithTimeout(context.Background(), killTimeout)
		err := canc.cancel(kctx)
		kcancel()
		if err != nil {
			refused = err
			forced = fmt.Errorf("cancelling the statement on the server: %w", err)
			stop()
			return
		}
		// A cancel that reaches the server before the statement has begun
		// there is dropped (PostgreSQL cancels only a running statement;
		// MySQL clears KILL QUERY when the next command starts): sent
		// again, at growing intervals, until the statement answers.
		timer := time.NewTimer(cancelWait)
		defer timer.Stop()
		pause := 20 * time.Millisecond
		again := time.NewTimer(pause)
		defer again.Stop()
		for {
			select {
			case <-done:
				return
			case <-timer.C:
				forced = fmt.Errorf("the statement, cancelled on the server, did not end within %v", cancelWait)
				stop()
				return
			case <-again.C:
				kctx, kcancel := context.WithTimeout(context.Background(), killTimeout)
				_ = canc.cancel(kctx)
				kcancel()
				pause = min(2*pause, 500*time.Millisecond)
				again.Reset(pause)
			}
		}
	})
	err = run(stmtCtx)
	ended()
	close(done)
	if stopWatching() {
		return false, nil, err
	}
	<-watched
	switch {
	case err == nil:
	case forced != nil:
		err = fmt.Errorf("%w: the statement's connection was closed (%v): %w", ctx.Err(), forced, err)
	case refused != nil:
		// The cancel request failed, but the statement answered by
		// itself before its socket was aborted: its answer stands.
		err = fmt.Errorf("%w: the statement answered (cancelling it on the server failed: %v): %w", ctx.Err(), refused, err)
	case errors.Is(ctx.Err(), context.DeadlineExceeded) && cancelledOnServer(err):
		// Killed at the deadline, before it committed: as a statement
		// the server's own time limit ends (max_statement_time,
		// lock_timeout), not applied.
		err = fmt.Errorf("%w: the statement was cancelled on the server at the deadline: %w", ctx.Err(),
			&locking.DatabaseError{Kind: locking.ErrLockTimeout, Code: locking.Code(err), Err: err})
	default:
		err = fmt.Errorf("%w: the statement was cancelled on the server: %w", ctx.Err(), err)
	}
	return true, forced, err
}

// ExecContext runs a statement of the transaction (see guard).
func (t *ownTx) ExecContext(ctx context.Context, query string, args ...any) (res sql.Result, err error) {
	err = t.guard(ctx, false, func(ctx context.Context) error {
		res, err = t.Tx.ExecContext(ctx, query, args...)
		return err
	})
	return res, err
}

// QueryContext runs a query of the transaction (see guard); the guard
// ends when its first rows are answered.
func (t *ownTx) QueryContext(ctx context.Context, query string, args ...any) (rows *sql.Rows, err error) {
	err = t.guard(ctx, true, func(ctx context.Context) error {
		rows, err = t.Tx.QueryContext(ctx, query, args...)
		return err
	})
	return rows, err
}

// QueryRowContext runs a query of the transaction (see guard). A *sql.Row
// carries its error itself: when ctx ended and the query failed, the row
// returned is one that database/sql makes without sending anything, whose
// error is ctx's (the server's "cancelled" is what ctx's end caused).
func (t *ownTx) QueryRowContext(ctx context.Context, query string, args ...any) (row *sql.Row) {
	err := t.guard(ctx, true, func(ctx context.Context) error {
		row = t.Tx.QueryRowContext(ctx, query, args...)
		return row.Err()
	})
	if row == nil || (err != nil && ctx.Err() != nil) {
		return t.Tx.QueryRowContext(ctx, query, args...) // ctx has ended: not sent
	}
	return row
}

// ensureEnded confirms, after the transaction's connection was closed
// while a statement ran (forced says why), that its session is gone on the
// server; it returns why that could not be confirmed, or nil.
func (t *ownTx) ensureEnded(forced error) error {
	ctx, cancel := context.WithTimeout(context.Background(), goneWait)
	defer cancel()
	if err := t.canc.gone(ctx); err != nil {
		return fmt.Errorf("%w; %w", forced, err)
	}
	return nil
}

// cancelledOnServer reports whether err is the server's answer to a
// cancelled statement: PostgreSQL's query_canceled (57014), MySQL's and
// MariaDB's ER_QUERY_INTERRUPTED (1317).
func cancelledOnServer(err error) bool {
	switch locking.Code(err) {
	case "57014", "1317":
		return true
	}
	return false
}
