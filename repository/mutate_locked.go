package repository

import (
	"context"
	"errors"
	"reflect"

	"github.com/gormlock/gormlock/internal/sqlitegate"
	"github.com/gormlock/gormlock/locking"
)

// MutateRowLocked is the pessimistic counterpart of Mutate: in one transaction
// it locks record id (LockRow), calls fn to change it in memory, writes it
// with Update (so its version still advances and optimistic readers see the
// change) and commits. No other writer can change the record between the
// read and the write, so it never fails with stale data; concurrent callers
// on the same record queue up on the lock instead of retrying.
//
// Lock options go with the other options: NoWait() fails at once with
// locking.ErrLocked when another transaction holds the lock, LockTimeout(d)
// gives up with locking.ErrLockTimeout; ForShare is refused (a shared lock would deadlock on the write). A deadlock or
// serialization failure the database reports anyway is retried from a fresh
// transaction under the retry policy (Retry, or the repository's); lock
// contention errors (ErrLocked, ErrLockTimeout) are returned, not retried.
//
// When ctx already carries a transaction, MutateRowLocked runs in it, takes the
// lock until that transaction ends, and does not retry (a deadlock aborts the
// caller's whole transaction: retry it around RunInTx, e.g. with
// locking.OnError and locking.IsRetryable).
//
// fn follows Mutate's rules: it must change neither the key nor the version,
// and its error is returned unwrapped, with nothing written.
func (r *Repository[T]) MutateRowLocked(ctx context.Context, id any, fn func(*T) error, opts ...LockedMutateOption) (*T, error) {
	if fn == nil {
		return nil, locking.Invalid("%s: MutateRowLocked: fn is nil", r.m.table)
	}
	id, err := r.m.normalizeID(id)
	if err != nil {
		return nil, err
	}
	cfg, err := r.lockedMutateConfig(opts)
	if err != nil {
		return nil, err
	}
	lc, err := r.lockConfig(cfg.lock)
	if err != nil {
		return nil, err
	}
	if lc.shared {
		return nil, locking.Invalid("%s: MutateRowLocked: ForShare cannot be used to write; MutateRowLocked takes an exclusive lock", r.m.table)
	}
	var out *T
	attempt := func(ctx context.Context) error {
		e, err := r.lockRow(ctx, id, lc)
		if err != nil {
			return err
		}
		if err := r.applyFn(ctx, e, id, fn); err != nil {
			return err
		}
		if err := r.Update(ctx, e); err != nil {
			return err
		}
		out = e
		return nil
	}
	var kc keyedCall
	keyed := func(ctx context.Context) error { return r.withOpKey(ctx, cfg.op, &kc, "mutate", id, attempt, &out) }
	rep := MutateReport{Table: r.m.table, ID: id, Op: OpMutateRowLocked}
	ctx, call := r.startCall(ctx, OpMutateRowLocked, id)
	if _, inTx := r.st.Conn(ctx); inTx {
		rep.Attempts = 1
		err = keyed(ctx)
		r.attempted(ctx, call, 1, true, err)
	} else {
		err = locking.OnError(ctx, cfg.retry, r.retriable(ctx, cfg, isLockRetryable), func(ctx context.Context) error {
			rep.Attempts++
			err := kc.attempted(cfg.op != nil, r.lockedTx(ctx, lc, keyed))
			r.attempted(ctx, call, rep.Attempts, true, err)
			return err
		})
	}
	rep.Locked = rep.Attempts
	return r.settle(ctx, call, cfg, &rep, &kc, out, err)
}

// applyFn calls the caller's fn on e, marking its error as an abort and
// refusing a change of the key or version.
func (r *Repository[T]) applyFn(ctx context.Context, e *T, id any, fn func(*T) error) error {
	rv := reflect.ValueOf(e).Elem()
	key, _ := r.idOf(ctx, rv)
	version := r.versionOf(ctx, rv)
	if err := fn(e); err != nil {
		return &abortError{err}
	}
	if k, _ := r.idOf(ctx, rv); !reflect.DeepEqual(k, key) || r.versionOf(ctx, rv) != version {
		return &abortError{locking.Invalid("%s: id=%v: the function changed the primary key or the version; it may change only other fields", r.m.table, id)}
	}
	return nil
}

// isLockRetryable reports whether a locked read-modify-write may run again:
// the database broke a deadlock or a serialization conflict by aborting it.
func isLockRetryable(err error) bool {
	if _, ok := err.(*abortError); ok {
		return false
	}
	if errors.Is(err, locking.ErrCommitUnknown) {
		return false
	}
	return errors.Is(err, locking.ErrDeadlock) || errors.Is(err, locking.ErrSerialization)
}

// lockedTx runs fn in a transaction of its own. On SQLite, NoWait and
// LockTimeout bound the wait for the write lock at BEGIN.
func (r *Repository[T]) lockedTx(ctx context.Context, lc lockConfig, fn func(ctx context.Context) error) error {
	return r.st.RunTx(ctx, r.st.Gorm, nil, sqlitegate.Wait{NoWait: lc.nowait, Limit: lc.timeout}, r.m.table+": MutateRowLocked", fn)
}
