package repository

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/gormlock/gormlock/internal/sqlitegate"
	"github.com/gormlock/gormlock/internal/store"
	"github.com/gormlock/gormlock/locking"
)

// The Mutate family's path, top-down: Mutate, Upsert and MutateRowLocked
// each make a mutateCall and run it (do). do takes the record's turn in
// this process and runs the attempts under the retry policy (run). An
// attempt (attempt) is optimistic, or locked in a transaction of its own;
// either way, with an operation key it runs as an operation (withOpKey),
// and it is one readModifyWrite: read, change (the caller's fn), write.
// What an attempt's failure means — retry, escalate to a locked attempt, or
// give up — is decided in run alone; settle ends the call.

// mutateCall is one Mutate, Upsert or MutateRowLocked call: what it was
// asked, and what it has done so far.
type mutateCall[T any] struct {
	r      *Repository[T]
	id     any
	key    string    // the record's name in the turns and the heat map
	create func() *T // Upsert: builds a missing record; nil: it must exist
	fn     func(*T) error
	op     string // the call's name: OpMutate, OpUpsert or OpMutateRowLocked
	kind   string // its kind in the operation table: "mutate" or "upsert"
	cfg    mutateConfig
	// lc is a locked attempt's lock: the caller's options for
	// MutateRowLocked, FOR NO KEY UPDATE for adaptive Mutate and Upsert.
	lc lockConfig
	// pessimistic: every attempt is locked (MutateRowLocked); otherwise
	// attempts are optimistic unless adaptive Mutate escalates them.
	pessimistic bool
	rep         MutateReport
	kc          keyedCall
	lockBegin   time.Time // when the running locked attempt began
	out         *T        // the record as written, once an attempt succeeded
	call        Call      // what the Observer was told of the call
}

// Mutate is the optimistic read-modify-write of record id: it reads the
// record, calls fn to change it in memory, and writes it with Update. When the
// write finds the record changed meanwhile (locking.ErrStaleData), the whole
// cycle runs again from a fresh read, after a jittered backoff, up to the
// retry policy's attempts (locking.DefaultMaxAttempts unless changed). So
// does an attempt the database aborted to break a deadlock or a
// serialization conflict (locking.ErrDeadlock, locking.ErrSerialization:
// MySQL's 1213, a Galera cluster's conflict with another node), when ctx
// carries no transaction.
//
// fn may be called several times and must change only the entity it is given,
// and not its primary key or version (that is refused with an error matching
// locking.ErrInvalidArgument). When fn returns an error, Mutate returns it
// (unwrapped) without writing, and never retries it, whatever it wraps. A
// missing record gives an error matching locking.ErrNotFound. When the attempts
// run out, the error is a *locking.RetryExhaustedError that still matches
// locking.ErrStaleData and says how many attempts ran. ctx governs reads,
// writes and waits: cancelling it stops Mutate at once. On success Mutate
// returns the entity as written, at its new version. A change fn makes to
// a field tagged gormlock:"unversioned" is written guarded by the value fn
// read, and one of such fields only leaves the version as it is (see
// UnversionedTag).
//
// Outside a transaction, concurrent Mutate and Upsert calls on the same
// record through the same Repository take turns in this process instead of
// racing each other (only one of them could win each round); writers in other
// processes are still caught by the version guard and retried. fn must
// therefore not itself call Mutate or Upsert on the same record with a
// context that carries no transaction. Waiting for the turn ends with ctx.
//
// Mutate is adaptive unless the Repository was made WithAdaptive(false): an
// attempt that lost a race is followed at once by one that holds the row
// lock, and a record that proved hot starts locked, so writers in several
// processes queue on the row instead of racing (see WithAdaptive). fn must
// therefore not write the record itself. Report and WithMutateHook tell
// what a call did.
func (r *Repository[T]) Mutate(ctx context.Context, id any, fn func(*T) error, opts ...MutateOption) (*T, error) {
	if fn == nil {
		return nil, locking.Invalid("%s: Mutate: fn is nil", r.m.table)
	}
	return r.optimisticCall(ctx, id, nil, fn, OpMutate, opts)
}

// Upsert is "add or update": it loads record id, or when it does not
// exist builds it with create (whose key is then set to id), applies mutate,
// and writes it — Update for a loaded record, Create for a new one. When the
// write loses a race — the record changed (locking.ErrStaleData), or another
// caller created the same id first (locking.ErrAlreadyExists), or it was
// deleted meanwhile — the whole cycle runs again from a fresh read, under the
// same retry policy as Mutate.
//
// A nil create means "do not create": a missing record then gives an error
// matching locking.ErrNotFound. create returning nil is an error matching
// locking.ErrInvalidArgument. An error from mutate is returned unwrapped
// without writing. Inside RunInTx a losing Create is rolled back to a
// savepoint, so the surrounding transaction stays usable. A Create that fails
// on another unique index while id is still free is not a lost race: its error
// matching locking.ErrAlreadyExists is returned at once.
//
// The create path inserts id explicitly. For an auto-increment key on
// PostgreSQL that does not advance the identity sequence, so a later Create
// with a zero key can collide with it: use Upsert with keys the application
// chooses.
//
// With OpKey (for Mutate too), each attempt writes and records the key in
// one transaction, so the call applies at most once however often it is
// repeated: a repeat of an applied call returns the record as it is now
// (the first call's write, and any later ones; one deleted since gives a
// *locking.RecordGoneError, see OpKey) and writes nothing — mutate
// may still run on a fresh read (the key is checked in the write's
// transaction), but what it changes is discarded, so keep side effects out
// of it — and an attempt whose outcome was unknown
// (locking.ErrCommitUnknown) is retried — safely, since the key tells. Without
// a key an unknown outcome is returned, never retried.
func (r *Repository[T]) Upsert(ctx context.Context, id any, create func() *T, mutate func(*T) error, opts ...MutateOption) (*T, error) {
	if mutate == nil {
		return nil, locking.Invalid("%s: Upsert: mutate is nil", r.m.table)
	}
	return r.optimisticCall(ctx, id, create, mutate, OpUpsert, opts)
}

// MutateRowLocked is the pessimistic counterpart of Mutate: in one transaction
// it locks record id (LockRow), calls fn to change it in memory, writes it
// with Update (so its version still advances and optimistic readers see the
// change, unless fn changed only fields tagged gormlock:"unversioned") and
// commits. No other writer can change the record between the
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
	c := &mutateCall[T]{r: r, id: id, fn: fn, op: OpMutateRowLocked, kind: OpMutate, cfg: cfg, lc: lc, pessimistic: true}
	return c.do(ctx)
}

// optimisticCall makes and runs a Mutate (create nil) or Upsert call.
func (r *Repository[T]) optimisticCall(ctx context.Context, id any, create func() *T, fn func(*T) error, op string, opts []MutateOption) (*T, error) {
	id, err := r.m.normalizeID(id)
	if err != nil {
		return nil, err
	}
	cfg, err := r.mutateConfig(opts)
	if err != nil {
		return nil, err
	}
	if len(cfg.lock) > 0 {
		return nil, locking.Invalid("%s: lock options apply to MutateRowLocked; Mutate and Upsert take no locks", r.m.table)
	}
	c := &mutateCall[T]{r: r, id: id, create: create, fn: fn, op: op, kind: op, cfg: cfg, lc: lockConfig{noKey: true}}
	return c.do(ctx)
}

// do runs the call: outside a transaction, Mutate and Upsert first take
// the record's turn in this process (see turns) — not inside one, since a
// transaction that already holds row locks must not also wait on an
// in-process queue — then the attempts, then settle.
func (c *mutateCall[T]) do(ctx context.Context) (*T, error) {
	r := c.r
	c.key = keyString(c.id)
	c.rep = MutateReport{Table: r.m.table, ID: c.id, Op: c.op}
	ctx, c.call = r.startCall(ctx, c.op, c.id)
	_, inTx := r.st.Pool(ctx)
	if !inTx && !c.pessimistic {
		tu, err := r.turns.take(ctx, c.key)
		if err != nil {
			r.finish(ctx, c.call, c.cfg, &c.rep, err)
			return nil, err
		}
		defer r.turns.give(tu)
	}
	return c.settle(ctx, c.run(ctx, inTx))
}

// run runs the attempts until one succeeds, fails for good or the retry
// policy gives up, and decides after each failed one whether to retry and
// how: a lost race (stale data) is retried; outside a transaction so is a
// deadlock or a serialization failure the database broke by aborting the
// attempt; with an operation key, an unknown outcome too (the key tells,
// see retriable). Adaptive Mutate escalates: after a lost race, and for a
// record that proved hot from the start, attempts hold the row lock.
// MutateRowLocked's attempts are all locked; inside the caller's
// transaction it makes one attempt (a deadlock aborted the caller's
// transaction: nothing to retry in it).
func (c *mutateCall[T]) run(ctx context.Context, inTx bool) error {
	r := c.r
	if c.pessimistic {
		if inTx {
			c.rep.Attempts, c.rep.Locked = 1, 1
			err := c.attempt(ctx, true, true)
			r.attempted(ctx, c.call, 1, true, err)
			return err
		}
		defer func() { c.rep.Locked = c.rep.Attempts }()
		return locking.OnError(ctx, c.cfg.retry, r.retriable(ctx, c.cfg, isLockRetryable), func(ctx context.Context) error {
			c.rep.Attempts++
			err := c.kc.attempted(c.cfg.op != nil, c.attempt(ctx, true, false))
			r.attempted(ctx, c.call, c.rep.Attempts, true, err)
			return err
		})
	}
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
			err := c.kc.attempted(c.cfg.op != nil, c.attempt(ctx, true, false))
			r.attempted(ctx, c.call, c.rep.Attempts, true, err)
			if isLockReleased(err) {
				// fn held the row lock too long: it may be waiting for
				// it itself. The rest of the call is optimistic.
				locked, adaptive, c.rep.Released = false, false, true
				return locking.RetryNow(err)
			}
			return err
		}
		err := c.attempt(ctx, false, inTx)
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

// attempt is one attempt: a readModifyWrite, as an operation when the call
// has a key. A locked attempt runs in a transaction of its own (inTx: in
// the caller's, which MutateRowLocked was given), whose read locks the row.
func (c *mutateCall[T]) attempt(ctx context.Context, locked, inTx bool) error {
	keyed := func(ctx context.Context) error {
		return c.r.withOpKey(ctx, c.cfg.op, &c.kc, c.kind, c.id, func(ctx context.Context) error {
			return c.readModifyWrite(ctx, locked)
		}, &c.out)
	}
	if !locked || inTx {
		return keyed(ctx)
	}
	c.lockBegin = time.Now()
	return c.r.lockedTx(ctx, c.lc, c.ownStatements(), keyed)
}

// ownStatements reports whether a locked attempt of the call sends only
// gormlock's statements in its transaction: not when the model's hooks
// run in it (update hooks, AfterFind), nor when GORM's own callbacks,
// which an application may extend, run a statement of the attempt — the
// read of a model gormlock reads through GORM (no selectSQL), and an
// Upsert's Create.
func (c *mutateCall[T]) ownStatements() bool {
	h, m := c.r.m.hooks, c.r.m
	return !h.update() && !h.afterFind && m.selectSQL != "" && c.create == nil
}

// readModifyWrite reads the record (locked: locking its row, in the
// transaction of ctx), lets the caller's function change it, and writes it.
func (c *mutateCall[T]) readModifyWrite(ctx context.Context, locked bool) error {
	e, created, err := c.read(ctx, locked)
	if err != nil {
		return err
	}
	read := c.r.readValues(ctx, reflect.ValueOf(e).Elem())
	if err := c.change(ctx, e, locked); err != nil {
		return err
	}
	if err := c.write(ctx, e, created, read); err != nil {
		return err
	}
	c.out = e
	return nil
}

// read loads the record, or builds it with create when it does not exist
// (created is then true). A locked read of adaptive Mutate that took longer
// than an uncontended one waited for another writer: the record is still
// hot.
func (c *mutateCall[T]) read(ctx context.Context, locked bool) (e *T, created bool, err error) {
	r := c.r
	switch {
	case locked:
		e, err = r.lockRow(ctx, c.id, c.lc)
		if !c.pessimistic && r.heat.noteLock(time.Since(c.lockBegin)) {
			c.rep.Waited = true
			r.heat.warm(c.key, time.Now())
		}
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

// change calls the caller's fn on e, marking its error as an abort and
// refusing a change of the key or the version. In adaptive Mutate's locked
// attempt fn runs for at most lockedFnLimit: longer, and the transaction is
// rolled back, which releases the lock (fn may be waiting for it through
// another connection).
func (c *mutateCall[T]) change(ctx context.Context, e *T, locked bool) error {
	r := c.r
	if !locked || c.pessimistic {
		return r.applyFn(ctx, e, c.id, c.fn)
	}
	release := store.ReleaseAfter(ctx, lockedFnLimit)
	stopped := false // release called: a second call would wait forever
	defer func() {
		if !stopped {
			release() // fn panicked: no rollback from the timer after RunTx's own
		}
	}()
	err := r.applyFn(ctx, e, c.id, c.fn)
	stopped = true
	if release() {
		return &lockReleasedError{table: r.m.table, id: c.id}
	}
	return err
}

// write stores e with one guarded statement: Create for a record read
// built, Update for one it loaded — with the unversioned fields fn changed
// (read holds the values before fn), guarded by the values read, so that a
// change an Apply made since is never overwritten (a miss is stale data,
// retried); when fn changed unversioned fields only, the version stays as
// it is (writeUnversioned), as Apply's does. A lost race (another caller created id first, or deleted the
// record meanwhile, while Upsert may create it) is a *conflictError, worth
// another attempt.
func (c *mutateCall[T]) write(ctx context.Context, e *T, created bool, read []any) error {
	r := c.r
	if !created {
		var wc writeConfig
		if read != nil {
			wc.guard = r.changedUnversioned(ctx, reflect.ValueOf(e).Elem(), read)
		}
		var err error
		if wc.guard != nil && wc.guard.only && !r.m.hooks.update() {
			err = r.writeUnversioned(ctx, e, wc.guard) // the version stays
		} else {
			err = r.guardedWrite(ctx, e, kindUpdate, wc)
		}
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

// settle ends the call with err, the attempts' outcome: a failure after an
// attempt whose outcome was unknown is unknown too (the key was not asked
// about since, say because ctx ended); the caller's fn error comes back as
// fn returned it; the report goes to Report, the hook and the Observer.
func (c *mutateCall[T]) settle(ctx context.Context, err error) (*T, error) {
	if ae, ok := asAbort(err); ok {
		err = ae.err
	}
	if c.kc.uncertain && err != nil && !errors.Is(err, locking.ErrCommitUnknown) {
		err = locking.Unknown(err)
	}
	c.r.finish(ctx, c.call, c.cfg, &c.rep, err)
	if err != nil {
		return nil, err
	}
	return c.out, nil
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

// lockedTx runs fn in a transaction of its own. On SQLite, NoWait and
// LockTimeout bound the wait for the write lock at BEGIN.
//
// When its statements are all gormlock's own (own; a hook's would run in
// it too), on SQLite it runs on the gate's writer connection, its
// statements prepared (see sqlitegate's "Transactions on the writer
// connection").
func (r *Repository[T]) lockedTx(ctx context.Context, lc lockConfig, own bool, fn func(ctx context.Context) error) error {
	return r.st.RunTx(ctx, r.st.Gorm, nil, sqlitegate.Wait{NoWait: lc.nowait, Limit: lc.timeout, OnWriter: own}, r.m.table+": MutateRowLocked", fn)
}

// createInSavepoint creates e; inside a transaction it does so in a savepoint
// so a duplicate key does not abort the caller's transaction (PostgreSQL).
func (r *Repository[T]) createInSavepoint(ctx context.Context, e *T) error {
	db, inTx := r.st.Conn(ctx)
	if !inTx {
		return r.Create(ctx, e)
	}
	return store.InSavepoint(ctx, db, func() error { return r.Create(ctx, e) })
}
