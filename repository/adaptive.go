package repository

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gormlock/gormlock/locking"
)

// Adaptive Mutate.
//
// Mutate starts optimistic: read, fn, guarded write. Callers in this process
// already take turns on a record (turns), but writers in other processes
// race: only one read per commit can win, and every loser reads again. So
// when an attempt loses (ErrStaleData, or the database aborted it), Mutate
// runs the next attempt at once — no backoff — with the row locked, the way
// MutateRowLocked does: in a transaction, SELECT ... FOR UPDATE (SQLite: its
// write lock), fn, the guarded write, COMMIT. The contenders then queue on
// the database instead of racing. The record stays "hot" in this
// Repository for hotFor after the last evidence of contention — a lost
// race, or a locked read that had to wait for another transaction's lock —
// and while it is hot, every Mutate and Upsert of it starts locked. When no
// evidence comes for hotFor, the record cools and Mutate is optimistic
// again.
//
// The semantics do not change: the same errors, the same version rule, the
// same retry policy (attempts count locked and optimistic alike), and fn
// runs again only after an attempt lost. On Galera a row lock holds only on
// its node; a locked attempt that loses to another node fails with
// ErrDeadlock and is retried like any other.
//
// A locked attempt holds the row lock while fn runs, and fn gets no
// transaction: a write fn makes to the record through any connection (or,
// on MySQL and MariaDB, an insert of a row whose foreign key references it;
// PostgreSQL's lock here is FOR NO KEY UPDATE, which lets those through)
// waits for the lock its own call holds. So fn runs under the lock for at
// most lockedFnLimit: past it the attempt's transaction is rolled back from
// another goroutine, which releases the lock and lets such a write go on,
// and the call goes on optimistic (Report says Released). A call that then
// fails says why in its error (releasedError).

const (
	// hotFor is how long a record stays hot after the last evidence of
	// contention.
	hotFor = 500 * time.Millisecond
	// maxHot bounds the hot records remembered per Repository; beyond it a
	// record is not remembered (it still escalates within its call).
	maxHot = 4096
	// lockWaitFloor is the least extra time, over what taking an
	// uncontended lock costs, that counts as having waited for one.
	lockWaitFloor = 500 * time.Microsecond
	// lockedFnLimit bounds how long fn may run holding the row lock in a
	// locked attempt (see above): far longer than a change in memory
	// takes, short enough that a call waiting for its own lock is a
	// hiccup, not a hang.
	lockedFnLimit = 200 * time.Millisecond
)

// lockReleasedError is a locked attempt whose transaction was rolled back
// because fn held the row lock longer than lockedFnLimit. The call goes on
// with an optimistic attempt. It matches locking.ErrStaleData: the
// attempt's read may be overwritten once the lock is gone (by the write fn
// waited with, say), and the attempt never wrote.
type lockReleasedError struct {
	table string
	id    any
}

func (e *lockReleasedError) Error() string {
	return fmt.Sprintf("gormlock: stale data: %s id=%v: fn ran for over %v holding the row lock; the lock was released and the attempt rolled back", e.table, e.id, lockedFnLimit)
}
func (e *lockReleasedError) Unwrap() error { return locking.ErrStaleData }

// isLockReleased reports whether err is a *lockReleasedError.
func isLockReleased(err error) bool {
	var e *lockReleasedError
	return errors.As(err, &e)
}

// releasedError is the failure of a call after one of its locked attempts
// was released (lockReleasedError): it says what may have happened, and
// matches err.
type releasedError struct {
	err   error
	table string
	id    any
}

func (e *releasedError) Error() string {
	return fmt.Sprintf("%v (an attempt's fn ran for over %v holding the row lock of %s id=%v and the lock was released: "+
		"fn may write that record, or on MySQL and MariaDB insert a row that references it, through another connection, "+
		"which waits for its own call's lock; fn must change only the entity it is given, or use MutateRowLocked in RunInTx "+
		"and write through its ctx)", e.err, lockedFnLimit, e.table, e.id)
}
func (e *releasedError) Unwrap() error { return e.err }

// heat remembers the records of one Repository that proved hot.
type heat struct {
	mu sync.Mutex
	m  map[string]time.Time // key -> hot until
	// n is len(m), read without the lock: a Repository with no hot
	// record (the usual case) pays one atomic load per call.
	n atomic.Int64
	// readNS is a moving average of an optimistic read's duration, and
	// lockNS of taking an uncontended row lock (BEGIN and the locked read),
	// in nanoseconds: what a locked read's time is compared with to tell a
	// wait for another transaction.
	readNS, lockNS atomic.Int64
	// singleWriter: the database has one write lock for all records
	// (SQLite), so a wait for it says nothing about this record; only lost
	// races count.
	singleWriter bool
}

// hot reports whether key is hot at now.
func (h *heat) hot(key string, now func() time.Time) bool {
	if h.n.Load() == 0 {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	until, ok := h.m[key]
	if ok && !now().Before(until) {
		delete(h.m, key)
		h.n.Store(int64(len(h.m)))
		return false
	}
	return ok
}

// warm marks key hot until hotFor after now.
func (h *heat) warm(key string, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = make(map[string]time.Time)
	}
	if _, ok := h.m[key]; !ok && len(h.m) >= maxHot {
		for k, until := range h.m {
			if !now.Before(until) {
				delete(h.m, k)
			}
		}
		h.n.Store(int64(len(h.m)))
		if len(h.m) >= maxHot {
			return
		}
	}
	h.m[key] = now.Add(hotFor)
	h.n.Store(int64(len(h.m)))
}

// average moves the average in a by a sample d (weight 1/8).
func average(a *atomic.Int64, d time.Duration) {
	for {
		old := a.Load()
		next := int64(d)
		if old != 0 {
			next = old + (int64(d)-old)/8
		}
		if a.CompareAndSwap(old, next) {
			return
		}
	}
}

// noteLock records how long taking a row lock took, and reports whether it
// waited for another transaction: longer than the usual uncontended lock by
// lockWaitFloor and by half again. Locks that did not wait feed the average.
func (h *heat) noteLock(d time.Duration) bool {
	if h.singleWriter {
		return false
	}
	base := time.Duration(h.lockNS.Load())
	if base == 0 {
		// No uncontended lock measured yet: an optimistic read and a
		// round trip for BEGIN.
		base = 2 * time.Duration(h.readNS.Load())
	}
	if d > base+base/2+lockWaitFloor {
		return true
	}
	average(&h.lockNS, d)
	return false
}

// WithAdaptive turns adaptive Mutate on (the default) or off. With it,
// when an attempt of Mutate or Upsert loses a race (ErrStaleData, or the
// database aborted it), the next attempt runs at once, without the backoff,
// with the row locked as in MutateRowLocked; and the record stays hot in the
// Repository for 500 ms after the last sign of contention (a lost race, or
// a locked read that waited for another transaction), so its calls start
// locked and queue on the database instead of racing. Without contention
// it cools and Mutate is optimistic again. The errors, the version rule and
// the retry policy are those of Mutate, and fn runs again only after a lost
// race. MutateRowLocked is unaffected.
//
// A locked attempt holds the row lock while fn runs, so fn must not write
// the record through another connection (it has no transaction of its own
// to write through): that write would wait for the lock its own call holds.
// A locked attempt's fn runs for at most 200 ms; then the lock is released
// (Report's Released), the write fn waited with goes on, and the call goes
// on optimistic; if it then fails, its error says so.
//
// WithAdaptive(false) keeps Mutate optimistic: every attempt reads without
// a lock and a lost race waits for the retry policy's backoff. Choose it for
// an fn that must run without any lock held, or to measure the difference.
func WithAdaptive(on bool) Option {
	return func(o *options) error {
		o.adaptive = on
		return nil
	}
}
