//go:build linux

package patroni_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	pgopen "github.com/gormlock/gormlock/opendb/postgres"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/repository"
)

// The workload.
const (
	writers     = 8               // goroutines sharing one Repository
	rows        = 50              // counters; each call increments one, at random
	callTimeout = 5 * time.Second // each call's context
	errPause    = 20 * time.Millisecond
)

// Counter is the record the writers increment.
type Counter struct {
	ID int64 `gorm:"column:id;primaryKey;autoIncrement:false"`
	N  int64 `gorm:"column:n;not null"`
	models.Versioned
}

// TableName is the counters' table.
func (Counter) TableName() string { return "patroni_counters" }

const counterDDL = `CREATE TABLE patroni_counters (
	id         bigint PRIMARY KEY,
	n          bigint NOT NULL,
	version    bigint NOT NULL,
	created_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL
)`

// open opens dsn with postgres.Open (pgx), with room for the writers, closed
// when the test ends.
func open(t *testing.T, dsn string) *gorm.DB {
	t.Helper()
	db, err := pgopen.Open(dsn)
	require.NoError(t, err)
	sqlDB, err := db.DB()
	require.NoError(t, err)
	sqlDB.SetMaxOpenConns(2 * writers)
	sqlDB.SetMaxIdleConns(2 * writers)
	t.Cleanup(func() { _ = fixtures.Close(db) })
	return db
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

// call is one Mutate a writer made: one logical increment, with its own
// operation key.
type call struct {
	key        string
	row        int64
	start, end time.Time
	err        error
}

// workload is the writers, running until halted.
type workload struct {
	repo *repository.Repository[Counter]
	run  string // prefix of every operation key of this workload
	stop chan struct{}
	wg   sync.WaitGroup

	mu    sync.Mutex
	calls []call
}

// startWorkload starts the writers on repo.
func startWorkload(t *testing.T, ctx context.Context, repo *repository.Repository[Counter], run string) *workload {
	w := &workload{repo: repo, run: run, stop: make(chan struct{})}
	for i := range writers {
		w.wg.Go(func() { w.write(ctx, i) })
	}
	t.Cleanup(w.halt)
	return w
}

func increment(c *Counter) error { c.N++; return nil }

func (w *workload) write(ctx context.Context, id int) {
	for i := 0; ; i++ {
		select {
		case <-w.stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		c := call{key: fmt.Sprintf("%s/w%d/%d", w.run, id, i), row: 1 + rand.Int64N(rows), start: time.Now()}
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		_, c.err = w.repo.Mutate(cctx, c.row, increment, repository.OpKey(c.key))
		cancel()
		c.end = time.Now()
		w.mu.Lock()
		w.calls = append(w.calls, c)
		w.mu.Unlock()
		if c.err != nil {
			select { // pacing while no node takes writes
			case <-w.stop:
				return
			case <-time.After(errPause):
			}
		}
	}
}

// halt stops the writers and waits for their calls to return.
func (w *workload) halt() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	w.wg.Wait()
}

// snapshot returns the calls made so far.
func (w *workload) snapshot() []call {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.calls)
}

// ackedSince reports whether a call that began at or after t was
// acknowledged.
func (w *workload) ackedSince(t time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range slices.Backward(w.calls) {
		if c.err == nil && !c.start.Before(t) {
			return true
		}
	}
	return false
}

// result is one run's accounting against the new leader.
type result struct {
	fault, from, to         string
	calls                   int
	acked, present          int
	lost                    []string // acknowledged, and the key is missing
	unknown                 int
	unknownIn               int // unknown, and LookupOperation found the key: applied
	unknownOut              int // unknown, and not applied (a false unknown)
	failed                  int // reported not applied
	misreported             []string
	contradictory           []string      // unknown, and also stale or not found: two outcomes at once
	gap                     time.Duration // longest time without an acknowledged write
	faultTook               time.Duration // the fault call: POST /switchover, or the kill
	syncAgain               time.Duration // from the fault to a synchronous standby named again
	causes                  map[string]int
	samples                 map[string]string
	rowsChecked, sumN       int64
	appliedKeys             int64
	ackedBefore, ackedAfter int // acknowledged calls begun before / after the fault
}

const tableHeader = "| fault      | from→to | acknowledged | present | lost | unknown (applied / not) | not applied | writes stopped | sync standby again |"

// table formats results as the report's table.
func table(rs ...result) string {
	var b strings.Builder
	b.WriteString("\n" + tableHeader + "\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "| %-10s | %-7s | %12d | %7d | %4d | %14d (%d / %d) | %11d | %14v | %18v |\n",
			r.fault, r.from+"→"+r.to, r.acked, r.present, len(r.lost), r.unknown, r.unknownIn, r.unknownOut, r.failed,
			r.gap.Round(100*time.Millisecond), r.syncAgain.Round(100*time.Millisecond))
	}
	return b.String()
}

// details returns the outcomes by cause, with one verbatim error of each.
func (r result) details() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s→%s: %d calls (%d acknowledged before the fault, %d after); the fault call took %v",
		r.fault, r.from, r.to, r.calls, r.ackedBefore, r.ackedAfter, r.faultTook.Round(time.Millisecond))
	for _, k := range slices.Sorted(maps.Keys(r.causes)) {
		fmt.Fprintf(&b, "\n    %-45s %6d   e.g. %s", k, r.causes[k], r.samples[k])
	}
	for _, s := range r.contradictory {
		fmt.Fprintf(&b, "\n    unknown, yet matching ErrStaleData or ErrNotFound: %s", s)
	}
	return b.String()
}

// cause names what an error came from, for the figures: the SQLSTATE the
// server sent, or what the client saw.
func cause(err error) string {
	var pgErr *pgconn.PgError
	s := err.Error()
	switch {
	case errors.As(err, &pgErr):
		return "SQLSTATE " + pgErr.Code
	case strings.Contains(s, "read only connection"):
		return "connect: read only"
	case errors.Is(err, syscall.ECONNREFUSED) || strings.Contains(s, "connection refused"):
		return "connect: refused"
	case errors.Is(err, context.DeadlineExceeded):
		return "context deadline"
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || strings.Contains(s, "EOF"):
		return "EOF"
	case errors.Is(err, syscall.ECONNRESET) || strings.Contains(s, "connection reset"):
		return "connection reset"
	case strings.Contains(s, "conn closed"):
		return "conn closed"
	}
	return "other"
}

// account looks up every call's operation key on db (the new leader) and
// checks what the calls reported against it: see TestPatroni.
func account(t *testing.T, ctx context.Context, db *gorm.DB, w *workload, faultAt time.Time) result {
	t.Helper()
	calls := w.snapshot()
	r := result{calls: len(calls), causes: map[string]int{}, samples: map[string]string{}}

	// LookupOperation for every key, by 8 goroutines.
	ops := make([]*repository.Operation, len(calls))
	errs := make([]error, len(calls))
	var next sync.Mutex
	i := 0
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for {
				next.Lock()
				j := i
				i++
				next.Unlock()
				if j >= len(calls) {
					return
				}
				ops[j], errs[j] = repository.LookupOperation(ctx, db, calls[j].key)
			}
		})
	}
	wg.Wait()

	// The table itself, read in one go, must agree with LookupOperation.
	var recorded []struct {
		OpKey     string
		RecordKey string
	}
	require.NoError(t, db.WithContext(ctx).Raw("SELECT op_key, record_key FROM gormlock_operations WHERE op_key LIKE ?", w.run+"/%").
		Scan(&recorded).Error)
	inTable := map[string]string{}
	for _, o := range recorded {
		inTable[o.OpKey] = o.RecordKey
	}

	perRow := map[int64]int64{}
	var ackEnds []time.Time
	for j, c := range calls {
		require.NoError(t, errs[j], "LookupOperation(%s)", c.key)
		op := ops[j]
		rk, in := inTable[c.key]
		require.Equal(t, in, op != nil, "LookupOperation(%s) and %s disagree", c.key, repository.OperationTable)
		if op != nil {
			require.Equal(t, strconv.FormatInt(c.row, 10), op.RecordKey, "operation %s recorded for another row", c.key)
			require.Equal(t, rk, op.RecordKey)
			require.Equal(t, "patroni_counters", op.Table)
			perRow[c.row]++
			r.appliedKeys++
		}
		o := outcomeOf(c.err)
		k := o.String()
		if c.err != nil {
			k += " / " + cause(c.err)
			if _, ok := r.samples[k]; !ok {
				s := c.err.Error()
				if len(s) > 600 {
					s = s[:600] + "..."
				}
				r.samples[k] = strconv.Quote(s) + " " + chain(c.err)
			}
		}
		r.causes[k]++
		switch o {
		case applied:
			r.acked++
			ackEnds = append(ackEnds, c.end)
			if c.start.Before(faultAt) {
				r.ackedBefore++
			} else {
				r.ackedAfter++
			}
			if op != nil {
				r.present++
			} else {
				r.lost = append(r.lost, c.key)
			}
		case unknown:
			r.unknown++
			if errors.Is(c.err, locking.ErrStaleData) || errors.Is(c.err, locking.ErrNotFound) {
				r.contradictory = append(r.contradictory, fmt.Sprintf("%s: %v", c.key, c.err))
			}
			if op != nil {
				r.unknownIn++
			} else {
				r.unknownOut++
			}
		case notApplied:
			r.failed++
			if op != nil {
				r.misreported = append(r.misreported, fmt.Sprintf("%s: %v", c.key, c.err))
			}
		}
	}

	// Each row's N is its number of applied keys: none applied twice, none
	// half-applied.
	var got []Counter
	require.NoError(t, db.WithContext(ctx).Order("id").Find(&got).Error)
	require.Len(t, got, rows)
	for _, c := range got {
		require.Equal(t, perRow[c.ID], c.N, "row %d: N must equal its applied operation keys", c.ID)
		r.sumN += c.N
		r.rowsChecked++
	}
	require.Equal(t, r.appliedKeys, r.sumN, "the sum of N equals the applied keys")

	slices.SortFunc(ackEnds, func(a, b time.Time) int { return a.Compare(b) })
	for j := 1; j < len(ackEnds); j++ {
		r.gap = max(r.gap, ackEnds[j].Sub(ackEnds[j-1]))
	}
	return r
}

// chain names the types of err's tree, outermost first, for the samples:
// which layer an error came from when its text does not say.
func chain(err error) string {
	var types []string
	var walk func(error)
	walk = func(e error) {
		if e == nil || len(types) >= 12 {
			return
		}
		types = append(types, fmt.Sprintf("%T", e))
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				walk(x)
			}
		}
	}
	walk(err)
	return "[" + strings.Join(types, " > ") + "]"
}
