//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gormlock/gormlock/internal/sqlitegate"
	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
)

// noNewChildren fails the test when this process has child processes
// that were not there before (a Galera cluster the tests launched is).
func noNewChildren(t *testing.T, before []int) {
	t.Helper()
	assert.ElementsMatch(t, before, children(t), "every child process was waited for")
}

// children returns the pids of this process's child processes, from
// /proc; the test is skipped where there is none.
func children(t *testing.T) []int {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil || len(stats) == 0 {
		t.Skip("no /proc to list child processes in")
	}
	var out []int
	for _, s := range stats {
		b, err := os.ReadFile(s)
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after
		// its closing parenthesis.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(os.Getpid()) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(s)))
			out = append(out, pid)
		}
	}
	return out
}

// With -procs 2 every mode runs its workers in two child processes that
// open the same database (SQLite: the same file), both do operations, the
// counters add up to their operations summed, and no child is left.
func TestProcsSpreadWorkersOverProcesses(t *testing.T) {
	for _, d := range testdb.Dialects {
		t.Run(d, func(t *testing.T) {
			dsn := targets(t)[d](t)
			before := children(t)
			out := t.TempDir()
			modes := append(append([]string(nil), AllModes...), ModeClaim)
			cfg := config{DB: d, Modes: modes, Workers: []int{1, 4}, Keys: []int{1, 50}, Duration: 200 * time.Millisecond, Procs: 2, Out: out}
			if d != dbSQLite {
				// PostgreSQL and MariaDB: one worker count, to keep it short.
				cfg.Workers = []int{4}
			}
			var stdout, stderr bytes.Buffer
			require.NoError(t, run(context.Background(), &stdout, &stderr, cfg, dsn))
			noNewChildren(t, before)

			b, err := os.ReadFile(filepath.Join(out, "results.json"))
			require.NoError(t, err)
			var rep report
			require.NoError(t, json.Unmarshal(b, &rep))
			assert.Equal(t, 2, rep.Config.Procs)
			require.NotEmpty(t, rep.Results)
			for _, r := range rep.Results {
				assert.Zero(t, r.Lost, "%+v", r.Cell)
				assert.Positive(t, r.Ops, "%+v", r.Cell)
				assert.Positive(t, r.CPUPerOp, "%+v: the children's CPU", r.Cell)
				assert.LessOrEqual(t, r.P50, r.P99)
				assert.LessOrEqual(t, r.P99, r.Max)
				want := min(2, r.Workers)
				assert.Equal(t, want, r.Procs, "%+v", r.Cell)
				require.Len(t, r.ProcOps, want, "%+v", r.Cell)
				var sum int64
				for _, n := range r.ProcOps {
					sum += n
				}
				assert.Equal(t, r.Ops, sum, "%+v: the counters grew by the children's operations", r.Cell)
				if r.Keys > 1 {
					// Without a hot row nothing keeps a child from working.
					for i, n := range r.ProcOps {
						assert.Positive(t, n, "%+v: process %d did nothing", r.Cell, i+1)
					}
				}
			}
			assert.Contains(t, stdout.String(), "| db | mode | keys | workers | procs | ops/s |")
			assert.Contains(t, stdout.String(), "- procs: ")
			svg, err := os.ReadFile(filepath.Join(out, "throughput.svg"))
			require.NoError(t, err)
			assert.Contains(t, string(svg), "workers in 2 processes")
		})
	}
}

// The negative control across processes: one worker in each of two
// processes on one hot row, no version, no lock. The increments the
// processes acknowledge exceed what the counter grew by, and the check in
// the parent fails the run.
func TestProcsLostUpdatesFailTheRun(t *testing.T) {
	for _, d := range testdb.Dialects {
		t.Run(d, func(t *testing.T) {
			// Rounds: the run fails at the first round that lost an update.
			before := children(t)
			cfg := config{DB: d, Modes: []string{ModeUnguarded}, Workers: []int{2}, Keys: []int{1}, Duration: 300 * time.Millisecond, Rounds: 5, Procs: 2, Out: t.TempDir()}
			err := run(context.Background(), &bytes.Buffer{}, &bytes.Buffer{}, cfg, targets(t)[d](t))
			require.ErrorIs(t, err, errLost)
			assert.Contains(t, err.Error(), "procs=2")
			noNewChildren(t, before)
			t.Log(err)
		})
	}
}

// A child that cannot do its part fails the round with its reason, and
// leaves no process behind.
func TestProcsChildFailureIsReported(t *testing.T) {
	before := children(t)
	h := &harness{db: dbSQLite, dialect: "sqlite", policy: locking.DefaultRetryPolicy(), procs: 3,
		procDSNs: []string{"sqlite:" + filepath.Join(t.TempDir(), "missing", "dir", "x.db")}}
	_, _, err := h.runProcs(context.Background(), Cell{Mode: ModeRaw, Keys: 1, Workers: 3}, 100*time.Millisecond, []int64{1}, "nobody")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "-procs: process 1 of 3")
	assert.Contains(t, err.Error(), "node 1:")
	noNewChildren(t, before)
	t.Log(err)

}

// Cancelling a round while the children work kills them, and waits for
// them, at once.
func TestProcsCancelKillsTheChildren(t *testing.T) {
	before := children(t)
	ctx := context.Background()
	tg, err := openTarget(ctx, &bytes.Buffer{}, dbSQLite, filepath.Join(t.TempDir(), "bench.db"), 2)
	require.NoError(t, err)
	defer func() { require.NoError(t, tg.close()) }()
	h, err := newHarness(tg, dbSQLite, locking.DefaultRetryPolicy())
	require.NoError(t, err)
	h.procs = 2
	h.procDSNs, err = processDSNs(tg, dbSQLite)
	require.NoError(t, err)
	ids, err := h.seed(ctx, "cancelled", 10)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	t0 := time.Now()
	_, _, err = h.runProcs(ctx, Cell{Mode: ModeOptimisticMulti, Keys: 10, Workers: 2}, time.Minute, ids, "cancelled")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(t0), 30*time.Second, "the round of a minute did not run out")
	noNewChildren(t, before)
}

func TestProcWorkers(t *testing.T) {
	assert.Equal(t, [][]int{{0, 2, 4}, {1, 3}}, procWorkers(5, 2))
	assert.Equal(t, [][]int{{0}}, procWorkers(1, 1))
	assert.Equal(t, [][]int{{0, 3}, {1}, {2}}, procWorkers(4, 3))
}

// mutate-flock is mutate with the children taking SQLite's lock file with
// flock alone: run alone on a file, the children take no turn in its queue
// (the parent's own writes, which queue, take a few), while
// mutate's children take turns (the control). Both lose nothing, and in one
// process mutate-flock is skipped, saying why.
func TestMutateFlockTakesNoTurns(t *testing.T) {
	turns := func(mode string) (uint32, Result) {
		t.Helper()
		before := children(t)
		path := filepath.Join(t.TempDir(), "bench.db")
		out := t.TempDir()
		const rounds = 2
		cfg := config{DB: dbSQLite, Modes: []string{mode}, Workers: []int{4}, Keys: []int{1}, Duration: 300 * time.Millisecond, Rounds: rounds, Procs: 2, Out: out}
		require.NoError(t, run(context.Background(), &bytes.Buffer{}, &bytes.Buffer{}, cfg, path))
		noNewChildren(t, before)
		n, err := sqlitegate.TurnsTaken(path)
		require.NoError(t, err)
		b, err := os.ReadFile(filepath.Join(out, "results.json"))
		require.NoError(t, err)
		var rep report
		require.NoError(t, json.Unmarshal(b, &rep))
		require.Len(t, rep.Results, 1)
		r := rep.Results[0]
		require.Equal(t, mode, r.Mode)
		assert.Zero(t, r.Lost)
		assert.Zero(t, r.Errors)
		require.Greater(t, r.Ops, int64(50), "too few operations to tell")
		t.Logf("%s: %d operations, %d turns taken", mode, r.Ops, n)
		return n, r
	}
	flock, _ := turns(ModeMutateFlock)
	// The parent's writes take 2 turns a round (4 here); 6 leaves room for
	// a harness that writes once more, and none for the children's
	// thousands of operations.
	const parents = 6
	assert.LessOrEqual(t, flock, uint32(parents), "mutate-flock's children took turns")
	queued, r := turns(ModeMutate)
	assert.Greater(t, queued, uint32(parents), "mutate's children took no turn (%d operations)", r.Ops)

	cfg := config{DB: dbSQLite, Modes: []string{ModeMutateFlock}, Workers: []int{2}, Keys: []int{1}, Duration: 50 * time.Millisecond, Out: t.TempDir()}
	var stderr bytes.Buffer
	err := run(context.Background(), &bytes.Buffer{}, &stderr, cfg, filepath.Join(t.TempDir(), "one.db"))
	require.ErrorIs(t, err, errNothingToRun, "the only mode is skipped")
	assert.Contains(t, stderr.String(), "mutate-flock skipped on sqlite: mutate-flock differs from mutate only on SQLite with -procs above 1")
}
