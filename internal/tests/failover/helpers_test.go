//go:build linux

package failover_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	pgopen "github.com/gormlock/gormlock/opendb/postgres"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

// Hang guards, not timing assertions.
const (
	opTimeout = 10 * time.Second // one write; longer than any fault sequence here
	pause     = 5 * time.Millisecond
)

// open opens dsn with postgres.Open, closed when the test ends.
func open(t *testing.T, dsn string) *gorm.DB {
	t.Helper()
	db, err := pgopen.Open(dsn)
	require.NoError(t, err)
	sqlDB, err := db.DB()
	require.NoError(t, err)
	sqlDB.SetMaxOpenConns(32)
	t.Cleanup(func() { _ = fixtures.Close(db) })
	return db
}

// migrated opens dsn and applies gormlock's and the example models'
// migrations.
func migrated(t *testing.T, ctx context.Context, dsn string) *gorm.DB {
	t.Helper()
	db := open(t, dsn)
	require.NoError(t, fixtures.Migrate(ctx, db))
	return db
}

func accounts(t *testing.T, db *gorm.DB) *repository.Repository[fixtures.Account] {
	t.Helper()
	r, err := repository.New[fixtures.Account](db)
	require.NoError(t, err)
	return r
}

func increment(a *fixtures.Account) error { a.Balance++; return nil }

// balance reads account id's balance.
func balance(t *testing.T, ctx context.Context, db *gorm.DB, id int64) int64 {
	t.Helper()
	var b []int64
	require.NoError(t, db.WithContext(ctx).Raw("SELECT balance FROM accounts WHERE id = ?", id).Scan(&b).Error)
	require.Len(t, b, 1)
	return b[0]
}

// waitFor polls cond until it holds or ctx ends.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(pause):
		}
	}
}

// outcome is what a call reported about its write.
type outcome int

const (
	applied outcome = iota
	notApplied
	unknown
)

func (o outcome) String() string { return [...]string{"applied", "not applied", "unknown"}[o] }

func outcomeOf(err error) outcome {
	switch {
	case err == nil:
		return applied
	case errors.Is(err, locking.ErrCommitUnknown):
		return unknown
	}
	return notApplied
}

// cause names what an error came from, for the figures: the SQLSTATE the
// server sent, or what the client saw.
func cause(err error) string {
	if err == nil {
		return "-"
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return "SQLSTATE " + pgErr.Code
	}
	s := err.Error()
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "context deadline"
	case errors.Is(err, syscall.ECONNREFUSED) || strings.Contains(s, "connection refused"):
		if strings.Contains(s, "read only") || strings.Contains(s, "read-only") {
			return "connect: refused / read-only"
		}
		return "connect: refused"
	case strings.Contains(s, "read only") || strings.Contains(s, "read-only"):
		return "connect: read-only"
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || strings.Contains(s, "EOF"):
		return "EOF"
	case errors.Is(err, syscall.ECONNRESET) || strings.Contains(s, "connection reset"):
		return "connection reset"
	case errors.Is(err, syscall.EPIPE) || strings.Contains(s, "broken pipe"):
		return "broken pipe"
	case strings.Contains(s, "conn closed"):
		return "conn closed"
	}
	if len(s) > 120 {
		s = s[:120]
	}
	return "other: " + s
}

// Phases of a failover run, by when a write began: before the fault; in
// the fault's window (the walreceiver stopped, or replay paused, and the
// primary still up); in the outage (from the end of the window, when the
// primary is about to be stopped, to the end of the promotion); after the
// promotion.
const (
	before int32 = iota
	window
	outage
	after
	phases
)

// writerMode is how a writer makes its increments.
type writerMode int

const (
	// keyedOnce: Mutate with an operation key and one attempt, so each
	// call's outcome is that of its one write. (With more attempts an
	// unknown outcome is retried inside the call: see
	// TestKeyedRetryKeepsAnUnknownOutcomeUnknown.)
	keyedOnce writerMode = iota
	// unkeyed: Mutate without a key, one attempt (the negative control).
	unkeyed
)

func (m writerMode) String() string { return [...]string{"keyed", "unkeyed"}[m] }

// op is one call a writer made: one logical increment.
type op struct {
	key     string
	phase   int32
	outcome outcome
	cause   string
	err     error
}

// writer increments its own account in a loop, one new logical operation
// (and operation key) per call, and records what every call reported.
type writer struct {
	id   int
	mode writerMode
	acct int64
	repo *repository.Repository[fixtures.Account]

	mu   sync.Mutex
	ops  []op
	acks [phases]atomic.Int64 // acknowledged calls by the phase they began in
}

// workload is a set of writers running until stopped.
type workload struct {
	writers []*writer
	phase   atomic.Int32
	stop    chan struct{}
	wg      sync.WaitGroup
}

// startWorkload creates one account per mode given and starts a writer on
// it, each with its own Repository (a shared one would queue its callers).
func startWorkload(t *testing.T, ctx context.Context, db *gorm.DB, modes ...writerMode) *workload {
	t.Helper()
	w := &workload{stop: make(chan struct{})}
	for i, m := range modes {
		repo := accounts(t, db)
		a := &fixtures.Account{Owner: fmt.Sprintf("w%d-%s", i, m)}
		require.NoError(t, repo.Create(ctx, a))
		w.writers = append(w.writers, &writer{id: i, mode: m, acct: a.ID, repo: repo})
	}
	for _, wr := range w.writers {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.run(ctx, wr)
		}()
	}
	t.Cleanup(w.halt)
	return w
}

var once = repository.Retry(locking.RetryPolicy{MaxAttempts: 1})

func (w *workload) run(ctx context.Context, wr *writer) {
	for i := 0; ; i++ {
		select {
		case <-w.stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		key := fmt.Sprintf("w%d/%d", wr.id, i)
		phase := w.phase.Load()
		octx, cancel := context.WithTimeout(ctx, opTimeout)
		var err error
		switch wr.mode {
		case keyedOnce:
			_, err = wr.repo.Mutate(octx, wr.acct, increment, repository.OpKey(key), once)
		case unkeyed:
			_, err = wr.repo.Mutate(octx, wr.acct, increment, once)
		}
		cancel()
		o := op{key: key, phase: phase, outcome: outcomeOf(err), cause: cause(err), err: err}
		wr.mu.Lock()
		wr.ops = append(wr.ops, o)
		wr.mu.Unlock()
		if err == nil {
			wr.acks[phase].Add(1)
			continue
		}
		select { // pacing while no server takes writes
		case <-w.stop:
			return
		case <-time.After(pause):
		}
	}
}

// acked returns the fewest acknowledged calls any writer began in phase.
func (w *workload) acked(phase int32) int64 {
	least := int64(-1)
	for _, wr := range w.writers {
		if n := wr.acks[phase].Load(); least < 0 || n < least {
			least = n
		}
	}
	return least
}

// ackedTotal returns the acknowledged calls begun in phase, over all writers.
func (w *workload) ackedTotal(phase int32) int64 {
	var n int64
	for _, wr := range w.writers {
		n += wr.acks[phase].Load()
	}
	return n
}

// halt stops the writers and waits for them.
func (w *workload) halt() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	w.wg.Wait()
}

// tally is the accounting of a run against the promoted server.
type tally struct {
	calls                      int
	acked, present, lost       int
	lostByPhase                [phases]int
	ackedByPhase               [phases]int
	failed                     int
	unknown                    int
	unknownIn, unknownOut      int // keyed writers, by LookupOperation
	unknownByPhase             [phases]int
	unkeyedUnknown             int
	unkeyedUnknownApplied      int // unkeyed writers: unknown outcomes that were applied
	repeatsApplied             int // keyed unknowns repeated with their key that applied now
	causes                     map[string]int
	samples                    map[string]string
	misreported                []string // calls reported as not applied whose write was applied
	keyedWriters, plainWriters int
}

func (ty tally) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "calls %d: acknowledged %d (present %d, lost %d; by phase before/window/outage/after %v, lost %v), "+
		"not applied %d, unknown %d (keyed: %d in, %d out; repeated with the key: %d applied now; unkeyed: %d, of which %d applied)",
		ty.calls, ty.acked, ty.present, ty.lost, ty.ackedByPhase, ty.lostByPhase, ty.failed, ty.unknown,
		ty.unknownIn, ty.unknownOut, ty.repeatsApplied, ty.unkeyedUnknown, ty.unkeyedUnknownApplied)
	b.WriteString("\n  outcomes by cause:")
	for _, k := range slices.Sorted(maps.Keys(ty.causes)) {
		fmt.Fprintf(&b, "\n    %-60s %5d   e.g. %q", k, ty.causes[k], ty.samples[k])
	}
	return b.String()
}

// account checks every call the writers made against db, the promoted
// server, and returns the figures. It fails the test on any call whose
// report the database contradicts: an acknowledged write that is missing
// (only when lossless), a write reported as not applied that was applied,
// a counter that does not equal the number of applied operations, an
// unknown outcome LookupOperation resolves differently from the table, and a
// repeat with the key that applies twice.
func account(t *testing.T, ctx context.Context, db *gorm.DB, w *workload, lossless bool) tally {
	t.Helper()
	ty := tally{causes: map[string]int{}, samples: map[string]string{}}
	var rows []struct {
		OpKey     string
		RecordKey string
	}
	require.NoError(t, db.WithContext(ctx).Raw("SELECT op_key, record_key FROM gormlock_operations").Scan(&rows).Error)
	present := map[string]string{}
	for _, r := range rows {
		present[r.OpKey] = r.RecordKey
	}
	for _, wr := range w.writers {
		wr.mu.Lock()
		ops := slices.Clone(wr.ops)
		wr.mu.Unlock()
		bal := balance(t, ctx, db, wr.acct)
		var acked, appliedKeys int64
		var unknowns []op
		for _, o := range ops {
			ty.calls++
			k := o.outcome.String() + " / " + o.cause
			if wr.mode == unkeyed {
				k = "unkeyed " + k
			}
			ty.causes[k]++
			if _, ok := ty.samples[k]; !ok && o.err != nil {
				s := o.err.Error()
				if len(s) > 300 {
					s = s[:300] + "..."
				}
				ty.samples[k] = s
			}
			rk, in := present[o.key]
			if in {
				require.Equal(t, fmt.Sprint(wr.acct), rk, "operation %s recorded for another record", o.key)
				appliedKeys++
			}
			switch o.outcome {
			case applied:
				acked++
				ty.acked++
				ty.ackedByPhase[o.phase]++
				if wr.mode == unkeyed {
					continue
				}
				if in {
					ty.present++
				} else {
					ty.lost++
					ty.lostByPhase[o.phase]++
					if lossless {
						t.Errorf("writer %d: operation %s was acknowledged and is missing after the failover", wr.id, o.key)
					}
				}
			case notApplied:
				ty.failed++
				if in {
					ty.misreported = append(ty.misreported, fmt.Sprintf("%s (%s): %v", o.key, wr.mode, o.err))
				}
			case unknown:
				ty.unknown++
				ty.unknownByPhase[o.phase]++
				if wr.mode == unkeyed {
					ty.unkeyedUnknown++
					continue
				}
				unknowns = append(unknowns, o)
				op, err := repository.LookupOperation(ctx, db, o.key)
				require.NoError(t, err)
				require.Equal(t, in, op != nil, "LookupOperation(%s) disagrees with the operation table", o.key)
				if op != nil {
					ty.unknownIn++
					require.Equal(t, fmt.Sprint(wr.acct), op.RecordKey)
				} else {
					ty.unknownOut++
				}
			}
		}
		if testing.Verbose() {
			var seq strings.Builder
			last := int32(-1)
			for _, o := range ops {
				if o.phase != last {
					fmt.Fprintf(&seq, " |%d| ", o.phase)
					last = o.phase
				}
				_, in := present[o.key]
				switch {
				case o.outcome == applied && wr.mode == unkeyed:
					seq.WriteByte('a')
				case o.outcome == applied && in:
					seq.WriteByte('.')
				case o.outcome == applied:
					seq.WriteByte('L')
				case o.outcome == unknown:
					seq.WriteByte('?')
				default:
					seq.WriteByte('x')
				}
			}
			t.Logf("writer %d: %s", wr.id, seq.String())
		}
		if wr.mode == unkeyed {
			require.True(t, lossless, "unkeyed writers are accounted by their counter, which needs a run without loss")
			ty.plainWriters++
			// Without keys the counter is all there is: it says how many
			// unknown outcomes were applied, never which.
			extra := bal - acked
			require.GreaterOrEqual(t, extra, int64(0), "writer %d (unkeyed): fewer increments than acknowledged", wr.id)
			var unk int64
			for _, o := range ops {
				if o.outcome == unknown {
					unk++
				}
			}
			require.LessOrEqual(t, extra, unk, "writer %d (unkeyed): more increments than acknowledged and unknown calls: a write reported as not applied was applied", wr.id)
			ty.unkeyedUnknownApplied += int(extra)
			continue
		}
		ty.keyedWriters++
		require.Equal(t, appliedKeys, bal, "writer %d: the counter must equal the number of applied operations (none doubled, none half-applied)", wr.id)
		// Repeat every unknown operation with its key: it applies at most
		// once, so only the ones that were out apply now.
		for _, o := range unknowns {
			_, err := wr.repo.Mutate(ctx, wr.acct, increment, repository.OpKey(o.key))
			require.NoError(t, err, "repeating %s", o.key)
		}
		after := balance(t, ctx, db, wr.acct)
		var outs int64
		for _, o := range unknowns {
			if _, in := present[o.key]; !in {
				outs++
			}
			op, err := repository.LookupOperation(ctx, db, o.key)
			require.NoError(t, err)
			require.NotNil(t, op, "%s applied after its repeat", o.key)
		}
		require.Equal(t, bal+outs, after, "writer %d: repeating the unknown operations applied exactly the ones that were out", wr.id)
		ty.repeatsApplied += int(outs)
	}
	return ty
}
