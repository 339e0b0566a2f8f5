package sqlitegate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gormlock/gormlock/locking"
)

// Writers of one SQLite file in several processes.
//
// The gate queues a process's own writers; between processes, SQLite's
// write lock is all there is, and its waiters poll: a waiter in one process
// can lose the lock to the other processes' writers again and again, which
// is what puts SQLite's worst-case latency in the hundreds of milliseconds
// when several processes write one file. So the writer at the head of a
// gate also takes an advisory lock (flock) on a side file next to the
// database, "<file>-gormlock", before it takes SQLite's write lock, and
// lets it go after it let SQLite's go. On Linux the heads first queue for
// it, first come first served, in a ticket queue kept in the side file
// (turnQueue): flock alone wakes its waiters but lets the
// releasing process take the lock again before they run. The side file
// holds no data; it may be deleted while no process has the database open,
// and must not be truncated while one has. Where it cannot be opened (a
// read-only folder, an in-memory database, a platform without flock),
// writers wait for SQLite's lock alone, as before; where the queue cannot
// be used (another platform, a read-only side file), for the flock alone.
//
// The wait is bounded like the wait for SQLite's lock (NoWait, LockTimeout,
// or the connection's busy timeout) and ends with the context. Neither a
// ticket's wait nor a flock call can be interrupted, so they run in a
// goroutine: a writer that stops waiting leaves it behind, the next head
// of the gate waits for the same call, and when the call gets the lock and
// nobody waits for it any more it lets the lock go (and passes the turn
// on) at once.

// crossLock is one database's side-file lock, in one process.
type crossLock struct {
	f  *os.File
	fd int
	// q is the processes' queue for the lock, or nil: the flock alone.
	q *turnQueue
	// ticket is the turn in q the lock's holder took it with.
	ticket uint32

	mu       sync.Mutex
	inflight bool       // a goroutine waits for the turn or in flock(LOCK_EX)
	waiter   chan error // the gate's head waiting for that call, if any
}

// errCrossLockBusy is the cause when another process held the side-file
// lock for the whole wait.
var errCrossLockBusy = errors.New("another process holds SQLite's write lock (its turn on the lock file)")

// openCrossLock opens the side file of the database conn is connected to,
// or returns nil when there is none to open: an in-memory or temporary
// database, a folder gormlock may not create it in, or no flock.
func openCrossLock(ctx context.Context, conn *sql.Conn) *crossLock {
	if !flockSupported {
		return nil
	}
	var path string
	rows, err := conn.QueryContext(ctx, "PRAGMA database_list")
	if err != nil {
		return nil
	}
	for rows.Next() {
		var seq int
		var name, file string
		if rows.Scan(&seq, &name, &file) == nil && name == "main" {
			path = file
		}
	}
	if rows.Close() != nil || rows.Err() != nil || path == "" {
		return nil
	}
	return openCrossLockFile(path + "-gormlock")
}

// openCrossLockFile opens the side file at path, creating it, or returns
// nil when it cannot.
func openCrossLockFile(path string) *crossLock {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		// flock works on a descriptor opened for reading too.
		if f, err = os.Open(path); err != nil {
			return nil
		}
	}
	l := &crossLock{f: f, fd: int(f.Fd())}
	if !turnQueueOff.Load() {
		l.q = openTurnQueue(f)
	}
	return l
}

// turnQueueOff makes the side files opened from then on locked with flock
// alone, without the turn queue (SetTurnQueue).
var turnQueueOff atomic.Bool

// SetTurnQueue says whether the side files this process opens from now on
// queue their processes first come first served (on, the default) or are
// locked with flock alone. It is for the benchmark, which measures the two
// side by side: every process writing one database should say the same.
func SetTurnQueue(on bool) { turnQueueOff.Store(!on) }

// lock takes the side-file lock, waiting until deadline at most (never, when
// zero; not at all with nowait) and while ctx lasts. The error of a wait that ran out is a
// *locking.DatabaseError of kind ErrLocked (ErrLockTimeout with timeout
// set); that of a context that ended wraps ctx's error. Only the gate's
// head calls it.
func (l *crossLock) lock(ctx context.Context, nowait, timeout bool, deadline time.Time) error {
	l.mu.Lock()
	if l.inflight {
		// An earlier head's wait is left behind: wait for what it gets.
		if nowait {
			l.mu.Unlock()
			return l.busy(false)
		}
		ch := make(chan error, 1)
		l.waiter = ch
		l.mu.Unlock()
		return l.await(ctx, ch, timeout, deadline)
	}
	l.mu.Unlock()
	// Nothing waits for the lock in this process, and only the gate's
	// head starts a wait.
	ok, err := l.try()
	if err != nil {
		return fmt.Errorf("locking %s: %w", l.f.Name(), err)
	}
	if ok {
		return nil
	}
	if nowait {
		return l.busy(false)
	}
	if l.q == nil {
		return l.await(ctx, l.spawn(0, false), timeout, deadline)
	}
	// Wait for the turn in this goroutine: a hop to another one would
	// cost a wake-up on every hand-over between processes.
	t, served := l.q.waitUntil(ctx, l.q.take(), deadline)
	if served {
		ok, err := tryFlock(l.fd)
		if ok {
			l.ticket = t
			return nil
		}
		if err != nil {
			l.q.pass(t)
			return fmt.Errorf("locking %s: %w", l.f.Name(), err)
		}
		// Something that does not queue holds the flock (an older
		// gormlock): wait for it as for the flock alone, with the turn.
		return l.await(ctx, l.spawn(t, false), timeout, deadline)
	}
	// Leave the ticket behind: a goroutine waits for its turn and hands
	// the lock to the next head of the gate, or lets it go.
	l.mu.Lock()
	l.inflight = true
	l.mu.Unlock()
	go l.block(t, true)
	return l.gaveUp(ctx, timeout)
}

// spawn starts a goroutine that blocks for the lock (block(t, queued))
// and returns the channel it hands the lock over on.
func (l *crossLock) spawn(t uint32, queued bool) chan error {
	ch := make(chan error, 1)
	l.mu.Lock()
	l.waiter = ch
	l.inflight = true
	l.mu.Unlock()
	go l.block(t, queued)
	return ch
}

// await waits for the lock to come on ch, from the goroutine that blocks
// for it, until deadline and while ctx lasts.
func (l *crossLock) await(ctx context.Context, ch chan error, timeout bool, deadline time.Time) error {
	var over <-chan time.Time // never, without a deadline
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		over = t.C
	}
	select {
	case err := <-ch:
		if err != nil {
			return fmt.Errorf("locking %s: %w", l.f.Name(), err)
		}
		return nil
	case <-ctx.Done():
	case <-over:
	}
	l.mu.Lock()
	if l.waiter == ch {
		l.waiter = nil // block lets the lock go when it gets it
		l.mu.Unlock()
		return l.gaveUp(ctx, timeout)
	}
	l.mu.Unlock()
	// The call got the lock as the wait ended and handed it over already.
	if err := <-ch; err == nil {
		l.unlock()
	}
	return l.gaveUp(ctx, timeout)
}

// gaveUp is the error of a wait that ended without the lock: ctx's, or
// the wait's bound's.
func (l *crossLock) gaveUp(ctx context.Context, timeout bool) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("waiting for SQLite's write lock: %w", err)
	}
	return l.busy(timeout)
}

// try takes the lock if nobody holds it or waits for it.
func (l *crossLock) try() (bool, error) {
	if l.q == nil {
		return tryFlock(l.fd)
	}
	t, ok := l.q.tryTake()
	if !ok {
		return false, nil
	}
	if ok, err := tryFlock(l.fd); !ok || err != nil {
		l.q.pass(t)
		return false, err
	}
	l.ticket = t
	return true, nil
}

// block waits for the lock: for ticket t's turn in the queue first when
// queued, then in flock (holding ticket t's turn, if there is a queue). It
// hands the lock to the gate's head if one waits, and otherwise lets it
// go.
func (l *crossLock) block(t uint32, queued bool) {
	if queued {
		t = l.q.wait(t)
	}
	err := waitFlock(l.fd)
	if err != nil && l.q != nil {
		l.q.pass(t)
	}
	l.mu.Lock()
	l.inflight = false
	w := l.waiter
	l.waiter = nil
	l.ticket = t
	l.mu.Unlock()
	if w != nil {
		w <- err
		return
	}
	if err == nil {
		// By t, not l.ticket: the next head may take the lock (and set
		// l.ticket) as soon as the turn is passed on.
		l.release(t)
	}
}

// unlock lets the lock go and passes the turn on.
func (l *crossLock) unlock() { l.release(l.ticket) }

// release lets the lock go and passes ticket t's turn on.
func (l *crossLock) release(t uint32) {
	unFlock(l.fd)
	if l.q != nil {
		l.q.pass(t)
	}
}

func (l *crossLock) busy(timeout bool) error {
	kind := locking.ErrLocked
	if timeout {
		kind = locking.ErrLockTimeout
	}
	return &locking.DatabaseError{Kind: kind, Code: "SQLITE_BUSY", Err: errCrossLockBusy}
}

// contended reports whether writers of other processes wait for the lock:
// what the queue says, and, without one, always.
func (l *crossLock) contended() bool { return l.q == nil || l.q.queued() > 1 }
