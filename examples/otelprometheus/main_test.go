package main

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
)

// The whole output of a run on a fresh SQLite file: the counter counts
// every call, and the attempts, call durations and SQLite gate waits were
// exported. The writers take turns on the record in one process, so no
// attempt conflicts and no conflict family appears.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out, filepath.Join(t.TempDir(), "demo.db"), ""); err != nil {
		t.Fatal(err)
	}
	const want = `4 writers x 25 Mutate calls: counter at 100
gormlock metric families exported:
  gormlock_call_duration_seconds histogram
  gormlock_mutate_attempts_total counter
  gormlock_sqlite_gate_wait_time_seconds histogram
`
	if got := out.String(); got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
}
