package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gormlock/gormlock/internal/tests/testdb"
)

// pgbench/run.sh, bench/README's measure of what leases in the row cost
// the server, runs on the configured PostgreSQL for a round of a second
// and finds every transaction's write applied once.
func TestPgbenchScriptsApplyEveryWrite(t *testing.T) {
	dsn := testdb.PostgresDSN(t)
	if _, err := exec.LookPath("psql"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("psql is not installed (postgresql-client)")
		}
		t.Skip("psql is not installed (postgresql-client)")
	}
	if _, err := exec.LookPath("pgbench"); err != nil {
		found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench")
		if len(found) == 0 {
			if os.Getenv("CI") == "true" {
				t.Fatal("pgbench is not installed (Debian's postgresql-client or server packages)")
			}
			t.Skip("pgbench is not installed (Debian's postgresql-client or server packages)")
		}
	}
	cmd := exec.CommandContext(t.Context(), "bash", filepath.Join("pgbench", "run.sh"), dsn)
	cmd.Env = append(os.Environ(), "ROUNDS=1", "SECONDS_PER_ROUND=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Regexp(t, `round 1: raw [0-9.]+ tps, lease-row [0-9.]+ tps, lease-row / raw [0-9.]+\n`, string(out))
	assert.Regexp(t, `the balances sum to [1-9][0-9]*, one per transaction\n`, string(out))
}
