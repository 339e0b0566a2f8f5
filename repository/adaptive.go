package repository

import (
	"sync"
	"sync/atomic"
	"time"
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
)

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

// WithAdaptive turns adaptive Mutate on or off (off by default). With it,
// when an attempt of Mutate or Upsert loses a race (ErrStaleData, or the
// database aborted it), the next attempt runs at once, without the backoff,
// with the row locked as in MutateRowLocked; and the record stays hot in the
// Repository for 500 ms after the last sign of contention (a lost race, or
// a locked read that waited for another transaction), so its calls start
// locked and queue on the database instead of racing. Without contention
// it cools and Mutate is optimistic again. Use it when several processes
// write the same records at once. The errors, the version rule and the
// retry policy are those of Mutate, and fn runs again only after a lost
// race. fn must not write the record through another connection or
// transaction: on a locked attempt that write would wait for the lock its
// own call holds. MutateRowLocked is unaffected.
func WithAdaptive(on bool) Option {
	return func(o *options) error {
		o.adaptive = on
		return nil
	}
}
