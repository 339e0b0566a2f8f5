package linearize

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The encoded multiset keeps one entry per distinct effect, in order, and
// equal multisets built in any order are equal strings.
func TestPendingMultiset(t *testing.T) {
	var p pending
	for _, e := range []struct {
		tag byte
		v   int64
	}{{effectIncrement, 3}, {effectCreate, -7}, {effectIncrement, -2}, {effectIncrement, 3}, {effectCreate, 9}} {
		p = p.add(e.tag, e.v)
	}
	q := pending("").add(effectCreate, 9).add(effectIncrement, 3).add(effectIncrement, -2).
		add(effectCreate, -7).add(effectIncrement, 3)
	require.Equal(t, p, q)
	require.Equal(t, 4, p.entries())
	require.Equal(t, []group{{-7, 1}, {9, 1}}, p.groups(effectCreate))
	require.Equal(t, []group{{-2, 1}, {3, 2}}, p.groups(effectIncrement))
	require.Equal(t, "create(-7), create(9), increment(-2), 2×increment(+3)", p.String())

	r := p.remove(effectIncrement, 3, 2).remove(effectCreate, -7, 1)
	require.Equal(t, []group{{9, 1}}, r.groups(effectCreate))
	require.Equal(t, []group{{-2, 1}}, r.groups(effectIncrement))
	require.Panics(t, func() { r.remove(effectIncrement, 3, 1) })

	// Union keeps each effect as many times as the operand with more.
	u := r.add(effectIncrement, 3).add(effectIncrement, 3).add(effectIncrement, 3).union(p)
	require.Equal(t, []group{{-7, 1}, {9, 1}}, u.groups(effectCreate))
	require.Equal(t, []group{{-2, 1}, {3, 3}}, u.groups(effectIncrement))
	require.Equal(t, u, p.union(r.add(effectIncrement, 3).add(effectIncrement, 3).add(effectIncrement, 3)))
}

// fireSum finds the multisets of pending increments that explain a value,
// and consumes only what all of them used.
func TestFireSum(t *testing.T) {
	base := state{register: register{exists: true, value: 10, max: 4}}
	for _, d := range []int64{1, 2, 3, 5, 5} {
		base.pending = base.pending.add(effectIncrement, d)
	}
	read := func(value, version int64) func(register) (register, bool) {
		return func(r register) (register, bool) {
			return observe(r, Op{Kind: KindRead, Result: ResultOK, OutValue: value, OutVersion: version})
		}
	}
	observed := func(value, version int64) register {
		return register{exists: true, value: value, max: version}
	}

	// 10 more is 5+5 or 2+3+5; read at version 9 allows either (three
	// increments from version 4 write versions >4, >5, >6), so only the
	// five both used is consumed.
	got, ok := base.fireSum(20, fireLimit(base, 9), read(20, 9), observed(20, 9))
	require.True(t, ok)
	require.Equal(t, observed(20, 9), got.register)
	require.Equal(t, []group{{1, 1}, {2, 1}, {3, 1}, {5, 1}}, got.pending.groups(effectIncrement))

	// At version 6 there is room for two new versions only: 5+5.
	got, ok = base.fireSum(20, fireLimit(base, 6), read(20, 6), observed(20, 6))
	require.True(t, ok)
	require.Equal(t, []group{{1, 1}, {2, 1}, {3, 1}}, got.pending.groups(effectIncrement))

	// At version 5, one new version: no single increment adds 10.
	_, ok = base.fireSum(20, fireLimit(base, 5), read(20, 5), observed(20, 5))
	require.False(t, ok)

	// Nothing adds 100.
	_, ok = base.fireSum(110, fireLimit(base, 50), read(110, 50), observed(110, 50))
	require.False(t, ok)
}
