package repository_test

// What a repository.Observer is told of Mutate, Upsert and MutateRowLocked
// calls, with a recording Observer: the library's call sites, without
// OpenTelemetry.

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/sqlitegate"
	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

// callRecorder is an Observer that writes down what it is told, one line per
// call of its methods. Every line after "start" checks that its context is
// the one StartCall returned ("ctx?" when it is not).
type callRecorder struct {
	mu     sync.Mutex
	lines  []string
	starts []repository.Call
}

// callKey is the context key under which StartCall marks the call's
// context.
type callKey struct{}

func (rec *callRecorder) add(ctx context.Context, op, line string) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if op != "" && ctx.Value(callKey{}) != op {
		line += " ctx?"
	}
	rec.lines = append(rec.lines, line)
}

// take returns the lines so far and forgets them.
func (rec *callRecorder) take() []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	out := rec.lines
	rec.lines = nil
	return out
}

func (rec *callRecorder) StartCall(ctx context.Context, c repository.Call) context.Context {
	rec.mu.Lock()
	rec.starts = append(rec.starts, c)
	rec.mu.Unlock()
	rec.add(ctx, "", fmt.Sprintf("start %s %s %s id=%v", c.System, c.Op, c.Table, c.ID))
	return context.WithValue(ctx, callKey{}, c.Op)
}

func (rec *callRecorder) Attempt(ctx context.Context, c repository.Call, a repository.Attempt) {
	rec.add(ctx, c.Op, fmt.Sprintf("attempt %d locked=%t %s", a.N, a.Locked, a.Outcome))
}

func (rec *callRecorder) EndCall(ctx context.Context, c repository.Call, end repository.CallEnd) {
	line := fmt.Sprintf("end %s: %d attempts, %d locked", c.Op, end.Report.Attempts, end.Report.Locked)
	for _, f := range []struct {
		on   bool
		name string
	}{{end.Report.Hot, "hot"}, {end.Report.Escalated, "escalated"}, {end.Report.Released, "released"}} {
		if f.on {
			line += ", " + f.name
		}
	}
	switch {
	case errors.Is(end.Err, locking.ErrRetriesExhausted):
		line += ", gave up"
	case end.Err != nil:
		line += ", error"
	}
	if end.Lease != repository.LeaseNone {
		line += ", lease " + end.Lease.String()
	}
	rec.add(ctx, c.Op, line)
}

func (rec *callRecorder) Wait(ctx context.Context, w repository.Wait) {
	line := fmt.Sprintf("wait %s %s %s", w.Kind, w.System, w.Table)
	if w.Duration <= 0 {
		line += " no duration"
	}
	if w.Err != nil {
		line += " error"
	}
	op, _ := ctx.Value(callKey{}).(string)
	rec.add(ctx, op, line)
}

func (rec *callRecorder) UnknownOutcome(ctx context.Context, u repository.UnknownOutcome) {
	op, _ := ctx.Value(callKey{}).(string)
	rec.add(ctx, op, fmt.Sprintf("unknown %s %s %v", u.System, u.Table, u.Err))
}

// systemName is the db.system.name the Observer is told for db.
func systemName(db *gorm.DB) string {
	switch db.Dialector.Name() {
	case "postgres":
		return "postgresql"
	case "mysql":
		return "mariadb" // the tests' server
	}
	return "sqlite"
}

// observedRepo returns a repository of accounts on db that reports to a
// new callRecorder.
func observedRepo(t *testing.T, db *gorm.DB, opts ...repository.Option) (*repository.Repository[fixtures.Account], *callRecorder) {
	t.Helper()
	rec := &callRecorder{}
	r, err := repository.New[fixtures.Account](db, append([]repository.Option{repository.WithObserver(rec)}, opts...)...)
	require.NoError(t, err)
	return r, rec
}

// writeWait is the wait line of a write on db outside a transaction: on
// SQLite the wait at the gate; none elsewhere.
func writeWait(db *gorm.DB) []string {
	if systemName(db) == "sqlite" {
		return []string{"wait sqlite_gate sqlite accounts"}
	}
	return nil
}

// lockedWait is the wait line of a locked attempt in gormlock's own
// transaction: on SQLite its BEGIN's wait at the gate (the read inside
// holds the write lock already), elsewhere its locked read's.
func lockedWait(db *gorm.DB) string {
	if s := systemName(db); s != "sqlite" {
		return "wait row_lock " + s + " accounts"
	}
	return "wait sqlite_gate sqlite accounts"
}

func lines(parts ...any) []string {
	var out []string
	for _, p := range parts {
		switch p := p.(type) {
		case string:
			out = append(out, p)
		case []string:
			out = append(out, p...)
		}
	}
	return out
}

// A conflict, then an escalation to the row lock, then a hot record's
// locked call: the Observer hears each attempt, wait and end, in order, on
// the context StartCall returned, with the record's normalised key. The
// negative control: another repository's writes, without an Observer, are
// not heard.
func TestObserverHearsMutate(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		sys := systemName(db)
		mine, rec := observedRepo(t, db)
		other := adaptiveRepo(t, db)
		a := newAccount(t, other, "ann", 0)
		require.Empty(t, rec.take(), "Create is not observed")

		calls := 0
		_, err := mine.Mutate(ctx, a.ID, func(x *fixtures.Account) error {
			calls++
			if calls == 1 {
				_, err := other.Mutate(context.Background(), a.ID, increment)
				require.NoError(t, err)
			}
			return increment(x)
		})
		require.NoError(t, err)
		require.Equal(t, lines(
			fmt.Sprintf("start %s mutate accounts id=%d", sys, a.ID),
			writeWait(db),
			"attempt 1 locked=false conflict",
			lockedWait(db),
			"attempt 2 locked=true applied",
			"end mutate: 2 attempts, 1 locked, escalated",
		), rec.take())
		require.Len(t, rec.starts, 1)
		assert.IsType(t, int64(0), rec.starts[0].ID, "the key as normalised")
		assert.False(t, rec.starts[0].Start.IsZero())

		// The record is hot now: the next call starts locked.
		_, err = mine.Mutate(ctx, int(a.ID), increment)
		require.NoError(t, err)
		require.Equal(t, lines(
			fmt.Sprintf("start %s mutate accounts id=%d", sys, a.ID),
			lockedWait(db),
			"attempt 1 locked=true applied",
			"end mutate: 1 attempts, 1 locked, hot",
		), rec.take())
	})
}

// A give-up: every attempt loses, and the call ends with
// ErrRetriesExhausted; adaptive Mutate is off so that each attempt loses
// the same way.
func TestObserverHearsGiveUp(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		mine, rec := observedRepo(t, db, repository.WithAdaptive(false))
		other := adaptiveRepo(t, db)
		a := newAccount(t, other, "ann", 0)

		policy := repository.Retry(locking.RetryPolicy{MaxAttempts: 2, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond})
		_, err := mine.Mutate(ctx, a.ID, func(x *fixtures.Account) error {
			_, err := other.Mutate(context.Background(), a.ID, increment)
			require.NoError(t, err)
			return increment(x)
		}, policy)
		require.ErrorIs(t, err, locking.ErrRetriesExhausted)
		require.Equal(t, lines(
			fmt.Sprintf("start %s mutate accounts id=%d", systemName(db), a.ID),
			writeWait(db),
			"attempt 1 locked=false conflict",
			writeWait(db),
			"attempt 2 locked=false conflict",
			"end mutate: 2 attempts, 0 locked, gave up",
		), rec.take())
	})
}

// Upsert of a new record, fn's own error, and MutateRowLocked: each is a
// call with its attempts.
func TestObserverHearsUpsertAndRowLocked(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		sys := systemName(db)
		mine, rec := observedRepo(t, db)

		_, err := mine.Upsert(ctx, int64(77), func() *fixtures.Account { return &fixtures.Account{Owner: "bob"} }, increment)
		require.NoError(t, err)
		require.Equal(t, lines(
			fmt.Sprintf("start %s upsert accounts id=77", sys),
			writeWait(db),
			"attempt 1 locked=false applied",
			"end upsert: 1 attempts, 0 locked",
		), rec.take())

		boom := errors.New("boom")
		_, err = mine.Mutate(ctx, int64(77), func(*fixtures.Account) error { return boom })
		require.ErrorIs(t, err, boom)
		require.Equal(t, lines(
			fmt.Sprintf("start %s mutate accounts id=77", sys),
			"attempt 1 locked=false failed",
			"end mutate: 1 attempts, 0 locked, error",
		), rec.take())

		_, err = mine.MutateRowLocked(ctx, int64(77), increment)
		require.NoError(t, err)
		require.Equal(t, lines(
			fmt.Sprintf("start %s mutateRowLocked accounts id=77", sys),
			lockedWait(db),
			"attempt 1 locked=true applied",
			"end mutateRowLocked: 1 attempts, 1 locked",
		), rec.take())

		// In the application's transaction: one attempt, no retry; on
		// SQLite the transaction's BEGIN waited at the gate before the
		// call began, and the locked read waits for nothing more.
		require.NoError(t, repository.RunInTx(ctx, db, func(ctx context.Context) error {
			_, err := mine.MutateRowLocked(ctx, int64(77), increment)
			return err
		}))
		want := lines(fmt.Sprintf("start %s mutateRowLocked accounts id=77", sys))
		if sys != "sqlite" {
			want = append(want, lockedWait(db))
		}
		want = append(want, "attempt 1 locked=true applied", "end mutateRowLocked: 1 attempts, 1 locked")
		require.Equal(t, want, rec.take())
	})
}

// Registered with ObserverPlugin, the Observer hears every repository New
// builds afterwards, and RunInTx's BEGIN on SQLite (with no table);
// WithObserver overrides it, WithObserver(nil) silences it; a repository
// built before the plugin hears nothing. A nil Observer is refused.
func TestObserverPlugin(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		sys := systemName(db)
		before := adaptiveRepo(t, db)
		a := newAccount(t, before, "ann", 0)
		rec, own := &callRecorder{}, &callRecorder{}
		require.ErrorIs(t, repository.ObserverPlugin(nil).Initialize(db), locking.ErrInvalidArgument)
		require.NoError(t, db.Use(repository.ObserverPlugin(rec)))

		for _, r := range []*repository.Repository[fixtures.Account]{
			before,
			adaptiveRepo(t, db, repository.WithObserver(nil)),
			adaptiveRepo(t, db, repository.WithObserver(own)),
			adaptiveRepo(t, db),
		} {
			_, err := r.Mutate(ctx, a.ID, increment)
			require.NoError(t, err)
		}
		mutate := lines(fmt.Sprintf("start %s mutate accounts id=%d", sys, a.ID), writeWait(db),
			"attempt 1 locked=false applied", "end mutate: 1 attempts, 0 locked")
		require.Equal(t, mutate, own.take())
		require.Equal(t, mutate, rec.take())

		require.NoError(t, repository.RunInTx(ctx, db, func(ctx context.Context) error { return nil }))
		if sys == "sqlite" {
			require.Equal(t, []string{"wait sqlite_gate sqlite "}, rec.take())
		} else {
			require.Empty(t, rec.take())
		}
		require.Empty(t, own.take())
	})
}

// increment adds 1 to an account's balance.
func increment(a *fixtures.Account) error {
	a.Balance++
	return nil
}

// Lease calls: a grant, a renewal, a release, a renewal of the released
// lease (expired), a grant refused while another holder has the record,
// and a write with the old lease after another holder took the record
// (fenced off). The waits are left out: how many statements a lease call
// sends differs by database.
func TestObserverHearsLeases(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		sys := systemName(db)
		mine, rec := observedRepo(t, db, repository.WithLeases())
		a := newAccount(t, adaptiveRepo(t, db), "ann", 0)
		leases := mine.Leases()

		_, alice, err := leases.Acquire(ctx, a.ID, "alice", repository.TTL(20*time.Second))
		require.NoError(t, err)
		require.NoError(t, leases.Renew(ctx, alice, repository.TTL(20*time.Second)))
		require.NoError(t, leases.Release(ctx, alice))
		require.ErrorIs(t, leases.Renew(ctx, alice), locking.ErrLeaseExpired)
		e, bob, err := leases.Acquire(ctx, a.ID, "bob", repository.TTL(20*time.Second))
		require.NoError(t, err)
		_, _, err = leases.Acquire(ctx, a.ID, "carol")
		require.ErrorIs(t, err, locking.ErrLeased)
		require.ErrorIs(t, leases.Update(ctx, e, alice), locking.ErrLeased)
		require.NoError(t, leases.Update(ctx, e, bob))

		var got []string
		for _, l := range rec.take() {
			if !strings.HasPrefix(l, "wait ") {
				got = append(got, l)
			}
		}
		start := func(op string) string { return fmt.Sprintf("start %s %s accounts id=%d", sys, op, a.ID) }
		require.Equal(t, []string{
			start("leaseAcquire"), "end leaseAcquire: 0 attempts, 0 locked, lease granted",
			start("leaseRenew"), "end leaseRenew: 0 attempts, 0 locked",
			start("leaseRelease"), "end leaseRelease: 0 attempts, 0 locked",
			start("leaseRenew"), "end leaseRenew: 0 attempts, 0 locked, error, lease expired",
			start("leaseAcquire"), "end leaseAcquire: 0 attempts, 0 locked, lease granted",
			start("leaseAcquire"), "end leaseAcquire: 0 attempts, 0 locked, error",
			start("leaseUpdate"), "end leaseUpdate: 0 attempts, 0 locked, error, lease fenced",
			start("leaseUpdate"), "end leaseUpdate: 0 attempts, 0 locked",
		}, got)
	})
}

// nopObserver is an Observer that does nothing.
type nopObserver struct{}

func (nopObserver) StartCall(ctx context.Context, _ repository.Call) context.Context { return ctx }
func (nopObserver) Attempt(context.Context, repository.Call, repository.Attempt)     {}
func (nopObserver) EndCall(context.Context, repository.Call, repository.CallEnd)     {}
func (nopObserver) Wait(context.Context, repository.Wait)                            {}
func (nopObserver) UnknownOutcome(context.Context, repository.UnknownOutcome)        {}

// markingObserver is nopObserver whose StartCall returns a context of its
// own, as a tracer does: one allocation per call.
type markingObserver struct{ nopObserver }

func (markingObserver) StartCall(ctx context.Context, c repository.Call) context.Context {
	return context.WithValue(ctx, callKey{}, mark)
}

// mark is markingObserver's context value, boxed once.
var mark any = "mark"

// The library's call sites allocate nothing for an Observer: a Mutate, a
// MutateRowLocked and a lease renewal allocate as much with an Observer
// that does nothing as without one. The negative control: an Observer
// whose StartCall makes a context allocates one more per call, and the
// count shows it.
func TestObserverCallSitesAllocateNothing(t *testing.T) {
	// SQLite's gate gives its writer connection back after 1 ms without
	// a write, and takes one again (allocating) at the next: a loaded
	// machine spaces calls by more than that, now and then. Kept for the
	// test, every call allocates what it does in a steady stream.
	defer sqlitegate.SetWriterLinger(time.Minute)()
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		observerAllocs(t, db)
	})
}

func observerAllocs(t *testing.T, db *gorm.DB) {
	ctx := context.Background()
	allocs := func(obs repository.Observer) float64 {
		r, err := repository.New[fixtures.Account](db, repository.WithObserver(obs), repository.WithLeases())
		require.NoError(t, err)
		a, b := newAccount(t, r, "ann", 0), newAccount(t, r, "bob", 0)
		_, l, err := r.Leases().Acquire(ctx, b.ID, "bob", repository.TTL(20*time.Second))
		require.NoError(t, err)
		call := func() {
			_, err := r.Mutate(ctx, a.ID, increment)
			require.NoError(t, err)
			_, err = r.MutateRowLocked(ctx, a.ID, increment)
			require.NoError(t, err)
			require.NoError(t, r.Leases().Renew(ctx, l, repository.TTL(20*time.Second)))
		}
		for range 20 {
			call() // the pools and caches settle
		}
		// The drivers' own goroutines allocate now and then (more under
		// -race, and more on a loaded machine): they only ever add, so
		// the least of five means is the call sites' own count.
		least := meanAllocs(200, call)
		for range 4 {
			least = min(least, meanAllocs(200, call))
		}
		return least
	}
	// The means are compared to within 0.9 of an allocation: one more
	// allocation in any one of the three calls (+1) fails, the drivers'
	// noise (up to 0.55 measured under CI's load) does not.
	none := allocs(nil)
	require.InDelta(t, none, allocs(nopObserver{}), 0.9)
	require.InDelta(t, none+3, allocs(markingObserver{}), 0.9, "the control: three calls, one context each")
}

// meanAllocs is the mean number of allocations of a run of f, as
// testing.AllocsPerRun counts them but not rounded down.
func meanAllocs(runs int, f func()) float64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	f()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return float64(after.Mallocs-before.Mallocs) / float64(runs)
}
