package locking

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Defaults of RetryPolicy. They follow the Couchbase CAS guidance of a bounded
// retry loop (10 attempts) with a short exponential backoff.
const (
	// DefaultMaxAttempts is how many times a retrying helper runs its
	// function, the first run included.
	DefaultMaxAttempts = 10
	// DefaultBaseDelay is the backoff ceiling before the second attempt; it
	// doubles for every further attempt.
	DefaultBaseDelay = 2 * time.Millisecond
	// DefaultMaxDelay caps the backoff ceiling of any single wait.
	DefaultMaxDelay = 250 * time.Millisecond
)

// RetryPolicy bounds and spaces the attempts of a retrying helper. The wait
// before attempt n+1 is drawn uniformly from [0, min(MaxDelay,
// BaseDelay·2^(n-1))] ("full jitter"), so contenders that collided once spread
// out instead of colliding again in lockstep. The zero value is not valid; use
// DefaultRetryPolicy and change fields.
type RetryPolicy struct {
	MaxAttempts int           // attempts in all, the first included; at least 1
	BaseDelay   time.Duration // backoff ceiling before the second attempt; >= 0
	MaxDelay    time.Duration // cap of the backoff ceiling; >= BaseDelay
}

// DefaultRetryPolicy returns the policy used when none is given:
// DefaultMaxAttempts attempts, DefaultBaseDelay doubling up to
// DefaultMaxDelay, full jitter.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{MaxAttempts: DefaultMaxAttempts, BaseDelay: DefaultBaseDelay, MaxDelay: DefaultMaxDelay}
}

// Validate returns an error matching ErrInvalidArgument that names the first
// unusable field, or nil.
func (p RetryPolicy) Validate() error {
	switch {
	case p.MaxAttempts < 1:
		return Invalid("retry policy: MaxAttempts must be at least 1, got %d", p.MaxAttempts)
	case p.BaseDelay < 0:
		return Invalid("retry policy: BaseDelay must not be negative, got %v", p.BaseDelay)
	case p.MaxDelay < p.BaseDelay:
		return Invalid("retry policy: MaxDelay (%v) must not be below BaseDelay (%v)", p.MaxDelay, p.BaseDelay)
	}
	return nil
}

// Delay returns the jittered wait after the given failed attempt (1 for the
// first attempt).
func (p RetryPolicy) Delay(failedAttempt int) time.Duration {
	ceiling := p.BaseDelay
	for i := 1; i < failedAttempt && ceiling < p.MaxDelay; i++ {
		if ceiling > p.MaxDelay/2 {
			ceiling = p.MaxDelay // doubling would pass the cap (or overflow)
			break
		}
		ceiling *= 2
	}
	ceiling = min(ceiling, p.MaxDelay)
	switch {
	case ceiling <= 0:
		return 0
	case ceiling == math.MaxInt64:
		return time.Duration(rand.Int64())
	}
	return rand.N(ceiling + 1)
}

// OnError runs fn until it returns nil, returns an error for which retriable
// is false, the policy's attempts run out, or ctx is done. fn receives ctx.
//
// When the attempts run out it returns a *RetryExhaustedError that matches
// ErrRetriesExhausted and the last error. When ctx ends during a wait it
// returns an error matching both ctx.Err() and the last error. An invalid
// policy returns an error matching ErrInvalidArgument without calling fn.
//
// fn must redo the whole unit of work, including any read, on every call.
// An error fn wraps with RetryNow is retried without the policy's wait.
func OnError(ctx context.Context, p RetryPolicy, retriable func(error) bool, fn func(context.Context) error) error {
	if err := p.Validate(); err != nil {
		return err
	}
	var last error
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			if last == nil {
				return err
			}
			return fmt.Errorf("gormlock: retry stopped after %d attempts: %w; last error: %w", attempt-1, err, last)
		}
		err := fn(ctx)
		now := false
		if rn, ok := err.(*retryNowError); ok {
			err, now = rn.err, true
		}
		if err == nil || !retriable(err) {
			return err
		}
		last = err
		if attempt >= p.MaxAttempts {
			return &RetryExhaustedError{Attempts: attempt, Last: last}
		}
		if now {
			continue
		}
		if err := sleep(ctx, p.Delay(attempt)); err != nil {
			return fmt.Errorf("gormlock: retry stopped after %d attempts: %w; last error: %w", attempt, err, last)
		}
	}
}

// RetryNow marks err, returned by OnError's fn, to be retried at once,
// without the policy's wait: the next attempt will not race again (it will
// queue on a lock, say), so waiting would only add latency. The attempt
// still counts against the policy, and OnError returns err itself, never
// the mark. RetryNow(nil) is nil.
func RetryNow(err error) error {
	if err == nil {
		return nil
	}
	return &retryNowError{err: err}
}

type retryNowError struct{ err error }

func (e *retryNowError) Error() string { return e.err.Error() }
func (e *retryNowError) Unwrap() error { return e.err }

// RetryOnConflict is OnError retrying only errors that match ErrStaleData:
// the narrow helper for an optimistic read-modify-write.
//
//	err := locking.RetryOnConflict(ctx, locking.DefaultRetryPolicy(), func(ctx context.Context) error {
//		acct, err := accounts.Get(ctx, id) // re-read on every attempt
//		if err != nil {
//			return err
//		}
//		acct.Balance += 10
//		return accounts.Update(ctx, acct)
//	})
func RetryOnConflict(ctx context.Context, p RetryPolicy, fn func(context.Context) error) error {
	return OnError(ctx, p, isStale, fn)
}

func isStale(err error) bool { return errors.Is(err, ErrStaleData) }

// sleep waits d or until ctx is done, whichever comes first.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
