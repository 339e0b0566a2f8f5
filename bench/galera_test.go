//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gormlock/gormlock/internal/tests/galera"
)

// TestMain stops the Galera cluster galera.Start launched, if any. A
// child process of a -procs run (this test binary, started again by
// runProcs) does its part instead of running the tests.
func TestMain(m *testing.M) {
	runChildIfAsked()
	galera.Main(m)
}

// On a Galera cluster the workers are spread over the nodes, claim is
// skipped with gormlock's reason, pessimistic is marked node-local, and no
// mode loses an increment: 1213 is retried, and the counters read on every
// node after it caught up add up to the acknowledged operations.
func TestGaleraSpreadsWorkersOverNodes(t *testing.T) {
	c := galera.Start(t)
	dsn := strings.Join(c.NewDatabase(t), ",")
	out := t.TempDir()
	modes := append(append([]string(nil), AllModes...), ModeClaim)
	cfg := config{DB: dbGalera, Modes: modes, Workers: []int{1, 6}, Keys: []int{1, 20}, Duration: 200 * time.Millisecond, Out: out}
	var stdout, stderr bytes.Buffer
	require.NoError(t, run(context.Background(), &stdout, &stderr, cfg, dsn))
	t.Log("\n" + stdout.String())

	b, err := os.ReadFile(filepath.Join(out, "results.json"))
	require.NoError(t, err)
	var rep report
	require.NoError(t, json.Unmarshal(b, &rep))
	assert.Equal(t, galera.Size, rep.Config.Nodes)
	// claim with gormlock's reason; pgxpool, pgx's pool, on PostgreSQL
	// only.
	why := map[string]string{}
	for _, sk := range rep.Skipped {
		why[sk.Mode] = sk.Why
	}
	require.Len(t, why, 2, "skipped: %v", rep.Skipped)
	assert.Contains(t, why[ModeClaim], "not supported")
	assert.Contains(t, why[ModePgxPool], "PostgreSQL only")
	require.Len(t, rep.Results, (len(AllModes)-1)*2*2) // all but pgxpool
	for _, r := range rep.Results {
		assert.Positive(t, r.Ops, "%+v", r.Cell)
		assert.Zero(t, r.Lost, "%+v", r.Cell)
		require.Len(t, r.NodeOps, galera.Size, "%+v", r.Cell)
		var sum int64
		for i, n := range r.NodeOps {
			sum += n
			if r.Workers >= galera.Size {
				assert.Positive(t, n, "%+v: node %d ran no operation", r.Cell, i+1)
			}
		}
		assert.Equal(t, r.Ops, sum, "%+v", r.Cell)
		assert.Equal(t, r.Mode == ModePessimistic, r.Note != "", "%+v", r.Cell)
	}
	assert.Contains(t, stdout.String(), "| galera | pessimistic (node-local) |")
	assert.Contains(t, stdout.String(), "aborts/op")
	assert.Contains(t, stdout.String(), "- claim: skipped: ")
}

// The negative control fails on a cluster too: the counters, read on every
// node, fall short of the acknowledged increments.
func TestGaleraLostUpdatesFailTheRun(t *testing.T) {
	c := galera.Start(t)
	dsn := strings.Join(c.NewDatabase(t), ",")
	cfg := config{DB: dbGalera, Modes: []string{ModeUnguarded}, Workers: []int{6}, Keys: []int{1}, Duration: 300 * time.Millisecond, Out: t.TempDir()}
	err := run(context.Background(), &bytes.Buffer{}, &bytes.Buffer{}, cfg, dsn)
	require.ErrorIs(t, err, errLost)
	t.Log(err)
}

// With -procs the workers of a cell run in child processes, and still on
// the node of their global index: every node and every process does
// operations, and the counters read on every node add up to them.
func TestGaleraProcs(t *testing.T) {
	c := galera.Start(t)
	dsn := strings.Join(c.NewDatabase(t), ",")
	out := t.TempDir()
	cfg := config{DB: dbGalera, Modes: []string{ModeOptimisticMulti, ModePessimistic}, Workers: []int{6}, Keys: []int{1, 20},
		Duration: 200 * time.Millisecond, Procs: 2, Out: out}
	var stdout, stderr bytes.Buffer
	require.NoError(t, run(context.Background(), &stdout, &stderr, cfg, dsn))
	t.Log("\n" + stdout.String())
	b, err := os.ReadFile(filepath.Join(out, "results.json"))
	require.NoError(t, err)
	var rep report
	require.NoError(t, json.Unmarshal(b, &rep))
	require.Len(t, rep.Results, 4)
	for _, r := range rep.Results {
		assert.Zero(t, r.Lost, "%+v", r.Cell)
		assert.Equal(t, 2, r.Procs, "%+v", r.Cell)
		require.Len(t, r.NodeOps, galera.Size, "%+v", r.Cell)
		require.Len(t, r.ProcOps, 2, "%+v", r.Cell)
		var nodes, procs int64
		for _, n := range r.NodeOps {
			nodes += n
		}
		for _, n := range r.ProcOps {
			procs += n
		}
		assert.Equal(t, r.Ops, nodes, "%+v", r.Cell)
		assert.Equal(t, r.Ops, procs, "%+v", r.Cell)
		if r.Keys > 1 {
			for i, n := range r.NodeOps {
				assert.Positive(t, n, "%+v: node %d ran no operation", r.Cell, i+1)
			}
			for i, n := range r.ProcOps {
				assert.Positive(t, n, "%+v: process %d ran no operation", r.Cell, i+1)
			}
		}
	}
	assert.Contains(t, stdout.String(), "| galera | pessimistic (node-local) | 1 | 6 | 2 |")
}
