package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	mysqlopen "github.com/gormlock/gormlock/opendb/mysql"
	pgopen "github.com/gormlock/gormlock/opendb/postgres"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/internal/tests/testdb"
)

// targets returns the -db and -dsn of each database the tests run on.
func targets(t *testing.T) map[string]func(t *testing.T) string {
	return map[string]func(t *testing.T) string{
		"sqlite":   func(t *testing.T) string { return filepath.Join(t.TempDir(), "bench.db") },
		"postgres": func(t *testing.T) string { return testdb.PostgresSchema(t) },
		"mariadb":  func(t *testing.T) string { return testdb.MariaDBDatabase(t) },
	}
}

// A short run of every mode prints every cell, writes the JSON and the SVG,
// and finds no lost update.
func TestRunWritesTableJSONAndChart(t *testing.T) {
	for _, d := range testdb.Dialects {
		t.Run(d, func(t *testing.T) {
			dsn := targets(t)[d](t)
			out := t.TempDir()
			cfg := config{DB: d, Modes: AllModes, Workers: []int{1, 4}, Keys: []int{1, 50}, Duration: 150 * time.Millisecond, Out: out}
			var stdout, stderr bytes.Buffer
			require.NoError(t, run(context.Background(), &stdout, &stderr, cfg, dsn))

			modes := AllModes
			if d != "postgres" {
				// pgxpool is pgx's pool: PostgreSQL only, skipped with a
				// reason elsewhere.
				modes = slices.DeleteFunc(slices.Clone(AllModes), func(m string) bool { return m == ModePgxPool })
			}
			var rows int
			for _, l := range strings.Split(stdout.String(), "\n") {
				if strings.HasPrefix(l, "| "+d+" |") {
					rows++
				}
			}
			require.Equal(t, len(modes)*2*2, rows, stdout.String())
			assert.Contains(t, stderr.String(), "[####################]")

			b, err := os.ReadFile(filepath.Join(out, "results.json"))
			require.NoError(t, err)
			var rep report
			require.NoError(t, json.Unmarshal(b, &rep))
			require.Len(t, rep.Results, len(modes)*2*2)
			for _, r := range rep.Results {
				assert.Positive(t, r.Ops, "%+v", r.Cell)
				assert.Zero(t, r.Lost, "%+v", r.Cell)
				assert.Positive(t, r.OpsPerSec, "%+v", r.Cell)
				assert.Positive(t, r.CPUPerOp, "%+v", r.Cell)
				assert.LessOrEqual(t, r.P50, r.P99)
				assert.LessOrEqual(t, r.P99, r.Max)
			}
			svg, err := os.ReadFile(filepath.Join(out, "throughput.svg"))
			require.NoError(t, err)
			assert.Contains(t, string(svg), "<svg")
			for _, m := range modes {
				assert.Contains(t, string(svg), m, "legend names every mode")
			}
		})
	}
}

// Negative control: the unguarded mode loses increments, and the run fails
// loudly instead of reporting a throughput.
func TestLostUpdatesFailTheRun(t *testing.T) {
	for _, d := range testdb.Dialects {
		t.Run(d, func(t *testing.T) {
			cfg := config{DB: d, Modes: []string{ModeUnguarded}, Workers: []int{8}, Keys: []int{1}, Duration: 300 * time.Millisecond, Out: t.TempDir()}
			err := run(context.Background(), &bytes.Buffer{}, &bytes.Buffer{}, cfg, targets(t)[d](t))
			require.ErrorIs(t, err, errLost)
			t.Log(err)
		})
	}
}

func TestFlagsAreValidated(t *testing.T) {
	_, err := parseModes("optimistic,nope")
	require.Error(t, err)
	_, err = parseInts("workers", "1,0")
	require.Error(t, err)
	_, err = parseInts("workers", "x")
	require.Error(t, err)
	m, err := parseModes("raw, lease, claim, unguarded")
	require.NoError(t, err)
	assert.Equal(t, []string{"raw", "lease", "claim", "unguarded"}, m)
	assert.False(t, errors.Is(err, errLost))

	_, err = galeraDSNs("root@tcp(127.0.0.1:3311)/x")
	require.ErrorContains(t, err, "at least two nodes")
	t.Setenv(galeraEnv, "a@tcp(h:1)/x, b@tcp(h:2)/x,c@tcp(h:3)/x")
	dsns, err := galeraDSNs("")
	require.NoError(t, err)
	assert.Equal(t, []string{"a@tcp(h:1)/x", "b@tcp(h:2)/x", "c@tcp(h:3)/x"}, dsns)
	t.Setenv(galeraEnv, "")
	_, err = galeraDSNs("")
	require.ErrorContains(t, err, galeraEnv)

	// A DSN of the wrong kind is refused before anything is opened (opendb
	// would take a non-MySQL DSN for a SQLite file).
	err = run(context.Background(), &bytes.Buffer{}, &bytes.Buffer{}, config{DB: dbMariaDB, Modes: []string{ModeRaw}, Workers: []int{1}, Keys: []int{1}, Duration: time.Millisecond, Out: t.TempDir()},
		filepath.Join(t.TempDir(), "not-mysql.db"))
	require.ErrorContains(t, err, "-db mariadb")
}

// The claim mode runs where gormlock's Claim does, and is skipped, with
// gormlock's reason under the table, where it is refused (SQLite).
func TestClaimRunsOrIsSkipped(t *testing.T) {
	for _, d := range testdb.Dialects {
		t.Run(d, func(t *testing.T) {
			out := t.TempDir()
			cfg := config{DB: d, Modes: []string{ModeRaw, ModeClaim}, Workers: []int{4}, Keys: []int{1, 20}, Duration: 150 * time.Millisecond, Out: out}
			var stdout, stderr bytes.Buffer
			require.NoError(t, run(context.Background(), &stdout, &stderr, cfg, targets(t)[d](t)))
			rep := readReport(t, out)
			if d == "sqlite" {
				require.Len(t, rep.Results, 2, "raw only")
				require.Len(t, rep.Skipped, 1)
				assert.Equal(t, ModeClaim, rep.Skipped[0].Mode)
				assert.Contains(t, rep.Skipped[0].Why, "not supported")
				assert.Contains(t, stdout.String(), "- claim: skipped: ")
				assert.Contains(t, stderr.String(), "claim skipped on sqlite")
				return
			}
			require.Len(t, rep.Results, 4)
			assert.Empty(t, rep.Skipped)
			for _, r := range rep.Results {
				assert.Positive(t, r.Ops, "%+v", r.Cell)
				assert.Zero(t, r.Lost, "%+v", r.Cell)
			}
		})
	}
}

// The lease-row-sql mode runs on SQLite and PostgreSQL, counting every
// increment, and is skipped with its reason on MariaDB (its statements are
// SQLite's and PostgreSQL's).
func TestLeaseRowSQLRunsOnSQLiteAndPostgres(t *testing.T) {
	for _, d := range testdb.Dialects {
		t.Run(d, func(t *testing.T) {
			out := t.TempDir()
			cfg := config{DB: d, Modes: []string{ModeRaw, ModeLeaseRowSQL}, Workers: []int{4}, Keys: []int{1, 20}, Duration: 150 * time.Millisecond, Out: out}
			var stdout, stderr bytes.Buffer
			require.NoError(t, run(context.Background(), &stdout, &stderr, cfg, targets(t)[d](t)))
			rep := readReport(t, out)
			if d != "sqlite" && d != "postgres" {
				require.Len(t, rep.Results, 2, "raw only")
				require.Len(t, rep.Skipped, 1)
				assert.Equal(t, ModeLeaseRowSQL, rep.Skipped[0].Mode)
				assert.Contains(t, rep.Skipped[0].Why, "SQLite and PostgreSQL only")
				return
			}
			require.Len(t, rep.Results, 4)
			assert.Empty(t, rep.Skipped)
			for _, r := range rep.Results {
				assert.Positive(t, r.Ops, "%+v", r.Cell)
				assert.Zero(t, r.Lost, "%+v", r.Cell)
			}
		})
	}
}

// The size sweep measures every table size and payload in every round, in
// a database per size that is gone when the run ends.
func TestSweep(t *testing.T) {
	for _, d := range testdb.Dialects {
		t.Run(d, func(t *testing.T) {
			out := t.TempDir()
			dsn := targets(t)[d](t)
			schemas := func() (n int64) {
				switch d {
				case "postgres":
					admin, err := pgopen.Open(testdb.PostgresDSN(t))
					require.NoError(t, err)
					defer fixtures.Close(admin)
					require.NoError(t, admin.Raw("SELECT count(*) FROM pg_namespace WHERE nspname LIKE ?", sweepSchemaPrefix+"%").Scan(&n).Error)
				case "mariadb":
					admin, err := mysqlopen.Open(testdb.MariaDBDSN(t))
					require.NoError(t, err)
					defer fixtures.Close(admin)
					require.NoError(t, admin.Raw("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE ?", sweepSchemaPrefix+"%").Scan(&n).Error)
				}
				return n
			}
			before := schemas()
			cfg := config{DB: d, Modes: []string{ModeRaw}, Workers: []int{1}, Keys: []int{1}, Duration: 50 * time.Millisecond, Rounds: 3, Out: out,
				SweepRows: []int{100, 2000}, SweepPayloads: []int{100, 10000}}
			var stdout, stderr bytes.Buffer
			require.NoError(t, run(context.Background(), &stdout, &stderr, cfg, dsn))
			b, err := os.ReadFile(filepath.Join(out, "results.json"))
			require.NoError(t, err)
			var rep report
			require.NoError(t, json.Unmarshal(b, &rep))
			require.Len(t, rep.Sweep, 4)
			for i, r := range rep.Sweep {
				assert.Equal(t, []int{100, 2000}[i/2], r.Rows)
				assert.Equal(t, []int{100, 10000}[i%2], r.Payload)
				assert.Positive(t, r.Ops, "%+v", r)
				require.Len(t, r.RoundPerOp, 3, "%+v", r)
				s := slices.Clone(r.RoundPerOp)
				slices.Sort(s)
				assert.Equal(t, s[1], r.PerOp, "median round")
				if r.Rows == 100 {
					assert.Equal(t, 1.0, r.VsFirst)
				} else {
					assert.Positive(t, r.VsFirst)
				}
			}
			assert.Contains(t, stdout.String(), "| "+d+" | 2000 | 10000 B |")
			assert.Contains(t, stderr.String(), "filling a table of 2000 rows")
			assert.Equal(t, before, schemas(), "the sweep drops the schemas it made")
		})
	}
}

// Rounds interleave: every cell is measured once per round, and reports the
// median round's throughput and its ratio to raw in the same cell.
func TestRoundsReportTheMedian(t *testing.T) {
	for _, d := range testdb.Dialects {
		t.Run(d, func(t *testing.T) {
			out := t.TempDir()
			cfg := config{DB: d, Modes: []string{ModeRaw, ModeMutate}, Workers: []int{2}, Keys: []int{10}, Duration: 100 * time.Millisecond, Rounds: 3, Out: out}
			var stdout, stderr bytes.Buffer
			require.NoError(t, run(context.Background(), &stdout, &stderr, cfg, targets(t)[d](t)))
			assert.Contains(t, stderr.String(), "round 3/3")
			b, err := os.ReadFile(filepath.Join(out, "results.json"))
			require.NoError(t, err)
			var rep report
			require.NoError(t, json.Unmarshal(b, &rep))
			require.Len(t, rep.Results, 2)
			raw, opt := rep.Results[0], rep.Results[1]
			require.Equal(t, ModeRaw, raw.Mode)
			for _, r := range rep.Results {
				require.Len(t, r.RoundOpsPerSec, 3, r.Mode)
				s := append([]float64(nil), r.RoundOpsPerSec...)
				slices.Sort(s)
				assert.Equal(t, s[1], r.OpsPerSec, "%s reports the median round", r.Mode)
			}
			assert.Equal(t, 1.0, raw.VsRaw)
			var ratios []float64
			for k := range 3 {
				ratios = append(ratios, opt.RoundOpsPerSec[k]/raw.RoundOpsPerSec[k])
			}
			slices.Sort(ratios)
			assert.InDelta(t, ratios[1], opt.VsRaw, 1e-9, "vs raw is the median of the ratios within each round")
			assert.Contains(t, stdout.String(), fmt.Sprintf("| %.2f× |", opt.VsRaw))
		})
	}
}

// Every second round runs the cells in reverse, so that two cells side by
// side alternate which runs first.
func TestRoundsAlternateTheOrder(t *testing.T) {
	cfg := config{DB: dbSQLite, Modes: []string{ModeRaw, ModeMutate}, Workers: []int{2}, Keys: []int{10}, Duration: 30 * time.Millisecond, Rounds: 3, Out: t.TempDir()}
	var stderr bytes.Buffer
	require.NoError(t, run(context.Background(), &bytes.Buffer{}, &stderr, cfg, filepath.Join(t.TempDir(), "bench.db")))
	var order []string
	for _, line := range strings.Split(stderr.String(), "\r") {
		if i := strings.Index(line, "] round "); i >= 0 {
			f := strings.Fields(line[i+2:])
			order = append(order, f[1]+" "+f[2])
		}
	}
	assert.Equal(t, []string{"1/3 raw", "1/3 mutate", "2/3 mutate", "2/3 raw", "3/3 raw", "3/3 mutate"}, order)
}

func TestFinishSummarisesRounds(t *testing.T) {
	var r Result
	ms := time.Millisecond
	r.merge(Result{Cell: Cell{Mode: ModeRaw}, Ops: 10, Errors: 0, OpsPerSec: 100, attempts: 12, cpu: 20 * ms, lat: []time.Duration{5 * ms, 1 * ms}})
	r.merge(Result{Cell: Cell{Mode: ModeRaw}, Ops: 8, Errors: 2, OpsPerSec: 300, attempts: 10, cpu: 16 * ms, lat: []time.Duration{2 * ms, 9 * ms}})
	r.merge(Result{Cell: Cell{Mode: ModeRaw}, Ops: 0, Errors: 0, OpsPerSec: 200})
	r.finish()
	assert.Equal(t, 200.0, r.OpsPerSec)
	assert.Equal(t, int64(18), r.Ops)
	assert.Equal(t, int64(2), r.Errors)
	assert.InDelta(t, 2.0/20, r.RetriesPerOp, 1e-12) // 22 attempts for 20 operations
	assert.Equal(t, 5*ms, r.P50)
	assert.Equal(t, 9*ms, r.P99)
	assert.Equal(t, 9*ms, r.Max)
	assert.Equal(t, 2*ms, r.CPUPerOp, "36 ms of CPU over 18 successful operations")
	assert.Nil(t, r.lat)
}

// readReport reads the results.json a run wrote into out.
func readReport(t *testing.T, out string) report {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, "results.json"))
	require.NoError(t, err)
	var rep report
	require.NoError(t, json.Unmarshal(b, &rep))
	return rep
}
