package repository

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/gormlock/gormlock/internal/store"
	"github.com/gormlock/gormlock/locking"
)

// upsertCall is one Mutate or Upsert call: what it was asked, and what it
// has done so far. Its attempts run in OnError's retry loop (run); each is
// a read, the caller's change and a write, optimistic or with the row locked
// (adaptive Mutate, see WithAdaptive).
type upsertCall[T any] struct {
	r      *Repository[T]
	id     any
	key    string // the record's name in the turns and the heat map
	create func() *T
	mutate func(*T) error
	kind   string // "mutate" or "upsert", for operation keys
	cfg    mutateConfig
	rep    MutateReport
	kc     keyedCall
	out    *T   // the record as written, once an attempt succeeded
	call   Call // what the Observer was told of the call
}

// run runs the attempts until one succeeds, fails for good or the retry
// policy gives up. Outside a transaction a deadlock or a serialization
// failure is retried too, and adaptive Mutate runs a hot record's attempts
// locked, as well as the attempt after a lost race.
func (c *upsertCall[T]) run(ctx context.Context, inTx bool) error {
	r := c.r
	retry := isConflict
	if !inTx {
		retry = func(err error) bool { return isConflictOrAborted(err) || isLockReleased(err) }
	}
	adaptive := r.heat != nil && !inTx
	locked := adaptive && r.heat.hot(c.key, time.Now)
	c.rep.Hot = locked
	err := locking.OnError(ctx, c.cfg.retry, r.retriable(ctx, c.cfg, retry), func(ctx context.Context) error {
		c.rep.Attempts++
		if locked {
			c.rep.Locked++
			err := c.kc.attempted(c.cfg.op != nil, c.lockedAttempt(ctx))
			r.attempted(ctx, c.call, c.rep.Attempts, true, err)
			if isLockReleased(err) {
				// fn held the row lock too long: it may be waiting for
				// it itself. The rest of the call is optimistic.
				locked, adaptive, c.rep.Released = false, false, true
				return locking.RetryNow(err)
			}
			return err
		}
		err := r.withOpKey(ctx, c.cfg.op, &c.kc, c.kind, c.id, c.optimistic, &c.out)
		r.attempted(ctx, c.call, c.rep.Attempts, false, err)
		if adaptive && isConflictOrAborted(err) {
			// Lost a race with another writer of the record: it is
			// hot, and the next attempt queues on its lock, at once.
			r.heat.warm(c.key, time.Now())
			locked, c.rep.Escalated = true, true
			return locking.RetryNow(err)
		}
		return err
	})
	if err != nil && c.rep.Released && !isLockReleased(err) {
		var ae *abortError
		if !errors.As(err, &ae) {
			err = &releasedError{err: err, table: r.m.table, id: c.id}
		}
	}
	return err
}

// optimistic is an attempt that reads without a lock and lets the version
// guard catch a writer that came between.
func (c *upsertCall[T]) optimistic(ctx context.Context) error { return c.attempt(ctx, nil) }

// lockedAttempt is an attempt in a transaction of its own whose read locks
// the row. A lock that took longer than an uncontended one waited for
// another writer: the record is still hot.
func (c *upsertCall[T]) lockedAttempt(ctx context.Context) error {
	r := c.r
	begin := time.Now()
	return r.lockedTx(ctx, lockConfig{}, func(ctx context.Context) error {
		return r.withOpKey(ctx, c.cfg.op, &c.kc, c.kind, c.id, func(ctx context.Context) error {
			return c.attempt(ctx, func() {
				if r.heat.noteLock(time.Since(begin)) {
					c.rep.Waited = true
					r.heat.warm(c.key, time.Now())
				}
			})
		}, &c.out)
	})
}

// attempt is one read-modify-write. With locked set its read locks the row
// (ctx then carries the transaction), and locked is called once the lock is
// held.
func (c *upsertCall[T]) attempt(ctx context.Context, locked func()) error {
	e, created, err := c.read(ctx, locked)
	if err != nil {
		return err
	}
	if locked == nil {
		if err := c.r.applyFn(ctx, e, c.id, c.mutate); err != nil {
			return err
		}
	} else {
		// Under the row lock, fn runs for at most lockedFnLimit: longer,
		// and the transaction is rolled back, which releases the lock (fn
		// may be waiting for it through another connection).
		release := store.ReleaseAfter(ctx, lockedFnLimit)
		err := c.r.applyFn(ctx, e, c.id, c.mutate)
		if release() {
			return &lockReleasedError{table: c.r.m.table, id: c.id}
		}
		if err != nil {
			return err
		}
	}
	if err := c.write(ctx, e, created); err != nil {
		return err
	}
	c.out = e
	return nil
}

// read loads the record, or builds it with create when it does not exist
// (created is then true).
func (c *upsertCall[T]) read(ctx context.Context, locked func()) (e *T, created bool, err error) {
	r := c.r
	switch {
	case locked != nil:
		e, err = r.lockRow(ctx, c.id, lockConfig{noKey: true})
		locked()
	case r.heat != nil && r.heat.lockNS.Load() == 0:
		// No uncontended lock measured yet: the read's time is the
		// estimate (see heat.noteLock).
		begin := time.Now()
		e, err = r.Get(ctx, c.id)
		if err == nil {
			average(&r.heat.readNS, time.Since(begin))
		}
	default:
		e, err = r.Get(ctx, c.id)
	}
	switch {
	case err == nil:
		return e, false, nil
	case errors.Is(err, locking.ErrNotFound) && c.create != nil:
	default:
		return nil, false, err
	}
	e = c.create()
	if e == nil {
		return nil, false, locking.Invalid("%s: Upsert id=%v: create returned nil", r.m.table, c.id)
	}
	if err := r.m.setKey(ctx, reflect.ValueOf(e).Elem(), c.id); err != nil {
		return nil, false, fmt.Errorf("%s: Upsert id=%v: set key: %w", r.m.table, c.id, err)
	}
	return e, true, nil
}

// write stores e: Create for a record read builds, Update for one it
// loaded. A lost race (another caller created id first, or deleted the
// record meanwhile) is a *conflictError, worth another attempt.
func (c *upsertCall[T]) write(ctx context.Context, e *T, created bool) error {
	r := c.r
	if !created {
		err := r.Update(ctx, e)
		if errors.Is(err, locking.ErrNotFound) && c.create != nil {
			return &conflictError{err} // deleted meanwhile: start over and create
		}
		return err
	}
	err := r.createInSavepoint(ctx, e)
	if !errors.Is(err, locking.ErrAlreadyExists) {
		return err
	}
	// Lost the race to create id, or violated another unique index? Only
	// the first is worth another attempt.
	_, exists, deleted, xerr := r.currentVersion(ctx, c.id)
	switch {
	case xerr != nil:
		return errors.Join(err, xerr)
	case deleted:
		// Not a race: a soft-deleted record holds the key.
		return &softDeletedError{table: r.m.table, id: c.id, err: err}
	case exists:
		return &conflictError{err}
	}
	return err
}
