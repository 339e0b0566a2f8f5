package locking_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gormlock/gormlock/locking"
)

// fastPolicy retries with waits short enough for tests but long enough to
// exercise the timer path.
var fastPolicy = locking.RetryPolicy{MaxAttempts: 5, BaseDelay: time.Microsecond, MaxDelay: 10 * time.Microsecond}

func staleAt(attempt int) error {
	return &locking.StaleDataError{Table: "accounts", ID: 1, Expected: int64(attempt), Actual: int64(attempt + 1), Op: "update"}
}

func TestDefaultRetryPolicy(t *testing.T) {
	p := locking.DefaultRetryPolicy()
	assert.Equal(t, locking.RetryPolicy{MaxAttempts: 10, BaseDelay: 2 * time.Millisecond, MaxDelay: 250 * time.Millisecond}, p)
	assert.Equal(t, locking.DefaultMaxAttempts, p.MaxAttempts)
	assert.Equal(t, locking.DefaultBaseDelay, p.BaseDelay)
	assert.Equal(t, locking.DefaultMaxDelay, p.MaxDelay)
	assert.NoError(t, p.Validate())
}

func TestRetryPolicyValidate(t *testing.T) {
	valid := []locking.RetryPolicy{
		locking.DefaultRetryPolicy(),
		{MaxAttempts: 1},
		{MaxAttempts: 1, BaseDelay: time.Second, MaxDelay: time.Second},
		{MaxAttempts: 3, BaseDelay: 0, MaxDelay: time.Second},
	}
	for _, p := range valid {
		assert.NoError(t, p.Validate(), "%+v", p)
	}

	invalid := []struct {
		name  string
		p     locking.RetryPolicy
		field string
	}{
		{"zero value", locking.RetryPolicy{}, "MaxAttempts"},
		{"zero attempts", locking.RetryPolicy{MaxAttempts: 0, BaseDelay: time.Millisecond, MaxDelay: time.Second}, "MaxAttempts"},
		{"negative attempts", locking.RetryPolicy{MaxAttempts: -3, BaseDelay: time.Millisecond, MaxDelay: time.Second}, "MaxAttempts"},
		{"negative base delay", locking.RetryPolicy{MaxAttempts: 3, BaseDelay: -time.Millisecond, MaxDelay: time.Second}, "BaseDelay"},
		{"max delay below base delay", locking.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Second, MaxDelay: time.Millisecond}, "MaxDelay"},
		{"negative max delay", locking.RetryPolicy{MaxAttempts: 3, BaseDelay: 0, MaxDelay: -1}, "MaxDelay"},
	}
	for _, tt := range invalid {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.p.Validate()
			require.ErrorIs(t, err, locking.ErrInvalidArgument)
			assert.Contains(t, err.Error(), tt.field)
			assertMatchesOnly(t, err, locking.ErrInvalidArgument)
		})
	}
}

// ceiling is min(max, base·2^(n-1)) computed without overflow.
func ceiling(base, maxDelay time.Duration, n int) time.Duration {
	c := base
	for i := 1; i < n; i++ {
		if c > maxDelay/2 {
			return maxDelay
		}
		c *= 2
	}
	return min(c, maxDelay)
}

func TestRetryPolicyDelayStaysWithinCeiling(t *testing.T) {
	policies := []locking.RetryPolicy{
		locking.DefaultRetryPolicy(),
		{MaxAttempts: 1, BaseDelay: time.Nanosecond, MaxDelay: time.Hour},
		{MaxAttempts: 1, BaseDelay: 3 * time.Nanosecond, MaxDelay: 3 * time.Nanosecond},
		{MaxAttempts: 1, BaseDelay: time.Second, MaxDelay: 1 << 62},
		{MaxAttempts: 1, BaseDelay: 7 * time.Millisecond, MaxDelay: 1000 * time.Hour},
		{MaxAttempts: 1, BaseDelay: 0, MaxDelay: time.Second},
		{MaxAttempts: 1, BaseDelay: 0, MaxDelay: 0},
	}
	const samples = 300
	for _, p := range policies {
		t.Run(fmt.Sprintf("base=%v,max=%v", p.BaseDelay, p.MaxDelay), func(t *testing.T) {
			for n := 1; n <= 40; n++ {
				hi := ceiling(p.BaseDelay, p.MaxDelay, n)
				for range samples {
					d := p.Delay(n)
					if d < 0 || d > hi {
						t.Fatalf("Delay(%d) = %v, want within [0, %v]", n, d, hi)
					}
				}
			}
		})
	}
}

func TestRetryPolicyDelayIsJittered(t *testing.T) {
	p := locking.RetryPolicy{MaxAttempts: 1, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond}
	var low, high int
	for range 2000 {
		if p.Delay(1) < 500*time.Microsecond {
			low++
		} else {
			high++
		}
	}
	// Uniform over [0, 1ms]: both halves are hit; a constant delay fails this.
	assert.Positive(t, low)
	assert.Positive(t, high)

	// Without a base delay there is never a wait.
	zero := locking.RetryPolicy{MaxAttempts: 1, BaseDelay: 0, MaxDelay: time.Second}
	for n := 1; n <= 40; n++ {
		require.Equal(t, time.Duration(0), zero.Delay(n))
	}
}

func TestRetryPolicyDelayCeilingGrows(t *testing.T) {
	// The ceiling before the 6th attempt is 1ms·2^5 = 32ms: over many samples
	// some wait exceeds the previous ceiling of 16ms, and none exceeds 32ms.
	p := locking.RetryPolicy{MaxAttempts: 1, BaseDelay: time.Millisecond, MaxDelay: time.Hour}
	var above bool
	for range 1000 {
		d := p.Delay(6)
		require.LessOrEqual(t, d, 32*time.Millisecond)
		if d > 16*time.Millisecond {
			above = true
		}
	}
	assert.True(t, above, "Delay(6) never went above Delay(5)'s ceiling")
}

func TestOnErrorStopsOnSuccess(t *testing.T) {
	calls := 0
	err := locking.OnError(context.Background(), fastPolicy, locking.IsRetryable, func(context.Context) error {
		calls++
		if calls < 3 {
			return staleAt(calls)
		}
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, 3, calls)
}

func TestOnErrorFirstCallSucceeds(t *testing.T) {
	calls := 0
	err := locking.OnError(context.Background(), fastPolicy, locking.IsRetryable, func(context.Context) error {
		calls++
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, 1, calls)
}

func TestOnErrorReturnsNonRetriableErrorAtOnce(t *testing.T) {
	notFound := &locking.NotFoundError{Table: "accounts", ID: 7}
	calls := 0
	err := locking.OnError(context.Background(), fastPolicy, locking.IsRetryable, func(context.Context) error {
		calls++
		return notFound
	})
	assert.True(t, err == notFound, "the non-retriable error is returned as is, got %v", err)
	assert.Equal(t, 1, calls)
}

func TestOnErrorPassesErrorToRetriable(t *testing.T) {
	sentinel := errors.New("transient")
	var seen []error
	calls := 0
	err := locking.OnError(context.Background(), fastPolicy, func(err error) bool {
		seen = append(seen, err)
		return errors.Is(err, sentinel)
	}, func(context.Context) error {
		calls++
		if calls == 1 {
			return sentinel
		}
		return staleAt(calls) // not retriable for this predicate
	})
	require.ErrorIs(t, err, locking.ErrStaleData)
	assert.NotErrorIs(t, err, locking.ErrRetriesExhausted)
	assert.Equal(t, 2, calls)
	require.Len(t, seen, 2)
	assert.Same(t, sentinel, seen[0])
}

func TestOnErrorExhaustsAttempts(t *testing.T) {
	for _, attempts := range []int{1, 2, 5} {
		t.Run(fmt.Sprint(attempts), func(t *testing.T) {
			p := fastPolicy
			p.MaxAttempts = attempts
			var last error
			calls := 0
			err := locking.OnError(context.Background(), p, locking.IsRetryable, func(context.Context) error {
				calls++
				last = staleAt(calls)
				return last
			})
			assert.Equal(t, attempts, calls)
			assertMatchesOnly(t, err, locking.ErrRetriesExhausted, locking.ErrStaleData)

			var ex *locking.RetryExhaustedError
			require.ErrorAs(t, err, &ex)
			assert.Equal(t, attempts, ex.Attempts)
			assert.Same(t, last, ex.Last, "the last attempt's error is kept, not the first")

			var stale *locking.StaleDataError
			require.ErrorAs(t, err, &stale)
			assert.Equal(t, int64(attempts), stale.Expected)
		})
	}
}

func TestOnErrorStopsWhenContextIsCancelledDuringWait(t *testing.T) {
	// The wait before the second attempt is drawn from [0, 1h]: the
	// cancellation, not the timer, must end it.
	p := locking.RetryPolicy{MaxAttempts: 5, BaseDelay: time.Hour, MaxDelay: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stale := staleAt(1)
	calls := 0
	err := locking.OnError(ctx, p, locking.IsRetryable, func(context.Context) error {
		calls++
		cancel()
		return stale
	})
	assert.Equal(t, 1, calls)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, locking.ErrStaleData)
	assert.NotErrorIs(t, err, locking.ErrRetriesExhausted)
	var got *locking.StaleDataError
	require.ErrorAs(t, err, &got)
	assert.Same(t, stale, got)
}

func TestOnErrorStopsWhenContextIsCancelledFromOutside(t *testing.T) {
	p := locking.RetryPolicy{MaxAttempts: 5, BaseDelay: time.Hour, MaxDelay: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	called := make(chan struct{})
	go func() {
		<-called
		cancel()
	}()
	calls := 0
	err := locking.OnError(ctx, p, locking.IsRetryable, func(context.Context) error {
		calls++
		if calls == 1 {
			close(called)
		}
		return staleAt(calls)
	})
	assert.Equal(t, 1, calls)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, locking.ErrStaleData)
}

func TestOnErrorDoesNotCallFnWhenContextIsDone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := 0
	err := locking.OnError(ctx, fastPolicy, locking.IsRetryable, func(context.Context) error {
		calls++
		return nil
	})
	assert.Equal(t, 0, calls)
	assert.Equal(t, context.Canceled, err)
}

func TestOnErrorPassesContextToFn(t *testing.T) {
	type key struct{}
	ctx := context.WithValue(context.Background(), key{}, "marker")
	var got []any
	err := locking.OnError(ctx, fastPolicy, locking.IsRetryable, func(ctx context.Context) error {
		got = append(got, ctx.Value(key{}))
		if len(got) < 2 {
			return staleAt(1)
		}
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, []any{"marker", "marker"}, got)
}

func TestOnErrorRejectsInvalidPolicy(t *testing.T) {
	for _, p := range []locking.RetryPolicy{
		{},
		{MaxAttempts: 3, BaseDelay: -1, MaxDelay: time.Second},
		{MaxAttempts: 3, BaseDelay: time.Second, MaxDelay: time.Millisecond},
	} {
		calls := 0
		err := locking.OnError(context.Background(), p, locking.IsRetryable, func(context.Context) error {
			calls++
			return nil
		})
		require.ErrorIs(t, err, locking.ErrInvalidArgument, "%+v", p)
		assert.Equal(t, 0, calls, "%+v", p)

		err = locking.RetryOnConflict(context.Background(), p, func(context.Context) error {
			calls++
			return nil
		})
		require.ErrorIs(t, err, locking.ErrInvalidArgument, "%+v", p)
		assert.Equal(t, 0, calls, "%+v", p)
	}
}

func TestRetryOnConflictRetriesStaleData(t *testing.T) {
	calls := 0
	err := locking.RetryOnConflict(context.Background(), fastPolicy, func(context.Context) error {
		calls++
		switch calls {
		case 1:
			return staleAt(1)
		case 2:
			return fmt.Errorf("repository: %w", staleAt(2)) // wrapped
		}
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, 3, calls)
}

func TestRetryOnConflictExhausts(t *testing.T) {
	calls := 0
	err := locking.RetryOnConflict(context.Background(), fastPolicy, func(context.Context) error {
		calls++
		return staleAt(calls)
	})
	assert.Equal(t, fastPolicy.MaxAttempts, calls)
	var ex *locking.RetryExhaustedError
	require.ErrorAs(t, err, &ex)
	assert.Equal(t, fastPolicy.MaxAttempts, ex.Attempts)
	assert.ErrorIs(t, err, locking.ErrStaleData)
}

func TestRetryOnConflictRetriesOnlyStaleData(t *testing.T) {
	others := map[string]error{
		// Retryable by IsRetryable, but not a conflict: RetryOnConflict leaves
		// the whole transaction's retry to the caller.
		"deadlock":       &locking.DatabaseError{Kind: locking.ErrDeadlock, Code: "40P01", Err: errors.New("deadlock detected")},
		"serialization":  &locking.DatabaseError{Kind: locking.ErrSerialization, Code: "40001", Err: errors.New("could not serialize")},
		"locked":         &locking.DatabaseError{Kind: locking.ErrLocked, Code: "SQLITE_BUSY", Err: errors.New("database is locked")},
		"not found":      &locking.NotFoundError{Table: "accounts", ID: 1},
		"commit unknown": locking.ClassifyCommit(errors.New("connection reset")),
		"plain":          errors.New("boom"),
	}
	for name, want := range others {
		t.Run(name, func(t *testing.T) {
			calls := 0
			err := locking.RetryOnConflict(context.Background(), fastPolicy, func(context.Context) error {
				calls++
				return want
			})
			assert.Equal(t, 1, calls)
			assert.True(t, err == want, "the error is returned as is, got %v", err)
		})
	}
}

func TestDelayDoesNotOverflowWithHugeCaps(t *testing.T) {
	uncapped := locking.RetryPolicy{MaxAttempts: 1, BaseDelay: time.Second, MaxDelay: math.MaxInt64}
	for n := 30; n <= 70; n++ {
		positive := false
		for range 200 {
			d := uncapped.Delay(n)
			require.GreaterOrEqual(t, d, time.Duration(0), "attempt %d", n)
			positive = positive || d > 0
		}
		require.True(t, positive, "attempt %d: the ceiling wrapped around to 0", n)
	}
	huge := locking.RetryPolicy{MaxAttempts: 1, BaseDelay: math.MaxInt64, MaxDelay: math.MaxInt64}
	require.NoError(t, huge.Validate())
	require.NotPanics(t, func() { _ = huge.Delay(1); _ = huge.Delay(5) })
}

// RetryNow retries without the policy's wait, counts the attempt, and never
// leaks its mark: a policy whose first wait is an hour finishes at once, and
// the exhausted error's Last is the error fn wrapped.
func TestOnErrorRetryNow(t *testing.T) {
	slow := locking.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Hour, MaxDelay: time.Hour}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	calls := 0
	err := locking.OnError(ctx, slow, locking.IsRetryable, func(context.Context) error {
		calls++
		if calls < 3 {
			return locking.RetryNow(staleAt(calls))
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 3, calls)
	require.NoError(t, ctx.Err(), "no wait ran")

	last := staleAt(9)
	err = locking.OnError(ctx, slow, locking.IsRetryable, func(context.Context) error { return locking.RetryNow(last) })
	var rex *locking.RetryExhaustedError
	require.ErrorAs(t, err, &rex)
	require.Equal(t, 3, rex.Attempts)
	require.Same(t, last, rex.Last, "the mark is removed")

	refused := errors.New("not retriable")
	err = locking.OnError(ctx, slow, locking.IsRetryable, func(context.Context) error { return locking.RetryNow(refused) })
	require.Same(t, refused, err, "a non-retriable error comes back as fn gave it, unmarked")
	require.NoError(t, locking.RetryNow(nil))
}
