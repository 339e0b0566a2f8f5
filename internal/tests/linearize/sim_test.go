package linearize_test

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/gormlock/gormlock/internal/tests/linearize"
)

// simConfig describes a simulated workload.
type simConfig struct {
	ops, clients, keys int
	unknown            float64 // share of operations whose result is unknown
	notApplied         float64 // share of operations that fail without effect
	blindWrites        int     // lost updates to inject
	blindAfter         int     // inject them only after this many operations
	seed               uint64
}

// planned is one simulated operation: its interval and the moment inside it
// at which it takes effect.
type planned struct {
	op      linearize.Op
	at      int64
	outcome string // "", or unknown or not-applied
}

// record is the true state of one key in the simulation.
type record struct {
	exists     bool
	value      int64
	version    int64 // current version, or the largest ever when !exists
	definiteAt int64 // return of the definite write that set version, or -1
}

// viewKey names what one client knows about one key.
type viewKey struct {
	client int
	key    string
}

// seen is a client's last observation of a key.
type seen struct {
	value, version int64
	ok             bool
}

// simStats counts what a simulation did.
type simStats struct {
	injected int // blind writes
	applied  int // unknown creates and increments that took effect
}

// simulate runs a correct versioned register with cfg.clients concurrent
// clients, each running operations one at a time with random durations, and
// returns the history they record. Every operation takes effect at a random
// moment within its interval, so the history is linearizable, unless
// blindWrites injects unguarded updates that overwrite a newer version with
// a stale expected version.
func simulate(cfg simConfig) ([]linearize.Op, simStats) {
	rng := rand.New(rand.NewPCG(cfg.seed, cfg.seed^0x5eed))
	kinds := []string{
		linearize.KindRead, linearize.KindRead, linearize.KindRead,
		linearize.KindUpdate, linearize.KindUpdate, linearize.KindUpdate,
		linearize.KindIncrement, linearize.KindIncrement,
		linearize.KindCreate, linearize.KindDelete,
	}

	// Plan the intervals: clients run operations back to back, with gaps.
	plan := make([]planned, 0, cfg.ops)
	for c := range cfg.clients {
		t := int64(1_000_000_000) + rng.Int64N(10_000)
		for range cfg.ops / cfg.clients {
			call := t + rng.Int64N(5_000)
			dur := 1_000 + rng.Int64N(50_000)
			p := planned{
				op: linearize.Op{
					Client: c,
					Key:    fmt.Sprintf("key-%d", rng.IntN(cfg.keys)),
					Kind:   kinds[rng.IntN(len(kinds))],
					Call:   call,
					Return: call + dur,
				},
				at: call + rng.Int64N(dur+1),
			}
			switch r := rng.Float64(); {
			case r < cfg.unknown:
				p.outcome = linearize.ResultUnknown
			case r < cfg.unknown+cfg.notApplied:
				p.outcome = linearize.ResultNotApplied
			}
			plan = append(plan, p)
			t = p.op.Return
		}
	}

	// Run them in the order they take effect; a client's earlier operation
	// always takes effect first, so inputs can depend on what it saw.
	slices.SortFunc(plan, func(a, b planned) int {
		return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.op.Client, b.op.Client))
	})
	records := make(map[string]*record)
	views := make(map[viewKey]seen)
	var stats simStats
	ops := make([]linearize.Op, 0, len(plan))
	for _, p := range plan {
		op := p.op
		rec := records[op.Key]
		if rec == nil {
			rec = &record{definiteAt: -1}
			records[op.Key] = rec
		}
		view := views[viewKey{op.Client, op.Key}]
		op.Value = rng.Int64N(100)
		op.Delta = 1 + rng.Int64N(5)
		op.Expected = view.version

		blind := stats.injected < cfg.blindWrites && len(ops) >= cfg.blindAfter && op.Kind == linearize.KindUpdate && p.outcome == "" &&
			rec.exists && view.ok && view.version != rec.version &&
			rec.definiteAt >= 0 && rec.definiteAt < op.Call
		if blind {
			// The write ignores the version: it overwrites a newer one.
			stats.injected++
			op.Unguarded = true
			rec.version += 1 + rng.Int64N(3)
			rec.value = op.Value
			rec.definiteAt = op.Return
			op.Result, op.OutVersion = linearize.ResultOK, rec.version
			views[viewKey{op.Client, op.Key}] = seen{op.Value, rec.version, true}
			ops = append(ops, op)
			continue
		}

		next := *rec
		var result string
		var out seen
		newVersion := rec.version + 1 + rng.Int64N(3)
		switch op.Kind {
		case linearize.KindRead:
			result = linearize.ResultNotFound
			if rec.exists {
				result, out = linearize.ResultOK, seen{rec.value, rec.version, true}
			}
		case linearize.KindCreate:
			result = linearize.ResultExists
			if !rec.exists {
				result, out = linearize.ResultOK, seen{op.Value, newVersion, true}
				next = record{exists: true, value: op.Value, version: newVersion}
			}
		case linearize.KindUpdate:
			switch {
			case !rec.exists:
				result = linearize.ResultNotFound
			case rec.version != op.Expected:
				result = linearize.ResultStale
			default:
				result, out = linearize.ResultOK, seen{op.Value, newVersion, true}
				next = record{exists: true, value: op.Value, version: newVersion}
			}
		case linearize.KindDelete:
			switch {
			case !rec.exists:
				result = linearize.ResultNotFound
			case rec.version != op.Expected:
				result = linearize.ResultStale
			default:
				result = linearize.ResultOK
				next = record{version: rec.version}
			}
		case linearize.KindIncrement:
			result = linearize.ResultNotFound
			if rec.exists {
				v := rec.value + op.Delta
				result, out = linearize.ResultOK, seen{v, newVersion, true}
				next = record{exists: true, value: v, version: newVersion}
			}
		}

		switch {
		case p.outcome == linearize.ResultNotApplied:
			op.Result = p.outcome
		case p.outcome == linearize.ResultUnknown:
			op.Result = p.outcome
			if result == linearize.ResultOK && rng.IntN(2) == 0 {
				next.definiteAt = -1
				*rec = next
				if op.Kind == linearize.KindCreate || op.Kind == linearize.KindIncrement {
					stats.applied++
				}
			}
		default:
			op.Result = result
			if result == linearize.ResultOK {
				next.definiteAt = op.Return
				*rec = next
			}
			if op.Kind != linearize.KindDelete {
				op.OutValue, op.OutVersion = out.value, out.version
			}
			if op.Kind == linearize.KindCreate || op.Kind == linearize.KindUpdate {
				op.OutValue = 0
			}
			if out.ok || result == linearize.ResultNotFound || op.Kind == linearize.KindDelete {
				views[viewKey{op.Client, op.Key}] = out
			}
		}
		ops = append(ops, op)
	}
	slices.SortFunc(ops, func(a, b linearize.Op) int { return cmp.Compare(a.Call, b.Call) })
	return ops, stats
}

// generated are the workloads of the generated tests: 5,000 operations by
// 8 clients, on 4 keys with some unknown results, and on 2 keys with many.
var generated = []struct {
	name string
	cfg  simConfig
}{
	{"4 keys, 2% unknown", simConfig{ops: 5000, clients: 8, keys: 4, unknown: 0.02, notApplied: 0.01}},
	{"2 keys, 5% unknown", simConfig{ops: 5000, clients: 8, keys: 2, unknown: 0.05, notApplied: 0.01}},
}

// A correct register's history, recorded concurrently, is linearizable.
func TestGeneratedHistory(t *testing.T) {
	for _, g := range generated {
		t.Run(g.name, func(t *testing.T) {
			for seed := range uint64(5) {
				cfg := g.cfg
				cfg.seed = seed
				ops, stats := simulate(cfg)
				res, err := linearize.Check(ops, time.Minute)
				require.NoError(t, err)
				require.Equal(t, porcupine.Ok, res.Outcome, "seed %d: %v", seed, res)
				require.Positive(t, stats.applied, "some unknown creates and increments took effect")
				require.Positive(t, res.Results[linearize.ResultStale])
				t.Logf("seed %d: %v", seed, res)
			}
		})
	}
}

// The same workloads with one blind write, a lost update, are rejected. It
// comes late in the history, when many unknown writes are still pending.
func TestGeneratedHistoryWithLostUpdate(t *testing.T) {
	for _, g := range generated {
		t.Run(g.name, func(t *testing.T) {
			for seed := range uint64(5) {
				cfg := g.cfg
				cfg.seed, cfg.blindWrites, cfg.blindAfter = seed, 1, cfg.ops*4/5
				ops, stats := simulate(cfg)
				require.Equal(t, 1, stats.injected)
				res, err := linearize.Check(ops, time.Minute)
				require.NoError(t, err)
				require.Equal(t, porcupine.Illegal, res.Outcome, "seed %d: %v", seed, res)
				t.Logf("seed %d: %v", seed, res)
			}
		})
	}
}

// How long 20,000 operations take to check (reported, not asserted; see
// BenchmarkCheck).
func TestGeneratedHistoryLarge(t *testing.T) {
	ops, _ := simulate(simConfig{ops: 20000, clients: 8, keys: 4, unknown: 0.01, notApplied: 0.01, seed: 42})
	start := time.Now()
	res, err := linearize.Check(ops, time.Minute)
	require.NoError(t, err)
	require.Equal(t, porcupine.Ok, res.Outcome, "%v", res)
	t.Logf("checked %d operations in %v: %v", len(ops), time.Since(start), res)
}

func BenchmarkCheck(b *testing.B) {
	ops, _ := simulate(simConfig{ops: 20000, clients: 8, keys: 4, unknown: 0.01, notApplied: 0.01, seed: 42})
	for b.Loop() {
		res, err := linearize.Check(ops, 0)
		if err != nil || res.Outcome != porcupine.Ok {
			b.Fatal(res, err)
		}
	}
}
