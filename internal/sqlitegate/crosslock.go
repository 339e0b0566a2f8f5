package sqlitegate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"sync"
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
// lets it go after it let SQLite's go. The kernel wakes a waiter the moment
// the lock is released, so the processes' heads take turns instead of
// polling. The side file holds no data; it may be deleted while no process
// has the database open. Where it cannot be opened (a read-only folder, an
// in-memory database, a platform without flock), writers wait for SQLite's
// lock alone, as before.
//
// The wait is bounded like the wait for SQLite's lock (NoWait, LockTimeout,
// or the connection's busy timeout) and ends with the context. A flock call
// cannot be interrupted, so it runs in a goroutine: a writer that stops
// waiting leaves it behind, the next head of the gate waits for the same
// call, and when the call gets the lock and nobody waits for it any more it
// lets the lock go at once.

// crossLock is one database's side-file lock, in one process.
type crossLock struct {
	f  *os.File
	fd int

	mu       sync.Mutex
	inflight bool       // a goroutine is blocked in flock(LOCK_EX)
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
	f, err := os.OpenFile(path+"-gormlock", os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		// flock works on a descriptor opened for reading too.
		if f, err = os.Open(path + "-gormlock"); err != nil {
			return nil
		}
	}
	return &crossLock{f: f, fd: int(f.Fd())}
}

// lock takes the side-file lock, waiting until deadline at most (not at all
// with nowait) and while ctx lasts. The error of a wait that ran out is a
// *locking.DatabaseError of kind ErrLocked (ErrLockTimeout with timeout
// set); that of a context that ended wraps ctx's error. Only the gate's
// head calls it.
func (l *crossLock) lock(ctx context.Context, nowait, timeout bool, deadline time.Time) error {
	l.mu.Lock()
	if !l.inflight {
		l.mu.Unlock()
		ok, err := tryFlock(l.fd)
		if err != nil {
			return fmt.Errorf("locking %s: %w", l.f.Name(), err)
		}
		if ok {
			return nil
		}
		l.mu.Lock()
	}
	if nowait {
		l.mu.Unlock()
		return l.busy(false)
	}
	ch := make(chan error, 1)
	l.waiter = ch
	if !l.inflight {
		l.inflight = true
		go l.block()
	}
	l.mu.Unlock()

	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	var gaveUp error
	select {
	case err := <-ch:
		if err != nil {
			return fmt.Errorf("locking %s: %w", l.f.Name(), err)
		}
		return nil
	case <-ctx.Done():
		gaveUp = fmt.Errorf("waiting for SQLite's write lock: %w", ctx.Err())
	case <-t.C:
		gaveUp = l.busy(timeout)
	}
	l.mu.Lock()
	if l.waiter == ch {
		l.waiter = nil // block lets the lock go when it gets it
		l.mu.Unlock()
		return gaveUp
	}
	l.mu.Unlock()
	// The call got the lock as the wait ended and handed it over already.
	if err := <-ch; err == nil {
		l.unlock()
	}
	return gaveUp
}

// block waits in flock for the lock, then hands it to the gate's head if
// one waits, and otherwise lets it go.
func (l *crossLock) block() {
	err := waitFlock(l.fd)
	l.mu.Lock()
	l.inflight = false
	w := l.waiter
	l.waiter = nil
	l.mu.Unlock()
	if w != nil {
		w <- err
		return
	}
	if err == nil {
		l.unlock()
	}
}

func (l *crossLock) unlock() { unFlock(l.fd) }

func (l *crossLock) busy(timeout bool) error {
	kind := locking.ErrLocked
	if timeout {
		kind = locking.ErrLockTimeout
	}
	return &locking.DatabaseError{Kind: kind, Code: "SQLITE_BUSY", Err: errCrossLockBusy}
}
