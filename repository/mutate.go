package repository

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/gormlock/gormlock/internal/store"
	"github.com/gormlock/gormlock/locking"
)

// abortError marks an error returned by the caller's function, so that it is
// never mistaken for a conflict and retried.
type abortError struct{ err error }

func (e *abortError) Error() string { return e.err.Error() }
func (e *abortError) Unwrap() error { return e.err }

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
// returns the entity as written, at its new version.
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
	return r.upsert(ctx, id, nil, fn, "mutate", opts)
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
// (the first call's write, and any later ones) and writes nothing — mutate
// may still run on a fresh read (the key is checked in the write's
// transaction), but what it changes is discarded, so keep side effects out
// of it — and an attempt whose outcome was unknown
// (locking.ErrCommitUnknown) is retried — safely, since the key tells. Without
// a key an unknown outcome is returned, never retried.
func (r *Repository[T]) Upsert(ctx context.Context, id any, create func() *T, mutate func(*T) error, opts ...MutateOption) (*T, error) {
	return r.upsert(ctx, id, create, mutate, "upsert", opts)
}

// upsert is Upsert and Mutate; kind names the call for operation keys.
func (r *Repository[T]) upsert(ctx context.Context, id any, create func() *T, mutate func(*T) error, kind string, opts []MutateOption) (*T, error) {
	if mutate == nil {
		return nil, locking.Invalid("%s: Upsert: mutate is nil", r.m.table)
	}
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
	ctx, call := r.startCall(ctx, kind, id)
	c := &upsertCall[T]{r: r, id: id, key: keyString(id), create: create, mutate: mutate, kind: kind, cfg: cfg,
		rep: MutateReport{Table: r.m.table, ID: id, Op: kind}, call: call}
	_, inTx := r.st.Conn(ctx)
	if !inTx {
		// Callers in this process take turns on the record instead of
		// racing (see turns). Not inside a transaction: one that already
		// holds row locks must not also wait on an in-process queue.
		tu, err := r.turns.take(ctx, c.key)
		if err != nil {
			r.finish(ctx, call, cfg, &c.rep, err)
			return nil, err
		}
		defer r.turns.give(tu)
	}
	err = c.run(ctx, inTx)
	return r.settle(ctx, call, cfg, &c.rep, &c.kc, c.out, err)
}

// conflictError marks a lost race other than a stale update (another caller
// created the record first, or deleted it) as worth another attempt. It is
// stale data too: someone else wrote first. It matches locking.ErrStaleData
// and the original error.
type conflictError struct{ err error }

func (e *conflictError) Error() string {
	return "gormlock: stale data: lost a race with another writer: " + e.err.Error()
}
func (e *conflictError) Unwrap() []error { return []error{locking.ErrStaleData, e.err} }

// retriable returns which errors an attempt of a call with cfg may be
// re-run after: those retry says, and with an operation key an unknown
// outcome too, while ctx lasts — the key makes the repeat safe.
func (r *Repository[T]) retriable(ctx context.Context, cfg mutateConfig, retry func(error) bool) func(error) bool {
	if cfg.op == nil {
		return retry
	}
	return func(err error) bool {
		if _, ok := err.(*abortError); ok {
			return false
		}
		return retry(err) || (errors.Is(err, locking.ErrCommitUnknown) && ctx.Err() == nil)
	}
}

// keyedCall is the state of one call with an operation key across its
// attempts.
type keyedCall struct {
	// uncertain: an earlier attempt's outcome is unknown (it may have
	// been applied), so no later failure may be reported as "not
	// applied" before the key has been asked about.
	uncertain bool
}

// attempted notes the outcome of a keyed attempt run in a transaction of
// its own: an unknown COMMIT makes the call uncertain. It returns err.
func (kc *keyedCall) attempted(keyed bool, err error) error {
	if keyed && errors.Is(err, locking.ErrCommitUnknown) {
		kc.uncertain = true
	}
	return err
}

// settle ends a call of the Mutate family with err, the retry loop's
// outcome: a failure after an attempt whose outcome was unknown is unknown
// too (the key was not asked about since, say because ctx ended); the
// caller's fn error comes back as fn returned it; the report goes to
// Report, the hook and the Observer.
func (r *Repository[T]) settle(ctx context.Context, call Call, cfg mutateConfig, rep *MutateReport, kc *keyedCall, out *T, err error) (*T, error) {
	if kc.uncertain && err != nil && !errors.Is(err, locking.ErrCommitUnknown) {
		err = locking.Unknown(err)
	}
	if ae, ok := err.(*abortError); ok {
		err = ae.err
	}
	r.finish(ctx, call, cfg, rep, err)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// withOpKey runs attempt, which writes record id and stores it in *out;
// with an operation key, as an operation (runOp), and a repeat of an applied
// operation stores the record as it is now in *out instead. After an
// attempt whose outcome was unknown, the next one first asks whether the
// operation was applied (lookupOperation, which waits for a transaction
// still holding the key): if it was, the call's answer is the record; if
// asking fails, the outcome stays unknown (locking.ErrCommitUnknown) — a
// failure to reach the database now says nothing about the earlier attempt.
func (r *Repository[T]) withOpKey(ctx context.Context, k *OperationKey, kc *keyedCall, kind string, id any, attempt func(context.Context) error, out **T) error {
	if k == nil {
		return attempt(ctx)
	}
	read := func(prior *Operation) error {
		e, err := r.Get(ctx, id)
		if err != nil {
			// Applied, but the record cannot be shown: never an error
			// that reads as "not applied" (a deleted record's
			// ErrNotFound, say). LookupOperation tells the caller.
			return locking.Unknown(fmt.Errorf("%s: operation %q was applied (version %d), but reading the record now failed: %w", r.m.table, k.key, prior.Version, err))
		}
		*out = e
		return nil
	}
	if kc.uncertain {
		prior, err := r.settleKey(ctx, k.key)
		if err != nil {
			return locking.Unknown(fmt.Errorf("%s: an earlier attempt's outcome is unknown, and asking whether operation %q was applied failed: %w", r.m.table, k.key, err))
		}
		if prior != nil {
			if prior.Table != r.m.table || prior.Kind != kind || prior.Fingerprint != k.fingerprint || prior.RecordKey != keyString(id) {
				return fmt.Errorf("%w: %w: operation key %q was used for %s of %s id=%s; a key names one operation",
					locking.ErrInvalidArgument, locking.ErrOperationKeyReused, k.key, prior.Kind, prior.Table, prior.RecordKey)
			}
			kc.uncertain = false
			if *out != nil && r.versionOf(ctx, reflectElem(*out)) == prior.Version {
				// The attempt whose outcome was unknown applied: its
				// entity is the call's answer, as it wrote it, not
				// whatever another writer made of the record since.
				return nil
			}
			return read(prior)
		}
		kc.uncertain = false // not applied, and now never will be
	}
	prior, err := r.runOp(ctx, *k, kind, keyString(id), func(ctx context.Context) (string, int64, error) {
		if err := attempt(ctx); err != nil {
			return "", 0, err
		}
		return keyString(id), r.versionOf(ctx, reflectElem(*out)), nil
	})
	if errors.Is(err, locking.ErrCommitUnknown) {
		kc.uncertain = true
	}
	if err != nil || prior == nil {
		return err
	}
	return read(prior)
}

// settleWait bounds how long a keyed call keeps asking whether an attempt
// whose outcome was unknown was applied, when its context has no deadline.
const settleWait = 30 * time.Second

// settleKey asks whether the operation with key was applied, and while
// asking fails — the server or the pooler in front of it unreachable for a
// while, as in a failover or a restart — asks again after a jittered
// backoff, until ctx ends (or settleWait passes, for a context without a
// deadline). Each failed question would otherwise use up one of the call's
// attempts, and a call would end "unknown" after a second-long outage
// while its context had seconds left.
func (r *Repository[T]) settleKey(ctx context.Context, key string) (*Operation, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, settleWait)
		defer cancel()
	}
	policy := locking.RetryPolicy{MaxAttempts: math.MaxInt32, BaseDelay: r.retry.BaseDelay, MaxDelay: r.retry.MaxDelay}
	var prior *Operation
	err := locking.OnError(ctx, policy, unreachable, func(ctx context.Context) error {
		var err error
		prior, err = r.ops().lookupOperation(ctx, key)
		return err
	})
	var exhausted *locking.RetryExhaustedError
	if errors.As(err, &exhausted) {
		err = exhausted.Last
	}
	return prior, err
}

// unreachable reports an error that says the database could not be asked —
// a connection refused, reset or lost, a server shutting down or
// restarting, a pooler that cannot log in to it — rather than an answer
// from it: asking again later may succeed.
func unreachable(err error) bool {
	if locking.IsContextError(err) || errors.Is(err, locking.ErrInvalidArgument) {
		return false
	}
	code := locking.Code(err)
	return code == "" || strings.HasPrefix(code, "08") || strings.HasPrefix(code, "57P") ||
		code == "53300" || code == "1040" || code == "1053"
}

// isConflict reports whether an attempt lost a race and may be re-run. An
// error from the caller's function is never retried, whatever it wraps.
func isConflict(err error) bool {
	if _, ok := err.(*abortError); ok {
		return false
	}
	return errors.Is(err, locking.ErrStaleData)
}

// isConflictOrAborted is isConflict, and also a deadlock or serialization
// failure the database broke by aborting the attempt (MySQL's 1213; on a
// Galera cluster, also a conflict with a write on another node): not
// applied, and worth another attempt from a fresh read — outside a
// transaction only, since inside one it aborted the caller's transaction.
func isConflictOrAborted(err error) bool { return isConflict(err) || isLockRetryable(err) }

// createInSavepoint creates e; inside a transaction it does so in a savepoint
// so a duplicate key does not abort the caller's transaction (PostgreSQL).
func (r *Repository[T]) createInSavepoint(ctx context.Context, e *T) error {
	db, inTx := r.st.Conn(ctx)
	if !inTx {
		return r.Create(ctx, e)
	}
	return store.InSavepoint(ctx, db, func() error { return r.Create(ctx, e) })
}
