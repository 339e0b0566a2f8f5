// Package sqlitegate waits for SQLite's write lock in Go: a first-come,
// first-served gate per database for the writers of one process, and turns
// on a lock file between processes. Every gormlock write on SQLite takes a
// connection through it (TakeInto) or begins its transaction with it (Begin).
package sqlitegate

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/gormlock/gormlock/locking"
)

// SQLite's write lock, waited for in Go.
//
// SQLite lets one connection write at a time, and the driver waits for the
// lock in SQLite's busy handler: a C loop that sleeps and polls, cannot be
// interrupted by a context, and serves waiters in no particular order (a
// waiter can lose the lock again and again). gormlock therefore waits in Go:
//
//   - writers in this process queue at a gate per database, first come first
//     served, and leave the queue when their context ends;
//   - the writer at the head takes the lock with the connection's busy
//     timeout set to 0, and when another process (or a connection gormlock
//     does not manage) holds it, tries again after short sleeps, until the
//     context ends (or what NoWait or LockTimeout ask for). The busy timeout
//     the connection was opened with does not bound it: on a busy machine
//     another process can hold the lock for longer than that, and a caller
//     who gave its call more time should not get "database is locked".
//
// Every gormlock write on SQLite goes through it: a statement outside a
// transaction for the statement's length, a transaction (RunInTx,
// MutateRowLocked, ...) from BEGIN IMMEDIATE to COMMIT.

// sqliteGate is one database's queue of writers in this process.
type sqliteGate struct {
	// turn holds one token while a writer of this process has the turn;
	// blocked senders queue first come first served.
	turn chan struct{}
	// busyMS is the busy_timeout the database's connections were opened
	// with, in milliseconds; -1 until read.
	busyMS atomic.Int64
	// cross is the lock the heads of the processes' gates take turns on
	// (crossLock), or nil; crossOpened says whether it was looked for.
	// Only the gate's head uses them.
	cross       *crossLock
	crossOpened bool

	// mu guards the hand-over of the cross-process lock between this
	// process's writers: waiting counts the writers blocked in enter, kept
	// says that the writer who left kept the lock for the next one,
	// and crossSince is when this process took it from the other
	// processes. keptUntil is when a lock kept for a writer that may come
	// (crossLinger) is let go, zero while it is kept for one that waits;
	// keptTimer, made once, fires then (dropKept).
	mu         sync.Mutex
	waiting    int
	kept       bool
	crossSince time.Time
	keptUntil  time.Time
	keptTimer  *time.Timer

	// hmu guards held, the writer connection the gate keeps between
	// writes (see "The writer connection"), and linger, the timer that
	// gives it back.
	hmu    sync.Mutex
	held   *Writer
	linger *time.Timer

	// ckptPages is the wal_autocheckpoint the gate checkpoints its writer
	// connection's log by, 0 when it leaves checkpoints to SQLite, -1
	// until read (see "Checkpoints off the writer's turn"). Under hmu:
	// ckptCommits counts the commits on the writer connection since the
	// last checkpoint began, ckptEvery how many start the next one (0
	// until the first), ckptRunning says one runs, ckptCatchUp that the
	// writer with the next turn is to complete the last one.
	ckptPages   atomic.Int64
	ckptStarted atomic.Int64 // checkpoints started (Checkpoints)
	ckptCommits int64
	ckptEvery   int64
	ckptRunning bool
	ckptCatchUp bool
	ckptTries   int // catch-ups of the last checkpoint that did not complete
}

// crossBatch bounds how long the writers of one process pass the
// cross-process lock to each other while writers of other processes wait
// for it (the lock's queue tells; without one, always). A writer that
// leaves while another of its process waits at the gate keeps the lock
// for it, instead of queueing behind every other process for each write:
// handing the lock to another process costs a wake-up of that process,
// which on a busy machine takes as long as a write, or longer. While other
// processes wait, the lock is kept for crossBatch at most: long enough for
// a process to write a batch (and for a writer that arrives while the
// batch runs to join it), short enough that every other process in the
// queue gets its turn within a few batches. Keeping it only for the writers
// that waited when the process took it measured 0.7–0.9× the throughput
// with the same tail. A worker of a hot row waits for the other processes'
// turns about once per few writes, so p99 is about 4 turns (32 workers in
// 4 processes on an idle machine: 9.2–9.6 ms with 1.8 ms, 10.0–10.6 ms with
// 2 ms, at the same throughput).
const crossBatch = 1800 * time.Microsecond

var sqliteGates sync.Map // weak.Pointer[sql.DB] -> *sqliteGate

// gateOf returns the gate of the database behind sqlDB. The entry goes
// away when sqlDB is garbage collected.
func gateOf(sqlDB *sql.DB) *sqliteGate {
	key := weak.Make(sqlDB)
	if g, ok := sqliteGates.Load(key); ok {
		return g.(*sqliteGate)
	}
	g := &sqliteGate{turn: make(chan struct{}, 1)}
	g.busyMS.Store(-1)
	g.ckptPages.Store(-1)
	if actual, loaded := sqliteGates.LoadOrStore(key, g); loaded {
		return actual.(*sqliteGate)
	}
	runtime.AddCleanup(sqlDB, func(k weak.Pointer[sql.DB]) { sqliteGates.Delete(k) }, key)
	return g
}

// Wait bounds a wait for a lock: not at all (NoWait), at most Limit, or
// (both zero) as long as the context lasts. OnWriter asks Begin for a
// transaction on the gate's writer connection (see "Transactions on the
// writer connection").
type Wait struct {
	NoWait   bool
	Limit    time.Duration
	OnWriter bool
}

// enter waits for the writer's turn in this process; ctx ends the wait.
// It reports whether the writer holds the cross-process lock too: the
// writer before it kept the lock for it.
func (g *sqliteGate) enter(ctx context.Context, w Wait) (bool, error) {
	if w.NoWait {
		select {
		case g.turn <- struct{}{}:
			return g.inherit(false), nil
		default:
		}
		return false, &locking.DatabaseError{Kind: locking.ErrLocked, Code: "SQLITE_BUSY",
			Err: errors.New("another writer of this process holds SQLite's write lock")}
	}
	if w.Limit > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, w.Limit, errLockWaitOver)
		defer cancel()
		crossed, err := g.take(ctx)
		if err != nil && errors.Is(context.Cause(ctx), errLockWaitOver) {
			return false, &locking.DatabaseError{Kind: locking.ErrLockTimeout, Code: "SQLITE_BUSY", Err: errLockWaitOver}
		}
		return crossed, err
	}
	return g.take(ctx)
}

// take waits for the turn until ctx ends.
func (g *sqliteGate) take(ctx context.Context) (bool, error) {
	select {
	case g.turn <- struct{}{}:
		return g.inherit(false), nil
	default:
	}
	g.mu.Lock()
	g.waiting++
	g.mu.Unlock()
	select {
	case g.turn <- struct{}{}:
		return g.inherit(true), nil
	case <-ctx.Done():
		g.giveUp()
		return false, ctx.Err()
	}
}

var errLockWaitOver = errors.New("waited the lock timeout for SQLite's write lock")

// inherit takes over the cross-process lock if the writer before kept it;
// the writer calling it has just taken the turn, having waited (counted in
// waiting) or not.
func (g *sqliteGate) inherit(waited bool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if waited {
		g.waiting--
	}
	kept := g.kept
	g.kept, g.keptUntil = false, time.Time{}
	return kept
}

// giveUp takes a writer that stopped waiting off the count, and lets the
// cross-process lock go if it was kept for writers that all stopped.
func (g *sqliteGate) giveUp() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.waiting--
	if g.waiting > 0 || !g.kept {
		return
	}
	select {
	case g.turn <- struct{}{}:
	default:
		return // a writer took the turn, and will take the lock with it
	}
	g.kept, g.keptUntil = false, time.Time{}
	g.cross.unlock()
	<-g.turn
}

// leave passes the turn on. A writer holding the cross-process lock
// (crossed) keeps it for the next writer of this process if one waits and
// crossBatch allows, and lets it go otherwise.
func (g *sqliteGate) leave(crossed bool) {
	g.mu.Lock()
	if crossed && g.waiting > 0 && (time.Since(g.crossSince) < crossBatch || !g.cross.contended()) {
		g.kept, g.keptUntil = true, time.Time{}
		<-g.turn
		g.mu.Unlock()
		return
	}
	if crossed && g.cross.contended() && time.Since(g.crossSince) < crossBatch {
		// Nobody of this process waits yet; the caller that comes next
		// (the next caller of a record, which waited for this one's turn
		// on it) often arrives within crossLinger.
		linger := crossLinger
		g.kept, g.keptUntil = true, time.Now().Add(linger)
		if g.keptTimer == nil {
			g.keptTimer = time.AfterFunc(linger, func() { g.dropKept(time.Now()) })
		} else {
			g.keptTimer.Reset(linger)
		}
		<-g.turn
		g.mu.Unlock()
		return
	}
	g.mu.Unlock()
	if crossed {
		g.cross.unlock()
	}
	<-g.turn
}

// crossLinger is how long a writer that leaves while nobody of its process
// waits at the gate keeps the cross-process lock for a writer of its
// process that may come, within crossBatch. Callers of one record in one
// process take turns before they reach the gate, so without it every
// write of a hot record was a hand-over between processes: 0.5× the
// throughput of flock alone.
//
// One timer per gate ends the lingers, reset by each: a writer taking the
// turn ends the linger, and the next one to leave starts its own. The
// timer of a linger that ended must not end a later one: when it did
// (a timer per linger, each letting the lock go if it was kept when it
// fired), a turn on the hot row lasted 0.7 ms instead of the 2 ms
// crossBatch then allowed, because an earlier write's timer fired in the few
// microseconds between a later write and the next; every early end is a
// hand-over between processes, which costs about 150 µs (the wake-up, and
// the next process's first write: 170 µs against 65), and 32 workers in
// 4 processes made 0.78–0.87× flock's throughput instead of 0.95–0.98×.
var crossLinger = 200 * time.Microsecond

// dropKept lets the cross-process lock go if it is still kept, no writer
// has the turn, and nobody is left to take it: kept for a writer that may
// come, its linger is over at now; kept for writers that waited, they all
// stopped waiting. The second case matters because giveUp, which lets the
// lock go when the last waiter stops, leaves it to whoever holds the turn
// — here, dropKept itself. For the same reason the turn goes back under
// mu when the lock stays kept: a waiter that stops right after finds the
// turn free and lets the lock go itself.
//
// Two runs of the timer's function can overlap (a Reset while one is
// pending starts the next without waiting), and the later one returns at
// once when the earlier holds the turn. So the time is read again under
// mu, and a run that finds a linger not over yet sets the timer for its
// end: one of them always lets the lock go.
func (g *sqliteGate) dropKept(now time.Time) {
	select {
	case g.turn <- struct{}{}:
	default:
		return // a writer has the turn, and the kept lock with it
	}
	g.mu.Lock()
	if t := time.Now(); t.After(now) {
		now = t
	}
	drop := g.kept
	if drop && g.keptUntil.IsZero() {
		drop = g.waiting == 0
	} else if drop {
		drop = !now.Before(g.keptUntil)
		if !drop {
			g.keptTimer.Reset(g.keptUntil.Sub(now))
		}
	}
	if !drop {
		<-g.turn
		g.mu.Unlock()
		return
	}
	g.kept, g.keptUntil = false, time.Time{}
	g.mu.Unlock()
	g.cross.unlock()
	<-g.turn
}

// busyTimeout returns the busy_timeout of conn's database in milliseconds,
// read from the first connection gormlock uses and kept: the connections of
// one pool are opened alike.
func (g *sqliteGate) busyTimeout(ctx context.Context, conn *sql.Conn) (int64, error) {
	if ms := g.busyMS.Load(); ms >= 0 {
		return ms, nil
	}
	var ms int64
	if err := conn.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&ms); err != nil {
		return 0, fmt.Errorf("reading busy_timeout: %w", locking.Classify(err))
	}
	g.busyMS.Store(ms)
	return ms, nil
}

// Conn is a connection taken for one write or one transaction: it
// holds the turn at the gate (and the gate's cross-process lock) until
// release.
type Conn struct {
	gate *sqliteGate
	db   *sql.DB
	conn *sql.Conn
	// w is the gate's writer connection conn is, for a write outside a
	// transaction (TakeInto); nil otherwise.
	w    *Writer
	busy int64 // the connection's busy_timeout to restore, ms
	// deadline ends the wait for the write lock under LockTimeout.
	deadline time.Time
	// inSQLite says the connection kept its busy timeout: SQLite's busy
	// handler waits for the lock (a context that can never end).
	inSQLite bool
	crossed  bool // holds gate.cross
	// bad marks the connection as unusable (its settings or its
	// transaction could not be restored): release drops it from the pool.
	bad bool
}

// TakeInto waits at the gate for the writer's turn for one write outside
// a transaction, then takes a connection into c, which the caller may keep
// on its stack (the write takes its turn without allocating one), with its
// busy_timeout at 0 so that waiting for the write lock happens in Lock, in
// Go. Its statement runs on c.Writer() when the gate keeps a writer
// connection (see "The writer connection"). Whatever c held is
// overwritten; on error c holds nothing to release, and nothing was sent.
//
// Without NoWait or LockTimeout the wait is bounded by ctx alone, not by
// the connection's busy timeout: a writer waits its turn as long as its
// caller lets it, and a busy machine or a short busy timeout never turns
// the wait into "database is locked". A context that can never end
// (context.Background) has nothing to stop a wait, and then a connection
// taken from the pool for a transaction keeps its own busy timeout and
// waits in SQLite, again and again until the lock is free: the same wait,
// without setting and restoring the timeout. The gate's writer connection
// has its busy timeout at 0 whatever the context, and waits in Lock.
func TakeInto(ctx context.Context, sqlDB *sql.DB, w Wait, c *Conn) error {
	return take(ctx, sqlDB, w, c, true)
}

// take is TakeInto (write) and the turn of Begin's transaction, whose
// connection is the transaction's until release (write: the gate's writer
// connection when Wait.OnWriter asks for it).
func take(ctx context.Context, sqlDB *sql.DB, w Wait, c *Conn, write bool) error {
	g := gateOf(sqlDB)
	crossed, err := g.enter(ctx, w)
	if err != nil {
		return err
	}
	var start time.Time
	if w.Limit > 0 {
		start = time.Now()
	}
	*c = Conn{gate: g, db: sqlDB, busy: -1, crossed: crossed}
	if w.Limit > 0 {
		c.deadline = start.Add(w.Limit)
	}
	hw := g.takeWriter(!write)
	if hw != nil && dbClosed(sqlDB) {
		// Not lent after DB.Close: it goes, and the write fails below as
		// it would without gormlock.
		g.putWriter(sqlDB, hw, false)
		hw = nil
	}
	if hw != nil && !write && hw.ckpt >= 0 {
		// The transaction is the application's: its COMMIT checkpoints
		// as the connection was opened to. A connection that cannot be
		// given that back is dropped, and the transaction takes another.
		if err := restoreAutocheckpoint(hw.conn, hw.ckpt); err != nil {
			hw.close(true)
			hw = nil
		}
	}
	if hw != nil {
		// The gate's writer connection: its busy timeout is 0 already.
		c.conn = hw.conn
		if write {
			c.w = hw
		} else {
			c.busy = hw.busy // the transaction's now: restored at release
		}
	} else {
		conn, err := sqlDB.Conn(ctx)
		if err != nil {
			g.leave(crossed)
			return locking.Classify(err)
		}
		c.conn = conn
		// The connection's settings are read and set with a context that
		// does not end, as every statement of the gate's (see Lock): given
		// one that ends as it runs, the pure-Go driver can answer nil for
		// a PRAGMA it never ran. The wait that follows looks at ctx.
		sctx := context.WithoutCancel(ctx)
		if !g.crossOpened {
			g.cross, g.crossOpened = openCrossLock(sctx, conn), true
		}
		var st sql.DBStats
		if write {
			st = sqlDB.Stats()
		}
		hold := write && poolLets(st, false)
		c.inSQLite = !hold && ctx.Done() == nil && !w.NoWait && w.Limit == 0
		if hold {
			// Read while the connection still waits for locks in SQLite:
			// on a connection that has not read the schema yet, asking
			// for the journal mode waits for a writer in rollback-journal
			// mode.
			g.walPages(sctx, conn)
		}
		if !c.inSQLite {
			// Set before the wait for the cross-process lock, so that the
			// other processes do not wait for this statement too (unless the
			// lock was kept for this writer).
			busy, err := g.busyTimeout(sctx, conn)
			if err != nil {
				c.bad = true
				c.Release(ctx)
				return err
			}
			c.busy = busy
			if _, err = conn.ExecContext(sctx, "PRAGMA busy_timeout = 0"); err != nil {
				c.bad = true
				c.Release(ctx)
				return fmt.Errorf("setting busy_timeout: %w", locking.Classify(err))
			}
		}
		if hold {
			// Kept by the gate from now on (putWriter), busy timeout 0,
			// checkpoints left to the gate.
			ckpt, err := g.autocheckpointOff(sctx, conn)
			if err != nil {
				c.bad = true
				c.Release(ctx)
				return err
			}
			c.w = &Writer{conn: conn, busy: c.busy, ckpt: ckpt, waits: st.WaitCount}
			c.busy = -1
		}
	}
	if g.cross != nil && !c.crossed {
		if err := g.cross.lock(ctx, w.NoWait, w.Limit > 0, c.deadline); err != nil {
			c.Release(ctx)
			return err
		}
		c.crossed = true
		g.mu.Lock()
		g.crossSince = time.Now()
		g.mu.Unlock()
	}
	return nil
}

// Lock runs step, a statement that takes SQLite's write lock (a write, or
// BEGIN IMMEDIATE), until the lock was free for it: while another
// connection holds the lock, step fails with SQLITE_BUSY having done
// nothing, and is run again after a short sleep. With NoWait it gives up at
// once, with step's SQLITE_BUSY error (ErrLocked); with LockTimeout when
// the limit has passed, with an error matching locking.ErrLockTimeout;
// otherwise when ctx ends, with ctx's error. Either way nothing was done.
// A wait is never reported as SQLite's "database is locked": that a
// connection's busy timeout ran out only means another connection wrote
// for that long. Lock looks at ctx before each try; step sends its
// statement with a context that does not end (see store.Detach), so that
// its answer is what it did.
func (c *Conn) Lock(ctx context.Context, w Wait, step func() error) error {
	sleep := 500 * time.Microsecond
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("waiting for SQLite's write lock: %w", err)
		}
		err := step()
		if !locking.IsSQLiteBusy(err) {
			return err
		}
		if w.NoWait {
			return locking.Classify(err)
		}
		if w.Limit > 0 && !time.Now().Before(c.deadline) {
			return &locking.DatabaseError{Kind: locking.ErrLockTimeout, Code: locking.Code(locking.Classify(err)), Err: errLockWaitOver}
		}
		// With inSQLite, SQLite waited the connection's busy timeout in its
		// busy handler already, and nothing can end the wait: wait again.
		d := sleep/2 + rand.N(sleep/2+1)
		if w.Limit > 0 {
			d = min(d, time.Until(c.deadline))
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("waiting for SQLite's write lock: %w", ctx.Err())
		}
		sleep = min(2*sleep, 2*time.Millisecond)
	}
}

// restoreBusy gives the connection its busy_timeout back (inside or outside
// a transaction: it is a connection setting).
func (c *Conn) RestoreBusy(ctx context.Context) error {
	if c.busy < 0 {
		return nil
	}
	if _, err := c.conn.ExecContext(context.WithoutCancel(ctx), "PRAGMA busy_timeout = "+strconv.FormatInt(c.busy, 10)); err != nil {
		c.bad = true
		return fmt.Errorf("restoring busy_timeout: %w", locking.Classify(err))
	}
	c.busy = -1
	return nil
}

// release restores the connection's settings, returns it to the pool (or
// drops it when it cannot be trusted any more) and passes the turn on: in
// this order, so that a writer of this process that gets the turn with
// the cross-process lock kept for it finds a connection in the pool.
//
// The gate's writer connection (c.Writer) stays with the gate, for the
// next write, if the pool lets it (see "The writer connection").
func (c *Conn) Release(ctx context.Context) {
	if c.w != nil {
		c.gate.putWriter(c.db, c.w, c.bad)
		c.w = nil
	} else {
		if !c.bad {
			_ = c.RestoreBusy(ctx)
		}
		if c.bad {
			_ = c.conn.Raw(func(any) error { return driver.ErrBadConn })
		}
		_ = c.conn.Close()
	}
	crossed := c.crossed
	c.crossed = false
	c.gate.leave(crossed)
}

// Tx is a transaction gormlock began on SQLite with BEGIN IMMEDIATE,
// on a connection of its own. It implements gorm.ConnPool and
// gorm.TxCommitter, so GORM treats it as the transaction it is (nested
// db.Transaction calls use savepoints).
type Tx struct {
	*Conn
	db       *sql.DB // the database, for GORM's DB()
	done     atomic.Bool
	readOnly bool // the connection is query_only until the end
	// released says the connection went back (to the gate, when it is
	// the writer connection, which the next writer uses): a statement
	// sent after that fails unsent.
	released atomic.Bool
	// begun says BEGIN IMMEDIATE began the (write) transaction.
	begun bool
	// mu serializes the transaction's statements with the checks around
	// them (see "Transactions SQLite rolls back"): a statement of another
	// goroutine never runs between a failure and the look at whether the
	// transaction is still open. Under mu: gone is the error after which
	// SQLite rolled the transaction back by itself, nil while it is open;
	// pending says a statement that writes was sent as a query, whose
	// rows report its errors where the transaction does not see them.
	mu      sync.Mutex
	gone    error
	pending bool
}

// Transactions SQLite rolls back.
//
// SQLite rolls a whole transaction back by itself when a write in it is
// interrupted (its context ended), runs out of disk or memory, or hits
// an I/O error, and a constraint declared ON CONFLICT ROLLBACK or a
// trigger's RAISE(ROLLBACK) does too. The connection is then back in
// autocommit mode: every later statement of the transaction commits by
// itself, and only the COMMIT at the end fails. A caller that goes on
// after the error would have part of its transaction applied and be told
// none of it was. So after a statement of a write transaction fails, and
// before the statement that follows a write sent as a query (INSERT or
// UPDATE ... RETURNING, whose rows report its errors), the transaction
// asks whether it is still open: go-sqlite3's connection says so
// (AutoCommit); with another driver, BEGIN fails inside a transaction,
// and one it begins is rolled back at once. Once it is not, every later
// statement is refused unsent (errRolledBack), and COMMIT is not sent:
// the transaction's outcome is "not committed", for certain. A COMMIT
// that SQLite refuses because no transaction is open (a statement that
// went around these checks) is reported as an unknown outcome: statements
// may have committed by themselves. Statements prepared with
// PrepareContext run without the checks.

// errRolledBack is what a statement sent after SQLite rolled the
// transaction back is refused with. It matches sql.ErrTxDone only: the
// error SQLite rolled back after is in its text and Cause, not its chain,
// so that the refusal of a statement never sent is not taken for that
// error (a unique key's "already exists", a context's end).
type errRolledBack struct{ cause error }

func (e *errRolledBack) Error() string {
	return "not committed: SQLite rolled the transaction back after a statement failed: " + e.cause.Error()
}

func (e *errRolledBack) Unwrap() error { return sql.ErrTxDone }

// Cause returns the error SQLite rolled the transaction back after.
func (e *errRolledBack) Cause() error { return e.cause }

// errQueryWrite is the cause recorded when SQLite rolled the transaction
// back during a write sent as a query: its rows reported the error.
var errQueryWrite = errors.New("a write sent as a query (RETURNING) failed as its rows were read")

// stillOpen reports whether SQLite holds the transaction open, and whether
// it could tell. Called with mu held.
func (t *Tx) stillOpen() (open, sure bool) {
	var told, auto bool
	_ = t.conn.Raw(func(dc any) error {
		if a, ok := dc.(interface{ AutoCommit() bool }); ok {
			told, auto = true, a.AutoCommit()
		}
		return nil
	})
	if told {
		return !auto, true
	}
	ctx := context.Background()
	// The pure-Go driver can leave an interrupt for the connection's next
	// statement: asked again, once or twice.
	for range 3 {
		_, err := t.conn.ExecContext(ctx, "BEGIN")
		switch {
		case err == nil:
			// None was open: this BEGIN began one.
			_, err = t.conn.ExecContext(ctx, "ROLLBACK")
			return false, err == nil
		case strings.Contains(err.Error(), "within a transaction"):
			return true, true
		case !strings.Contains(err.Error(), "interrupt"):
			return false, false
		}
	}
	return false, false
}

// rolledBackBy records, when SQLite rolled the transaction back after
// err, that it did, and returns err. Called with mu held.
func (t *Tx) rolledBackBy(err error) error {
	if err == nil || !t.begun || t.done.Load() || t.released.Load() || t.gone != nil {
		return err
	}
	open, sure := t.stillOpen()
	if open {
		return err
	}
	if !sure {
		// Neither open nor closed for sure: the connection is not kept
		// (dropping it rolls back whatever it holds).
		t.bad = true
	}
	t.gone = err
	return err
}

// mayWrite reports whether query may write: anything but a SELECT,
// VALUES, EXPLAIN or a PRAGMA that only reads, and a WITH that names a
// write.
func mayWrite(query string) bool {
	q := strings.TrimLeft(query, " \t\r\n(")
	word := q
	if i := strings.IndexAny(q, " \t\r\n("); i >= 0 {
		word = q[:i]
	}
	switch strings.ToUpper(word) {
	case "SELECT", "VALUES", "EXPLAIN":
		return false
	case "PRAGMA":
		// One that sets something, or incremental_vacuum, writes.
		return strings.Contains(q, "=") || strings.Contains(strings.ToLower(q), "incremental_vacuum")
	case "WITH":
		up := strings.ToUpper(q)
		return strings.Contains(up, "INSERT") || strings.Contains(up, "UPDATE") || strings.Contains(up, "DELETE") || strings.Contains(up, "REPLACE")
	}
	return true
}

// refused looks at a write sent as a query before (pending) and returns
// the error a statement sent after SQLite rolled the transaction back is
// refused with, or nil while it is open. Called with mu held.
func (t *Tx) refused() error {
	if t.pending {
		t.pending = false
		_ = t.rolledBackBy(errQueryWrite)
	}
	if t.gone != nil {
		return &errRolledBack{cause: t.gone}
	}
	return nil
}

// ended reports whether the transaction's connection was given back.
func (t *Tx) ended() bool { return t.released.Load() }

// GetDBConn implements gorm.GetDBConnector: GORM's DB() on the transaction
// returns the database, as it does for a *sql.Tx.
func (t *Tx) GetDBConn() (*sql.DB, error) { return t.db, nil }

// Begin begins a write transaction: it waits for the writer's turn in
// the process and for the write lock (BEGIN IMMEDIATE), both bounded by w
// and ctx. ReadOnly transactions begin DEFERRED and wait for nobody; their
// connection is query_only until they end, so a write in them fails
// instead of committing.
func Begin(ctx context.Context, sqlDB *sql.DB, w Wait, readOnly bool) (*Tx, error) {
	if readOnly {
		conn, err := sqlDB.Conn(ctx)
		if err != nil {
			return nil, locking.Classify(err)
		}
		c := &Conn{conn: conn, busy: -1}
		// With a context that does not end (see Lock): the pure-Go
		// driver can answer nil for a PRAGMA query_only it never ran.
		sctx := context.WithoutCancel(ctx)
		if _, err = conn.ExecContext(sctx, "PRAGMA query_only = 1"); err == nil {
			if _, err = conn.ExecContext(sctx, "BEGIN DEFERRED"); err == nil && ctx.Err() != nil {
				_, _ = conn.ExecContext(sctx, "ROLLBACK")
				err = ctx.Err()
			}
			if err != nil {
				_, _ = conn.ExecContext(sctx, "PRAGMA query_only = 0")
			}
		}
		if err != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			_ = conn.Close()
			return nil, locking.Classify(err)
		}
		return &Tx{Conn: c, db: sqlDB, readOnly: true}, nil
	}
	c := new(Conn)
	if err := take(ctx, sqlDB, w, c, w.OnWriter); err != nil {
		return nil, err
	}
	t := &Tx{Conn: c, db: sqlDB}
	err := c.Lock(ctx, w, func() error {
		// Sent with a context that does not end: with one that does,
		// the pure-Go driver has answered nil for a BEGIN IMMEDIATE that
		// began no transaction, as the context ended (measured: 1 to 4
		// in 160 waits a deadline ended); the caller's statements would
		// then each have committed by themselves.
		// BEGIN waits for nothing (busy timeout 0, or no end to wait
		// for), and Lock looks at ctx before each try.
		_, err := t.ExecContext(context.WithoutCancel(ctx), "BEGIN IMMEDIATE")
		return err
	})
	if err == nil && ctx.Err() != nil {
		// Begun as the context ended: the caller's statements would all
		// fail with the context's error. Not begun for the caller; the
		// connection is dropped below, which rolls it back.
		err = fmt.Errorf("waiting for SQLite's write lock: %w", ctx.Err())
	}
	if err == nil && c.w == nil {
		// The transaction holds the write lock: statements in it never
		// wait for it again, and the application's own statements in it
		// should see the connection as it was opened.
		err = c.RestoreBusy(ctx)
		if err != nil {
			_, _ = c.conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			// The context ended while BEGIN may have run: the pure-Go
			// driver answers the context's error for a statement that
			// completed. A connection that may hold a transaction is
			// dropped, which rolls it back, never kept or pooled.
			c.bad = true
		}
		c.Release(ctx)
		return nil, err
	}
	t.begun = true
	return t, nil
}

// Transactions on the writer connection.
//
// A transaction whose statements are all gormlock's own (a locked attempt
// of Mutate or MutateRowLocked on a model without hooks) runs on the gate's
// writer connection when Wait.OnWriter asks for it and the gate keeps one
// (see "The writer connection"): its busy timeout stays 0, where Begin's
// sets it to 0 for BEGIN IMMEDIATE and back for the application's
// statements (two statements more per transaction), and its statements —
// BEGIN IMMEDIATE, the read, the write, COMMIT — run prepared on the
// connection, where SQLite would otherwise parse each again: on one
// worker a locked Mutate spent a fifth of its CPU in SQLite's parser.
// At the end the gate keeps the connection for the next write, as it
// does after a write outside a transaction.

// Commit commits. It is not interrupted by the caller's context: SQLite
// commits in the process, quickly, and a COMMIT left half-way would make the
// outcome unknown.
func (t *Tx) Commit() error { return t.end("COMMIT") }

// Rollback rolls back.
func (t *Tx) Rollback() error { return t.end("ROLLBACK") }

func (t *Tx) end(stmt string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	// A write sent as a query just before (pending, and nothing after
	// it): COMMIT or ROLLBACK says as much as asking would, without a
	// statement more — SQLite refuses both when no transaction is open.
	lastWasQuery := t.pending && t.gone == nil
	t.pending = false
	gone := t.refused()
	if !t.done.CompareAndSwap(false, true) {
		return sql.ErrTxDone
	}
	var err error
	if gone != nil {
		// SQLite rolled the transaction back: nothing is left to
		// commit (COMMIT would fail) or to roll back.
		if stmt == "COMMIT" {
			err = gone
		}
	} else {
		_, err = t.exec(context.Background(), stmt)
		if t.w != nil && stmt == "COMMIT" {
			err = t.commitWaiting(err)
		}
		noTx := err != nil && strings.Contains(err.Error(), "no transaction is active")
		if noTx && lastWasQuery {
			// SQLite rolled back during that write, the last statement:
			// nothing was committed.
			if err = nil; stmt == "COMMIT" {
				err = &errRolledBack{cause: errQueryWrite}
			}
		} else if noTx && stmt == "COMMIT" {
			// SQLite had rolled the transaction back, and a statement
			// went around the checks: what came after may have
			// committed by itself.
			err = locking.Unknown(fmt.Errorf("SQLite had rolled the transaction back before COMMIT; statements after that may have committed by themselves: %w", err))
		} else if err != nil && stmt == "COMMIT" {
			// A failed COMMIT leaves the transaction open on SQLite.
			if _, rerr := t.exec(context.Background(), "ROLLBACK"); rerr != nil {
				t.bad = true
			}
		} else if err != nil {
			t.bad = true
		}
	}
	if t.readOnly && !t.bad {
		if _, rerr := t.conn.ExecContext(context.Background(), "PRAGMA query_only = 0"); rerr != nil {
			t.bad = true
		}
	}
	if t.gate != nil {
		t.released.Store(true)
		t.Release(context.Background())
	} else {
		if t.bad {
			_ = t.conn.Raw(func(any) error { return driver.ErrBadConn })
		}
		_ = t.conn.Close()
	}
	return err
}

// commitWaiting runs COMMIT again while it fails with SQLITE_BUSY (err,
// the first try's error), for the busy timeout the writer connection was
// opened with: in rollback-journal mode a COMMIT waits for the readers
// to finish, which the connection's busy handler would have done had the
// writer connection's busy timeout not been 0. A COMMIT that fails so
// leaves the transaction open, to be committed again. Not one refused
// because statements of the connection are still running, which no wait
// ends (the busy handler is not called for it either).
func (t *Tx) commitWaiting(err error) error {
	deadline := time.Now().Add(time.Duration(t.w.busy) * time.Millisecond)
	for pause := 100 * time.Microsecond; locking.IsSQLiteBusy(err) && !strings.Contains(err.Error(), "in progress") && time.Now().Before(deadline); pause = min(2*pause, 5*time.Millisecond) {
		time.Sleep(pause)
		_, err = t.exec(context.Background(), "COMMIT")
	}
	return err
}

// The gorm.ConnPool methods, on the transaction's connection.

// ExecContext implements gorm.ConnPool. On the writer connection the
// statement runs prepared (see "Transactions on the writer connection").
func (t *Tx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended() {
		return nil, sql.ErrTxDone
	}
	if err := t.refused(); err != nil {
		return nil, err
	}
	res, err := t.exec(ctx, query, args...)
	return res, t.rolledBackBy(err)
}

// exec sends a statement on the transaction's connection, unchecked.
func (t *Tx) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if t.w != nil {
		return t.w.ExecContext(ctx, query, args...)
	}
	return t.conn.ExecContext(ctx, query, args...)
}

// QueryContext implements gorm.ConnPool.
func (t *Tx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended() {
		return nil, sql.ErrTxDone
	}
	if err := t.refused(); err != nil {
		return nil, err
	}
	var rows *sql.Rows
	var err error
	if t.w != nil {
		rows, err = t.w.QueryContext(ctx, query, args...)
	} else {
		rows, err = t.conn.QueryContext(ctx, query, args...)
	}
	if err == nil && t.begun && mayWrite(query) {
		t.pending = true
	}
	return rows, t.rolledBackBy(err)
}

// QueryRowContext implements gorm.ConnPool. After SQLite rolled the
// transaction back, the row carries sql.ErrTxDone.
func (t *Tx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended() || t.refused() != nil {
		// A row that carries sql.ErrTxDone (with a context of its
		// own: one that ended would make it carry the context's error).
		return txDoneDB().QueryRowContext(context.Background(), query, args...)
	}
	if t.begun && mayWrite(query) {
		t.pending = true
	}
	if t.w != nil {
		return t.w.QueryRowContext(ctx, query, args...)
	}
	return t.conn.QueryRowContext(ctx, query, args...)
}

// PrepareContext implements gorm.ConnPool. The statement it returns runs
// without the checks of "Transactions SQLite rolls back".
func (t *Tx) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended() {
		return nil, sql.ErrTxDone
	}
	if err := t.refused(); err != nil {
		return nil, err
	}
	return t.conn.PrepareContext(ctx, query)
}

// txDoneDB returns a database whose every connection fails with
// sql.ErrTxDone: its QueryRowContext makes the *sql.Row of a statement
// sent on an ended transaction, which database/sql offers no other way to
// make. Made on first use, since a sql.DB keeps a goroutine of its own.
var txDoneDB = sync.OnceValue(func() *sql.DB { return sql.OpenDB(txDoneConnector{}) })

type txDoneConnector struct{}

func (txDoneConnector) Connect(context.Context) (driver.Conn, error) { return nil, sql.ErrTxDone }
func (txDoneConnector) Driver() driver.Driver                        { return txDoneDriver{} }

type txDoneDriver struct{}

func (txDoneDriver) Open(string) (driver.Conn, error) { return nil, sql.ErrTxDone }

// SQL returns the connection, for the statement the turn was taken for.
func (c *Conn) SQL() *sql.Conn { return c.conn }

// Writer returns the gate's writer connection the statement runs on, with
// its prepared statements, or nil when it runs on SQL() (see "The writer
// connection").
func (c *Conn) Writer() *Writer { return c.w }

// ReadOnly reports whether the transaction began read-only: it holds no
// write lock and never may.
func (t *Tx) ReadOnly() bool { return t.readOnly }
