package linearize_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/gormlock/gormlock/internal/tests/linearize"
)

// Helpers that build operations on key "k"; call and ret are the interval.

func read(client int, call, ret int64, value, version int64) linearize.Op {
	return linearize.Op{Client: client, Key: "k", Kind: linearize.KindRead, Result: linearize.ResultOK,
		OutValue: value, OutVersion: version, Call: call, Return: ret}
}

func readNone(client int, call, ret int64) linearize.Op {
	return linearize.Op{Client: client, Key: "k", Kind: linearize.KindRead, Result: linearize.ResultNotFound,
		Call: call, Return: ret}
}

func create(client int, call, ret int64, value int64, result string, version int64) linearize.Op {
	return linearize.Op{Client: client, Key: "k", Kind: linearize.KindCreate, Value: value, Result: result,
		OutVersion: version, Call: call, Return: ret}
}

func update(client int, call, ret int64, expected, value int64, result string, version int64) linearize.Op {
	return linearize.Op{Client: client, Key: "k", Kind: linearize.KindUpdate, Expected: expected, Value: value,
		Result: result, OutVersion: version, Call: call, Return: ret}
}

func del(client int, call, ret int64, expected int64, result string) linearize.Op {
	return linearize.Op{Client: client, Key: "k", Kind: linearize.KindDelete, Expected: expected, Result: result,
		Call: call, Return: ret}
}

func incr(client int, call, ret int64, delta int64, result string, value, version int64) linearize.Op {
	return linearize.Op{Client: client, Key: "k", Kind: linearize.KindIncrement, Delta: delta, Result: result,
		OutValue: value, OutVersion: version, Call: call, Return: ret}
}

func onKey(key string, op linearize.Op) linearize.Op {
	op.Key = key
	return op
}

const (
	ok         = linearize.ResultOK
	stale      = linearize.ResultStale
	notFound   = linearize.ResultNotFound
	exists     = linearize.ResultExists
	notApplied = linearize.ResultNotApplied
	unknown    = linearize.ResultUnknown
)

// Histories a correct library can produce: each must be linearizable.
func TestLinearizable(t *testing.T) {
	cases := map[string][]linearize.Op{
		"sequential": {
			readNone(0, 0, 1),
			create(0, 2, 3, 10, ok, 1),
			create(1, 4, 5, 99, exists, 0),
			read(1, 6, 7, 10, 1),
			update(0, 8, 9, 1, 20, ok, 2),
			update(1, 10, 11, 1, 30, stale, 0),
			incr(0, 12, 13, 5, ok, 25, 7),
			read(1, 14, 15, 25, 7),
			del(0, 16, 17, 2, stale),
			del(0, 18, 19, 7, ok),
			readNone(1, 20, 21),
			update(1, 22, 23, 7, 1, notFound, 0),
			del(1, 24, 25, 7, notFound),
			incr(1, 26, 27, 1, notFound, 0, 0),
		},
		"concurrent updates, first call wins": {
			create(0, 0, 1, 0, ok, 1),
			update(1, 10, 30, 1, 10, ok, 2),
			update(2, 15, 35, 1, 20, stale, 0),
			read(0, 40, 50, 10, 2),
		},
		"concurrent updates, second call wins": {
			create(0, 0, 1, 0, ok, 1),
			update(1, 10, 30, 1, 10, stale, 0),
			update(2, 15, 35, 1, 20, ok, 2),
			read(0, 40, 50, 20, 2),
		},
		"read overlapping an update sees either state": {
			create(0, 0, 1, 0, ok, 1),
			update(1, 10, 30, 1, 10, ok, 2),
			read(2, 12, 14, 0, 1),
			read(3, 16, 18, 10, 2),
			read(2, 20, 22, 10, 2),
		},
		"delete and re-create with a larger version": {
			create(0, 0, 1, 1, ok, 3),
			update(0, 2, 3, 3, 2, ok, 5),
			del(1, 4, 5, 5, ok),
			create(1, 6, 7, 7, ok, 6),
			read(0, 8, 9, 7, 6),
			del(0, 10, 11, 6, ok),
			create(0, 12, 13, 8, ok, 100),
			read(1, 14, 15, 8, 100),
		},
		"concurrent increments": {
			create(0, 0, 1, 1, ok, 1),
			incr(1, 10, 40, 2, ok, 3, 2),
			incr(2, 11, 41, 3, ok, 6, 3),
			incr(3, 12, 42, 4, ok, 10, 4),
			read(0, 50, 51, 10, 4),
		},
		"concurrent increments linearized out of call order": {
			create(0, 0, 1, 1, ok, 1),
			incr(1, 10, 40, 2, ok, 6, 3),
			incr(2, 11, 41, 3, ok, 4, 2),
			read(0, 50, 51, 6, 3),
		},
		"unknown update took effect, observed by a read": {
			create(0, 0, 1, 1, ok, 1),
			update(1, 10, 20, 1, 7, unknown, 0),
			read(0, 30, 40, 7, 9),
			update(0, 50, 60, 9, 8, ok, 10),
			read(1, 70, 80, 8, 10),
		},
		"unknown update did not take effect": {
			create(0, 0, 1, 1, ok, 1),
			update(1, 10, 20, 1, 7, unknown, 0),
			read(0, 30, 40, 1, 1),
			update(0, 50, 60, 1, 8, ok, 2),
			read(2, 70, 80, 8, 2),
		},
		"unknown update took effect after a later read": {
			create(0, 0, 1, 1, ok, 1),
			update(1, 10, 20, 1, 7, unknown, 0),
			read(0, 30, 40, 1, 1),
			read(0, 50, 60, 7, 2),
		},
		"unknown create pinned by an update's expected version": {
			create(0, 0, 1, 1, unknown, 0),
			update(1, 10, 20, 42, 5, ok, 43),
			read(0, 30, 40, 5, 43),
		},
		"unknown create after a delete, observed above the old version": {
			create(0, 0, 1, 1, ok, 4),
			del(0, 2, 3, 4, ok),
			create(1, 10, 11, 2, unknown, 0),
			read(0, 20, 21, 2, 5),
		},
		"unknown delete took effect": {
			create(0, 0, 1, 1, ok, 4),
			del(1, 10, 11, 4, unknown),
			readNone(0, 20, 21),
			create(0, 30, 31, 9, ok, 5),
		},
		"unknown delete of a wildcard version": {
			create(0, 0, 1, 1, ok, 4),
			update(1, 10, 11, 4, 2, unknown, 0),
			del(2, 20, 21, 8, unknown),
			readNone(0, 30, 31),
			create(0, 40, 41, 3, ok, 9),
		},
		"unknown increments stacked on an unknown create": {
			create(0, 0, 1, 1, unknown, 0),
			incr(1, 10, 11, 2, unknown, 0, 0),
			incr(2, 20, 21, 3, unknown, 0, 0),
			read(0, 30, 31, 6, 3),
		},
		"increment ok on top of a wildcard": {
			create(0, 0, 1, 1, ok, 1),
			update(1, 10, 11, 1, 5, unknown, 0),
			incr(2, 20, 21, 1, ok, 6, 3),
			read(0, 30, 31, 6, 3),
		},
		"stale against a wildcard": {
			create(0, 0, 1, 1, ok, 1),
			update(1, 10, 11, 1, 7, unknown, 0),
			update(0, 20, 21, 1, 8, stale, 0),
			read(0, 30, 31, 7, 5),
		},
		"unknown increment took effect long after its call": {
			create(0, 0, 1, 0, ok, 1),
			incr(1, 10, 11, 5, unknown, 0, 0),
			read(0, 20, 21, 0, 1),
			update(0, 30, 31, 1, 10, ok, 2),
			read(0, 40, 41, 15, 5),
		},
		"unknown create took effect after a later delete": {
			create(0, 0, 1, 1, ok, 1),
			create(1, 2, 3, 7, unknown, 0),
			read(0, 4, 5, 1, 1),
			del(0, 10, 11, 1, ok),
			read(0, 20, 21, 7, 5),
		},
		"unknown increments explained in two ways": {
			create(0, 0, 1, 0, ok, 1),
			incr(1, 2, 3, 1, unknown, 0, 0),
			incr(2, 2, 3, 2, unknown, 0, 0),
			incr(3, 2, 3, 3, unknown, 0, 0),
			read(0, 10, 11, 3, 3),
			read(0, 20, 21, 6, 5),
		},
		"unknown increment observed by an increment": {
			create(0, 0, 1, 0, ok, 1),
			incr(1, 2, 3, 4, unknown, 0, 0),
			incr(0, 10, 11, 1, ok, 5, 3),
		},
		"unknown increment observed by a stale update": {
			create(0, 0, 1, 0, ok, 1),
			incr(1, 2, 3, 4, unknown, 0, 0),
			update(0, 10, 11, 1, 9, stale, 0),
			read(0, 20, 21, 4, 2),
		},
		"unknown create observed by exists": {
			create(1, 0, 1, 7, unknown, 0),
			create(0, 10, 11, 8, exists, 0),
			del(0, 20, 21, 3, ok),
			readNone(0, 30, 31),
		},
		"not-applied operations change nothing": {
			create(0, 0, 1, 1, ok, 1),
			update(1, 10, 11, 99, 7, notApplied, 0),
			del(1, 12, 13, 1, notApplied),
			incr(1, 14, 15, 3, notApplied, 0, 0),
			read(0, 20, 21, 1, 1),
		},
		"keys are independent": {
			onKey("a", create(0, 0, 10, 1, ok, 1)),
			onKey("b", create(1, 0, 10, 1, ok, 1)),
			onKey("a", update(0, 20, 30, 1, 2, ok, 2)),
			onKey("b", read(1, 20, 30, 1, 1)),
			onKey("b", update(1, 40, 50, 1, 3, ok, 5)),
			onKey("a", read(0, 40, 50, 2, 2)),
		},
	}
	for name, ops := range cases {
		t.Run(name, func(t *testing.T) {
			res, err := linearize.Check(ops, 0)
			require.NoError(t, err)
			require.Equal(t, porcupine.Ok, res.Outcome, "%v", res)
		})
	}
}

// Histories of the bugs the checker exists to catch: each must be rejected.
func TestNotLinearizable(t *testing.T) {
	cases := map[string][]linearize.Op{
		"lost update: two increments from the same value": {
			create(0, 0, 1, 0, ok, 1),
			incr(1, 10, 20, 1, ok, 1, 2),
			incr(2, 12, 22, 1, ok, 1, 3),
		},
		"lost update: unguarded update over a newer version": {
			create(0, 0, 1, 0, ok, 1),
			read(1, 2, 3, 0, 1),
			update(0, 4, 5, 1, 10, ok, 2),
			{Client: 1, Key: "k", Kind: linearize.KindUpdate, Expected: 1, Value: 20, Unguarded: true,
				Result: ok, OutVersion: 3, Call: 6, Return: 7},
		},
		"update ok although the expected version did not match": {
			create(0, 0, 1, 0, ok, 1),
			update(0, 2, 3, 1, 10, ok, 2),
			update(1, 4, 5, 1, 20, ok, 3),
		},
		"version reuse after delete and re-create": {
			create(0, 0, 1, 1, ok, 3),
			update(0, 2, 3, 3, 2, ok, 5),
			del(1, 4, 5, 5, ok),
			create(1, 6, 7, 7, ok, 5),
		},
		"version going down after delete and re-create": {
			create(0, 0, 1, 1, ok, 5),
			del(1, 4, 5, 5, ok),
			create(1, 6, 7, 7, ok, 1),
		},
		"version reuse pinned through an unknown create": {
			create(0, 0, 1, 1, ok, 10),
			del(0, 2, 3, 10, ok),
			create(1, 4, 5, 2, unknown, 0),
			read(0, 20, 21, 2, 10),
		},
		"update whose new version does not grow": {
			create(0, 0, 1, 1, ok, 5),
			update(0, 2, 3, 5, 2, ok, 5),
		},
		"read observing a value nobody wrote": {
			create(0, 0, 1, 1, ok, 1),
			update(1, 10, 20, 1, 2, ok, 2),
			read(0, 12, 18, 3, 2),
		},
		"read observing a value nobody wrote, after an unknown write": {
			create(0, 0, 1, 1, ok, 1),
			update(1, 10, 20, 1, 2, unknown, 0),
			read(0, 30, 31, 3, 2),
		},
		"read of a version older than one already read": {
			create(0, 0, 1, 1, ok, 1),
			update(1, 10, 20, 1, 2, ok, 2),
			read(0, 30, 31, 2, 2),
			read(0, 32, 33, 1, 1),
		},
		"stale while the version matched": {
			create(0, 0, 1, 1, ok, 1),
			update(1, 10, 20, 1, 2, stale, 0),
		},
		"delete stale while the version matched": {
			create(0, 0, 1, 1, ok, 1),
			del(1, 10, 20, 1, stale),
		},
		"not-found while the record exists": {
			create(0, 0, 1, 1, ok, 1),
			readNone(1, 10, 20),
		},
		"create ok while the record exists": {
			create(0, 0, 1, 1, ok, 1),
			create(1, 10, 20, 2, ok, 2),
		},
		"increment ok with a wrong sum": {
			create(0, 0, 1, 1, ok, 1),
			incr(1, 10, 20, 2, ok, 4, 2),
		},
		"increment on a wildcard must exceed it": {
			create(0, 0, 1, 1, ok, 1),
			update(1, 10, 11, 1, 5, unknown, 0),
			incr(2, 20, 21, 1, ok, 6, 2),
		},
		"unknown increment taking effect twice": {
			create(0, 0, 1, 0, ok, 1),
			incr(1, 2, 3, 5, unknown, 0, 0),
			read(0, 10, 11, 5, 2),
			read(0, 20, 21, 10, 3),
		},
		"two unknown increments sharing one new version": {
			create(0, 0, 1, 0, ok, 1),
			incr(1, 2, 3, 1, unknown, 0, 0),
			incr(2, 2, 3, 1, unknown, 0, 0),
			read(0, 10, 11, 2, 2),
		},
		"unknown increment cannot explain a decrease": {
			create(0, 0, 1, 0, ok, 1),
			incr(1, 2, 3, 1, unknown, 0, 0),
			incr(0, 10, 11, 1, ok, 1, 2),
			incr(2, 12, 13, 1, ok, 1, 3),
		},
		"unknown create cannot explain a record that was never deleted": {
			create(0, 0, 1, 1, ok, 1),
			create(1, 2, 3, 7, unknown, 0),
			read(0, 10, 11, 7, 5),
		},
		"unknown update cannot apply to another version": {
			create(0, 0, 1, 1, ok, 1),
			update(0, 2, 3, 1, 2, ok, 2),
			update(1, 10, 11, 1, 7, unknown, 0),
			read(0, 20, 21, 7, 3),
		},
	}
	for name, ops := range cases {
		t.Run(name, func(t *testing.T) {
			res, err := linearize.Check(ops, 0)
			require.NoError(t, err)
			require.Equal(t, porcupine.Illegal, res.Outcome, "%v", res)
		})
	}
}

// Check counts what it checked and drops what had no effect.
func TestCheckCounts(t *testing.T) {
	ops := []linearize.Op{
		create(0, 0, 1, 1, ok, 1),
		onKey("other", create(1, 0, 1, 1, ok, 1)),
		update(1, 10, 11, 1, 7, unknown, 0),
		update(1, 12, 13, 1, 7, notApplied, 0),
		{Client: 2, Key: "k", Kind: linearize.KindRead, Result: unknown, Call: 14, Return: 15},
		read(0, 20, 21, 7, 4),
	}
	res, err := linearize.Check(ops, 0)
	require.NoError(t, err)
	require.Equal(t, porcupine.Ok, res.Outcome)
	require.Equal(t, 6, res.Ops)
	require.Equal(t, 4, res.Checked)
	require.Equal(t, 2, res.Dropped)
	require.Equal(t, 1, res.Unknown)
	require.Equal(t, 2, res.Keys)
	require.Equal(t, map[string]int{ok: 3, unknown: 2, notApplied: 1}, res.Results)
}

// A malformed operation is an error, not a verdict.
func TestCheckRejectsMalformed(t *testing.T) {
	for name, op := range map[string]linearize.Op{
		"unknown kind":          {Kind: "upsert", Result: ok},
		"result kind cannot be": create(0, 0, 1, 1, stale, 0),
		"no result":             {Kind: linearize.KindRead},
		"return before call":    read(0, 5, 4, 1, 1),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := linearize.Check([]linearize.Op{op}, 0)
			require.Error(t, err)
		})
	}
}

// A failing history can be written out as porcupine's HTML visualization.
func TestWriteVisualization(t *testing.T) {
	res, err := linearize.Check([]linearize.Op{
		create(0, 0, 1, 0, ok, 1),
		incr(1, 10, 20, 1, ok, 1, 2),
		incr(2, 12, 22, 1, ok, 1, 3),
		update(3, 5, 6, 1, 3, unknown, 0),
		incr(4, 5, 6, 2, unknown, 0, 0),
	}, 0)
	require.NoError(t, err)
	require.Equal(t, porcupine.Illegal, res.Outcome)

	path := filepath.Join(t.TempDir(), "history.html")
	require.NoError(t, res.WriteVisualization(path))
	html, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, strings.Contains(string(html), "k increment(+1) -\\u003e 1 at v2"), "visualization describes the operations")
	require.True(t, strings.Contains(string(html), "may still happen: increment(+2)"), "and the states")
}
