package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gormlock/gormlock/internal/tests/testdb"
)

// dsns are the databases the example runs on in tests: a SQLite file, and
// a fresh PostgreSQL schema or MariaDB database when a server is configured.
func dsns(t *testing.T) map[string]func(t *testing.T) string {
	return map[string]func(t *testing.T) string{
		"sqlite":   func(t *testing.T) string { return filepath.Join(t.TempDir(), "bank.db") },
		"postgres": func(t *testing.T) string { return testdb.PostgresSchema(t) },
		"mariadb":  func(t *testing.T) string { return testdb.MariaDBDatabase(t) },
	}
}

// The bank invariant: 8 workers x 500 transfers in each mode leave the total
// balance unchanged, and every applied transfer wrote exactly two rows.
func TestTransfersKeepTheTotal(t *testing.T) {
	for _, d := range testdb.Dialects {
		t.Run(d, func(t *testing.T) {
			dsn := dsns(t)[d](t)
			var out bytes.Buffer
			cfg := config{Modes: []string{Optimistic, Pessimistic}, Workers: 8, Transfers: 500, Accounts: 10}
			results, err := run(context.Background(), &out, dsn, cfg)
			require.NoError(t, err)
			require.Len(t, results, 2)
			for _, r := range results {
				assert.Equal(t, int64(10*startBalance), r.TotalBefore, r.Mode)
				assert.Equal(t, r.TotalBefore, r.TotalAfter, "%s: the total changed", r.Mode)
				assert.Equal(t, int64(8*500), r.Transfers+r.Declined, r.Mode)
				assert.GreaterOrEqual(t, r.Attempts, r.Transfers+r.Declined, r.Mode)
			}
			if d == "sqlite" {
				// SQLite's write transactions run one at a time: no retries.
				for _, r := range results {
					assert.Equal(t, r.Transfers+r.Declined, r.Attempts, r.Mode)
				}
			}
			assert.Equal(t, 3, strings.Count(out.String(), "\n"), out.String())
			assert.Equal(t, 2, strings.Count(out.String(), ": total unchanged\n"), out.String())
			t.Log("\n" + out.String())
		})
	}
}

// Negative control: the same transfers without a version or a lock create
// or destroy money. Whether they do in one run depends on how the
// scheduler interleaves the workers: on SQLite, whose writes take turns, a
// run under the race detector on a loaded machine once kept the total (CI,
// 2026-11-28). So the run is repeated, up to unguardedRuns times, until
// one changes it; the guarded modes above keep it in every run.
func TestUnguardedTransfersChangeTheTotal(t *testing.T) {
	const unguardedRuns = 5
	for _, d := range testdb.Dialects {
		t.Run(d, func(t *testing.T) {
			var out bytes.Buffer
			cfg := config{Modes: []string{Unguarded}, Workers: 8, Transfers: 500, Accounts: 10}
			changed := false
			for attempt := 0; attempt < unguardedRuns && !changed; attempt++ {
				results, err := run(context.Background(), &out, dsns(t)[d](t), cfg)
				require.NoError(t, err)
				require.Len(t, results, 1)
				changed = results[0].TotalBefore != results[0].TotalAfter
			}
			t.Log("\n" + out.String())
			assert.True(t, changed, "unguarded transfers kept the total in %d runs: they must lose updates", unguardedRuns)
			assert.Contains(t, out.String(), "TOTAL CHANGED")
		})
	}
}

func TestConfigIsValidated(t *testing.T) {
	for name, cfg := range map[string]config{
		"no mode":      {Workers: 1, Transfers: 1, Accounts: 2},
		"unknown mode": {Modes: []string{"yolo"}, Workers: 1, Transfers: 1, Accounts: 2},
		"no workers":   {Modes: []string{Optimistic}, Transfers: 1, Accounts: 2},
		"no transfers": {Modes: []string{Optimistic}, Workers: 1, Accounts: 2},
		"one account":  {Modes: []string{Optimistic}, Workers: 1, Transfers: 1, Accounts: 1},
	} {
		_, err := run(context.Background(), &bytes.Buffer{}, filepath.Join(t.TempDir(), "x.db"), cfg)
		require.Error(t, err, name)
	}
}
