//go:build linux

package pgbouncer_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/internal/tests/pgbouncer"
	"github.com/gormlock/gormlock/internal/tests/pgpair"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

// The workload of a fault run. Hang guards and pacing, not timing
// assertions.
const (
	writers     = 8
	rows        = 50
	callTimeout = 5 * time.Second       // each call's context
	errorPause  = 20 * time.Millisecond // after a failed call, while nothing answers
	warmUp      = 2 * time.Second       // writes before the fault, at least
	coolDown    = 3 * time.Second       // writes after the recovery, at least
	minAcks     = 10                    // acknowledged calls per writer before the fault and after the recovery
	runLimit    = 100 * time.Second     // one run, all in: well under 2 minutes
)

// TestFaults: 8 writers, through the PgBouncer of one mode, make keyed
// increments (Mutate +1 on one of 50 rows, a fresh operation key per call,
// a 5 s context per call; 4 writers per pool, as two processes) for several
// seconds around a fault:
//
//   - kill-pgbouncer: PgBouncer killed with kill -9 and started again 0.5 s
//     later (its pid file removed);
//   - restart-postgres-fast / -immediate: the server behind PgBouncer
//     stopped with pg_ctl stop -m fast / -m immediate and started again 1 s
//     later (server_login_retry = 1).
//
// Afterwards, on a direct connection, every call is checked against the
// operation table and the rows: every acknowledged key present (none lost);
// every call that returned an error settled by LookupOperation (the unknown
// ones, and the definite ones, which must not be applied); each row equal
// to the number of its applied keys (none applied twice) and their sum equal
// to all applied keys. The number of unknown outcomes that were not applied
// ("false unknowns") is reported, not asserted.
func TestFaults(t *testing.T) {
	restartServer := func(mode pgpair.StopMode) func(ctx context.Context, c *pgbouncer.Cluster, _ pgbouncer.Mode) error {
		return func(ctx context.Context, c *pgbouncer.Cluster, _ pgbouncer.Mode) error {
			return c.RestartServer(ctx, mode, time.Second)
		}
	}
	killBouncer := func(ctx context.Context, c *pgbouncer.Cluster, mode pgbouncer.Mode) error {
		return c.RestartBouncer(ctx, mode, 500*time.Millisecond)
	}
	faults := []struct {
		name   string
		inject func(ctx context.Context, c *pgbouncer.Cluster, mode pgbouncer.Mode) error
	}{
		{"kill-pgbouncer", killBouncer},
		{"restart-postgres-fast", restartServer(pgpair.Fast)},
		{"restart-postgres-immediate", restartServer(pgpair.Immediate)},
	}
	var results []tally
	for _, mode := range pgbouncer.Modes {
		for _, f := range faults {
			name := string(mode) + "/" + f.name
			t.Run(name, func(t *testing.T) {
				ty := runFault(t, mode, func(ctx context.Context, c *pgbouncer.Cluster) error { return f.inject(ctx, c, mode) })
				ty.name = name
				results = append(results, ty)
			})
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-38s %6s %6s %7s %5s %16s %6s %8s %8s %8s",
		"fault", "calls", "acked", "present", "lost", "unknown (in/out)", "false", "definite", "resumed", "gap")
	for _, r := range results {
		fmt.Fprintf(&b, "\n%-38s %6d %6d %7d %5d %16s %6d %8d %8v %8v", r.name, r.calls, r.acked, r.present, r.lost,
			fmt.Sprintf("%d (%d/%d)", r.unknownIn+r.unknownOut, r.unknownIn, r.unknownOut), r.unknownOut, r.definite,
			r.resumed.Round(10*time.Millisecond), r.gap.Round(10*time.Millisecond))
	}
	t.Logf("summary (present = keys applied; false = unknown outcomes not applied; resumed = when the first write begun after the fault was over was acknowledged, from the fault's beginning; gap = longest time without an acknowledgement):%s", b.String())
}

// call is one Mutate a writer made: one logical increment with its key.
type call struct {
	key          string
	row          int64
	err          error
	began, ended time.Time
}

// workload is the writers of one run.
type workload struct {
	stop chan struct{}
	wg   sync.WaitGroup
	// after holds the time the fault was over (0 before): calls begun
	// after it count towards the writers' acknowledgements after the fault.
	after atomic.Int64

	mu    sync.Mutex
	calls []call
	// acks[w][0] are writer w's acknowledged calls begun before the fault,
	// acks[w][1] those begun after it was over.
	acks [writers][2]int
}

// startWriters starts the writers, writer w on repos[w%2].
func startWriters(ctx context.Context, repos [2]*repository.Repository[fixtures.Account], ids []int64, faultBegan *atomic.Int64) *workload {
	w := &workload{stop: make(chan struct{})}
	for id := range writers {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			repo := repos[id%2]
			for i := 0; ; i++ {
				select {
				case <-w.stop:
					return
				case <-ctx.Done():
					return
				default:
				}
				c := call{key: fmt.Sprintf("w%d-%d", id, i), row: ids[rand.IntN(len(ids))], began: time.Now()}
				cctx, cancel := context.WithTimeout(ctx, callTimeout)
				_, c.err = repo.Mutate(cctx, c.row, increment, repository.OpKey(c.key))
				cancel()
				c.ended = time.Now()
				w.mu.Lock()
				w.calls = append(w.calls, c)
				if c.err == nil {
					switch after := w.after.Load(); {
					case after != 0 && c.began.UnixNano() >= after:
						w.acks[id][1]++
					case faultBegan.Load() == 0:
						w.acks[id][0]++
					}
				}
				w.mu.Unlock()
				if c.err != nil {
					select { // pacing while nothing answers
					case <-w.stop:
						return
					case <-time.After(errorPause):
					}
				}
			}
		}()
	}
	return w
}

// fewestAcks returns the fewest acknowledged calls any writer made in
// period p (0 before the fault, 1 after it).
func (w *workload) fewestAcks(p int) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	least := -1
	for _, a := range w.acks {
		if least < 0 || a[p] < least {
			least = a[p]
		}
	}
	return least
}

func (w *workload) halt() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	w.wg.Wait()
}

// waitUntil polls cond until it holds; it fails the test when ctx ends.
func waitUntil(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// runFault runs the workload around one fault on a cluster of its own and
// checks every call; see TestFaults.
func runFault(t *testing.T, mode pgbouncer.Mode, inject func(ctx context.Context, c *pgbouncer.Cluster) error) tally {
	begin := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), runLimit)
	defer cancel()
	c := pgbouncer.Start(t, pgbouncer.Options{})
	name := c.CreateDatabase(t)
	direct := open(t, c.DirectDSN(name))
	require.NoError(t, fixtures.Migrate(ctx, direct))
	setup := accounts(t, direct)
	ids := make([]int64, rows)
	for i := range ids {
		a := &fixtures.Account{Owner: fmt.Sprintf("row%d", i)}
		require.NoError(t, setup.Create(ctx, a))
		ids[i] = a.ID
	}
	dsn := c.DSN(mode, name)
	repos := [2]*repository.Repository[fixtures.Account]{accounts(t, open(t, dsn)), accounts(t, open(t, dsn))}

	var faultBegan atomic.Int64
	w := startWriters(ctx, repos, ids, &faultBegan)
	defer w.halt()
	t.Logf("[+%v] %d writers through the %s-mode PgBouncer", since(begin), writers, mode)
	warm := time.Now()
	waitUntil(t, ctx, "writes before the fault", func() bool {
		return time.Since(warm) >= warmUp && w.fewestAcks(0) >= minAcks
	})

	t.Logf("[+%v] fault begins", since(begin))
	faultStart := time.Now()
	faultBegan.Store(faultStart.UnixNano())
	require.NoError(t, inject(ctx, c))
	recovered := time.Now()
	w.after.Store(recovered.UnixNano())
	t.Logf("[+%v] fault over after %v; writing on", since(begin), since(faultStart))
	waitUntil(t, ctx, fmt.Sprintf("%d acknowledged writes per writer after the fault", minAcks), func() bool {
		return time.Since(recovered) >= coolDown && w.fewestAcks(1) >= minAcks
	})
	w.halt()
	t.Logf("[+%v] writers stopped; settling every call on a direct connection", since(begin))

	ty := settle(t, ctx, direct, w.calls, faultStart, recovered)
	t.Logf("[+%v] %s mode: %v", since(begin), mode, ty)
	require.Zero(t, ty.lost, "acknowledged writes lost")
	require.Zero(t, ty.unsettled, "unknown outcomes LookupOperation could not settle")
	require.Zero(t, ty.misreported, "calls reported as not applied whose write was applied")
	require.Equal(t, ty.acked+ty.unknownIn, ty.present, "present == acknowledged + applied unknowns")
	return ty
}

func since(t time.Time) time.Duration { return time.Since(t).Round(time.Millisecond) }

// tally is the accounting of one run.
type tally struct {
	name                  string
	calls                 int
	acked                 int           // calls that returned nil
	present               int           // keys applied (in the operation table)
	lost                  int           // acknowledged keys not applied
	unknownIn, unknownOut int           // ErrCommitUnknown, by LookupOperation: applied / not applied ("false unknowns")
	definite              int           // other errors, not applied
	misreported           int           // other errors whose key was applied
	unsettled             int           // errors LookupOperation could not settle
	resumed               time.Duration // from the fault's beginning to the first acknowledgement of a call begun after it was over
	gap                   time.Duration // the longest time without an acknowledgement
	causes                map[string]int
	samples               map[string]string
}

func (ty tally) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "calls %d: acknowledged %d, present %d, lost %d, unknown %d (applied %d / not applied %d = false unknowns), definite errors %d, misreported %d; "+
		"writes begun after the fault acknowledged %v after it began, longest time without an acknowledgement %v",
		ty.calls, ty.acked, ty.present, ty.lost, ty.unknownIn+ty.unknownOut, ty.unknownIn, ty.unknownOut, ty.definite, ty.misreported,
		ty.resumed.Round(time.Millisecond), ty.gap.Round(time.Millisecond))
	b.WriteString("\n  errors by outcome and cause:")
	for _, k := range slices.Sorted(maps.Keys(ty.causes)) {
		fmt.Fprintf(&b, "\n    %-62s %5d   e.g. %s", k, ty.causes[k], ty.samples[k])
	}
	return b.String()
}

// settle checks every call against the database, through db (a direct
// connection), and returns the figures; see TestFaults.
func settle(t *testing.T, ctx context.Context, db *gorm.DB, calls []call, faultStart, recovered time.Time) tally {
	t.Helper()
	ty := tally{calls: len(calls), causes: map[string]int{}, samples: map[string]string{}}
	var ops []struct {
		OpKey     string
		RecordKey string
	}
	require.NoError(t, db.WithContext(ctx).Raw("SELECT op_key, record_key FROM gormlock_operations").Scan(&ops).Error)
	applied := map[string]string{}
	for _, o := range ops {
		applied[o.OpKey] = o.RecordKey
	}
	var balances []struct {
		ID      int64
		Balance int64
	}
	require.NoError(t, db.WithContext(ctx).Raw("SELECT id, balance FROM accounts").Scan(&balances).Error)

	ours := map[string]bool{}
	var ackTimes []time.Time
	for _, c := range calls {
		ours[c.key] = true
		rk, in := applied[c.key]
		if in {
			ty.present++
			require.Equal(t, fmt.Sprint(c.row), rk, "operation %s recorded for another row", c.key)
		}
		if c.err == nil {
			ty.acked++
			ackTimes = append(ackTimes, c.ended)
			if !c.began.Before(recovered) && (ty.resumed == 0 || c.ended.Sub(faultStart) < ty.resumed) {
				ty.resumed = c.ended.Sub(faultStart)
			}
			if !in {
				ty.lost++
				t.Errorf("operation %s was acknowledged and is not applied", c.key)
			}
			continue
		}
		unknown := errors.Is(c.err, locking.ErrCommitUnknown)
		op, err := repository.LookupOperation(ctx, db, c.key)
		if err != nil {
			ty.unsettled++
			t.Errorf("LookupOperation(%s): %v", c.key, err)
			continue
		}
		require.Equal(t, in, op != nil, "LookupOperation(%s) disagrees with the operation table", c.key)
		outcome := "definite"
		switch {
		case unknown && op != nil:
			ty.unknownIn++
			outcome = "unknown, applied"
		case unknown:
			ty.unknownOut++
			outcome = "unknown, not applied"
		case op != nil:
			ty.misreported++
			outcome = "MISREPORTED (definite, applied)"
			t.Errorf("operation %s was reported as not applied and was applied: %v", c.key, c.err)
		default:
			ty.definite++
		}
		k := outcome + " / " + cause(c.err)
		ty.causes[k]++
		if _, ok := ty.samples[k]; !ok {
			s := c.err.Error()
			if len(s) > 400 {
				s = s[:400] + "..."
			}
			ty.samples[k] = s
		}
	}
	for key := range applied {
		require.True(t, ours[key], "operation %s applied that no writer made", key)
	}

	// None applied twice: each row holds exactly its applied keys.
	perRow := map[string]int64{}
	for _, rk := range applied {
		perRow[rk]++
	}
	var sum int64
	for _, b := range balances {
		require.Equal(t, perRow[fmt.Sprint(b.ID)], b.Balance, "row %d: the counter equals the number of its applied keys", b.ID)
		sum += b.Balance
	}
	require.Equal(t, int64(len(applied)), sum, "the rows' sum equals the applied keys")

	slices.SortFunc(ackTimes, func(a, b time.Time) int { return a.Compare(b) })
	for i := 1; i < len(ackTimes); i++ {
		ty.gap = max(ty.gap, ackTimes[i].Sub(ackTimes[i-1]))
	}
	return ty
}

// cause names what an error came from: the SQLSTATE the server (or
// PgBouncer) sent, or what the client saw.
func cause(err error) string {
	if code := sqlstate(err); code != "" {
		return "SQLSTATE " + code
	}
	s := err.Error()
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "context deadline"
	case errors.Is(err, syscall.ECONNREFUSED) || strings.Contains(s, "connection refused"):
		return "connect: refused"
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || strings.Contains(s, "EOF"):
		return "EOF"
	case errors.Is(err, syscall.ECONNRESET) || strings.Contains(s, "connection reset"):
		return "connection reset"
	case errors.Is(err, syscall.EPIPE) || strings.Contains(s, "broken pipe"):
		return "broken pipe"
	case strings.Contains(s, "conn closed"):
		return "conn closed"
	case errors.Is(err, locking.ErrStaleData):
		return "stale data"
	}
	if len(s) > 80 {
		s = s[:80]
	}
	return "other: " + s
}
