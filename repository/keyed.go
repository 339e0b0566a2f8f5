package repository

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/gormlock/gormlock/locking"
)

// Operation keys in calls that retry (the Mutate family, Apply): each
// attempt runs as an operation (withOpKey), an attempt whose outcome was
// unknown is retried — the key tells whether it was applied (retriable) —
// and the call remembers it (keyedCall).

// retriable returns which errors an attempt of a call with cfg may be
// re-run after: those retry says, and with an operation key an unknown
// outcome too, while ctx lasts — the key makes the repeat safe.
func (r *Repository[T]) retriable(ctx context.Context, cfg mutateConfig, retry func(error) bool) func(error) bool {
	if cfg.op == nil {
		return retry
	}
	return func(err error) bool {
		if _, ok := asAbort(err); ok {
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
		e, err := r.recordNow(ctx, prior, id)
		if err != nil {
			return err
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

// recordNow answers a repeat of prior, an applied operation on record id:
// the record as it is now (the operation's write, and any later ones). A
// record deleted (or soft-deleted) since gives a *locking.RecordGoneError:
// applied, nothing to show. A read that fails otherwise is an error
// matching locking.ErrCommitUnknown, never one that reads as "not applied":
// the operation was applied, and LookupOperation tells the caller so.
func (r *Repository[T]) recordNow(ctx context.Context, prior *Operation, id any) (*T, error) {
	e, err := r.Get(ctx, id)
	switch {
	case err == nil:
		return e, nil
	case errors.Is(err, locking.ErrNotFound):
		return nil, &locking.RecordGoneError{Table: r.m.table, ID: id, Key: prior.Key, Kind: prior.Kind, Version: prior.Version}
	}
	return nil, locking.Unknown(fmt.Errorf("%s: operation %q was applied (version %d), but reading the record now failed: %w", r.m.table, prior.Key, prior.Version, err))
}
