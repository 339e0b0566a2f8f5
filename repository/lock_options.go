package repository

import (
	"fmt"
	"math"
	"time"

	"github.com/gormlock/gormlock/internal/dialect"
	"github.com/gormlock/gormlock/locking"
)

// LockOption adjusts a locked read (LockRow, LockRows): how long to wait
// for a lock another transaction holds (NoWait, LockTimeout), and which
// lock to take (ForShare).
type LockOption interface {
	applyLock(*lockConfig) error
}

// LockWaitOption bounds the wait for a row lock: NoWait, LockTimeout. It
// adjusts LockRow, LockRows and MutateRowLocked.
type LockWaitOption interface {
	LockOption
	LockedMutateOption
}

// lockFunc is a LockOption made of a function.
type lockFunc func(*lockConfig) error

func (f lockFunc) applyLock(c *lockConfig) error { return f(c) }

// waitFunc is a LockWaitOption made of a function. Given to
// MutateRowLocked, it applies to the call's locked reads.
type waitFunc func(*lockConfig) error

func (f waitFunc) applyLock(c *lockConfig) error { return f(c) }

func (f waitFunc) applyLockedMutate(c *mutateConfig) error {
	c.lock = append(c.lock, f)
	return nil
}

type lockConfig struct {
	nowait  bool
	timeout time.Duration
	shared  bool
	// noKey: the caller will not change the record's key, so on
	// PostgreSQL the lock is FOR NO KEY UPDATE, the lock PostgreSQL's own
	// UPDATE of other columns takes: it keeps writers and lockers out but
	// lets other transactions insert rows whose foreign key references
	// the record (their check takes FOR KEY SHARE). Adaptive Mutate's
	// locked attempts take it, so that fn's inserts of such rows through
	// another connection do not wait for the call's own lock.
	noKey bool
}

// MaxLockTimeout is the longest LockTimeout: the databases take the timeout
// in milliseconds as a 32-bit integer.
const MaxLockTimeout = math.MaxInt32 * time.Millisecond

// NoWait makes a locked read fail at once, with an error matching
// locking.ErrLocked, when another transaction holds the lock, instead of
// waiting for it (SELECT ... FOR UPDATE NOWAIT on PostgreSQL; on SQLite, a
// write lock held by another connection; see LockTimeout for SQLite inside
// RunInTx).
func NoWait() LockWaitOption {
	return waitFunc(func(c *lockConfig) error {
		c.nowait = true
		return nil
	})
}

// LockTimeout makes a locked read wait at most about d for a lock another
// transaction holds, and then fail with an error matching
// locking.ErrLockTimeout. On PostgreSQL it sets lock_timeout for the locked
// read only (transaction-local, restored afterwards); on SQLite it bounds the
// wait for the write lock (busy_timeout). d must be positive and at most
// MaxLockTimeout; it is rounded up to whole milliseconds.
//
// On SQLite, a transaction begun by RunInTx on a database opened with opendb
// (BEGIN IMMEDIATE) already holds the write lock, after waiting for it at
// BEGIN with the connection's busy timeout; NoWait and LockTimeout then have
// nothing left to bound. Use MutateRowLocked, which bounds the wait at BEGIN.
func LockTimeout(d time.Duration) LockWaitOption {
	return waitFunc(func(c *lockConfig) error {
		if d <= 0 || d > MaxLockTimeout {
			return locking.Invalid("LockTimeout must be positive and at most %v, got %v", MaxLockTimeout, d)
		}
		c.timeout = d
		return nil
	})
}

// ForShare takes a shared lock (SELECT ... FOR SHARE) instead of an exclusive
// one: other transactions may also read the rows with ForShare, but nobody
// can change them until the transaction ends. SQLite cannot do this: there it
// is an error matching locking.ErrNotSupported.
func ForShare() LockOption {
	return lockFunc(func(c *lockConfig) error {
		c.shared = true
		return nil
	})
}

// lockConfig applies opts and checks them against the database's
// capabilities, so an option the database cannot honour is an error, never
// dropped.
func (r *Repository[T]) lockConfig(opts []LockOption) (lockConfig, error) {
	var c lockConfig
	if err := applyOpts(opts, &c, LockOption.applyLock); err != nil {
		return c, err
	}
	if c.nowait && c.timeout > 0 {
		return c, locking.Invalid("%s: NoWait and LockTimeout exclude each other", r.m.table)
	}
	for _, want := range []struct {
		on bool
		f  dialect.Feature
	}{{true, dialect.RowLock}, {c.shared, dialect.SharedLock}, {c.nowait, dialect.NoWait}, {c.timeout > 0, dialect.LockTimeout}} {
		if want.on {
			if err := r.m.caps.Check(want.f); err != nil {
				return c, fmt.Errorf("%s: %w", r.m.table, err)
			}
		}
	}
	return c, nil
}
