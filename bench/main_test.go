package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gormlock/gormlock/internal/testdb"
)

// targets returns the -db and -dsn of each database the tests run on.
func targets(t *testing.T) map[string]func(t *testing.T) string {
	return map[string]func(t *testing.T) string{
		"sqlite":   func(t *testing.T) string { return filepath.Join(t.TempDir(), "bench.db") },
		"postgres": func(t *testing.T) string { return testdb.PostgresSchema(t) },
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

			lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
			require.Len(t, lines, 2+len(AllModes)*2*2, stdout.String())
			assert.Contains(t, stderr.String(), "[####################]")

			b, err := os.ReadFile(filepath.Join(out, "results.json"))
			require.NoError(t, err)
			var rep report
			require.NoError(t, json.Unmarshal(b, &rep))
			require.Len(t, rep.Results, len(AllModes)*2*2)
			for _, r := range rep.Results {
				assert.Positive(t, r.Ops, "%+v", r.Cell)
				assert.Zero(t, r.Lost, "%+v", r.Cell)
				assert.Positive(t, r.OpsPerSec, "%+v", r.Cell)
				assert.LessOrEqual(t, r.P50, r.P99)
				assert.LessOrEqual(t, r.P99, r.Max)
			}
			svg, err := os.ReadFile(filepath.Join(out, "throughput.svg"))
			require.NoError(t, err)
			assert.Contains(t, string(svg), "<svg")
			for _, m := range AllModes {
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
	m, err := parseModes("raw, lease")
	require.NoError(t, err)
	assert.Equal(t, []string{"raw", "lease"}, m)
	assert.False(t, errors.Is(err, errLost))
}

// The size sweep measures every table size and payload, and grows the
// table between sizes.
func TestSweep(t *testing.T) {
	for _, d := range testdb.Dialects {
		t.Run(d, func(t *testing.T) {
			out := t.TempDir()
			cfg := config{DB: d, Modes: []string{ModeRaw}, Workers: []int{1}, Keys: []int{1}, Duration: 100 * time.Millisecond, Out: out,
				SweepRows: []int{100, 2000}, SweepPayloads: []int{100, 10000}}
			var stdout bytes.Buffer
			require.NoError(t, run(context.Background(), &stdout, &bytes.Buffer{}, cfg, targets(t)[d](t)))
			b, err := os.ReadFile(filepath.Join(out, "results.json"))
			require.NoError(t, err)
			var rep report
			require.NoError(t, json.Unmarshal(b, &rep))
			require.Len(t, rep.Sweep, 4)
			for _, r := range rep.Sweep {
				assert.Positive(t, r.Ops, "%+v", r)
				assert.Positive(t, r.PerOp, "%+v", r)
			}
			assert.Equal(t, 2000, rep.Sweep[2].Rows)
			assert.Contains(t, stdout.String(), "| "+d+" | 2000 | 10000 B |")
		})
	}
}
