package linearize

import (
	"math"
	"slices"
)

// maxFiringNodes bounds the search for the unknown increments that explain
// an observed value (see state.fireSum). Past it the model stops consuming
// effects, which can only accept more histories.
const maxFiringNodes = 1 << 12

// effectOp returns the write whose effect is tag and v, for apply.
func effectOp(tag byte, v int64) Op {
	if tag == effectCreate {
		return Op{Kind: KindCreate, Value: v}
	}
	return Op{Kind: KindIncrement, Delta: v}
}

// fireOne returns the states after the step f, from the states in which one
// pending effect happened first: a create if the record does not exist,
// else an increment. One per distinct effect for which f succeeds.
func (s state) fireOne(f func(register) (register, bool)) []state {
	tag := byte(effectCreate)
	if s.exists {
		tag = effectIncrement
	}
	var out []state
	for _, g := range s.pending.groups(tag) {
		if r, ok := apply(s.register, effectOp(tag, g.v)); ok {
			if r, ok := f(r); ok {
				out = append(out, state{r, s.pending.remove(tag, g.v, 1)})
			}
		}
	}
	return out
}

// fireSum returns the state after the step f, which must overwrite the
// register the same way whatever happened before it (a read that found the
// record, an increment ok), from the states in which pending effects
// happened first that make the value want: increments if the record
// exists, else one create and then increments; at most limit effects in
// all. Several multisets of effects may do that; the state returned has
// consumed only what all of them consumed (the union of the states they
// lead to, see set). It returns false if no multiset works. If the search
// goes past its budget it consumes nothing, and if it found no multiset by
// then it assumes one exists and returns the register unknown.
func (s state) fireSum(want int64, limit int, f func(register) (register, bool), unknown register) (state, bool) {
	fs := firing{from: s, step: f, budget: maxFiringNodes}
	if s.exists {
		fs.increments(s.register, creation{}, want-s.value, 1, limit)
	} else {
		for _, g := range s.pending.groups(effectCreate) {
			if r, ok := apply(s.register, effectOp(effectCreate, g.v)); ok {
				fs.increments(r, creation{true, g.v}, want-g.v, 0, limit-1)
			}
		}
	}
	p := s.pending
	switch {
	case fs.budget < 0 && !fs.found:
		return state{unknown, p}, true
	case !fs.found:
		return s, false
	case fs.budget < 0:
		return state{fs.result, p}, true
	}
	if fs.created.happened && !fs.mixed {
		p = p.remove(effectCreate, fs.created.v, 1)
	}
	for i, c := range fs.consumed {
		if c > 0 {
			p = p.remove(effectIncrement, fs.groups[i].v, c)
		}
	}
	return state{fs.result, p}, true
}

// creation is whether a pending create happened, and its value.
type creation struct {
	happened bool
	v        int64
}

// firing is the state of one fireSum search.
type firing struct {
	from   state
	step   func(register) (register, bool)
	budget int

	found    bool
	result   register // the register after the step
	groups   []group  // the pending increments
	consumed []int    // the fewest of each group any solution used
	created  creation // the create the first solution used
	mixed    bool     // whether solutions used different creates
}

// increments looks for the multisets of pending increments that, after the
// pending create created (if it happened) took r to its register, sum to
// sum and have between least and most elements. A zero increment is used
// at most once: more only raise versions.
func (fs *firing) increments(r register, created creation, sum int64, least, most int) {
	gs := fs.from.pending.groups(effectIncrement)
	for i := range gs {
		if gs[i].v == 0 {
			gs[i].n = 1
		}
	}
	fs.groups = gs
	// lo[i], hi[i] bound the sums the groups from i on can add.
	lo, hi := make([]int64, len(gs)+1), make([]int64, len(gs)+1)
	for i := len(gs) - 1; i >= 0; i-- {
		lo[i], hi[i] = lo[i+1], hi[i+1]
		if total := saturatingMul(gs[i].v, int64(gs[i].n)); total < 0 {
			lo[i] = saturatingAdd(lo[i], total)
		} else {
			hi[i] = saturatingAdd(hi[i], total)
		}
	}
	counts := make([]int, len(gs))
	var walk func(i int, rest int64, used int)
	walk = func(i int, rest int64, used int) {
		fs.budget--
		if fs.budget < 0 || fs.settled() || rest < lo[i] || rest > hi[i] {
			return
		}
		if i == len(gs) {
			if rest == 0 && used >= least {
				fs.try(r, created, counts)
			}
			return
		}
		for c := 0; c <= gs[i].n && used+c <= most; c++ {
			counts[i] = c
			walk(i+1, rest-gs[i].v*int64(c), used+c)
		}
		counts[i] = 0
	}
	walk(0, sum, 0)
}

// settled reports whether further solutions cannot change the outcome: one
// was found and the solutions have nothing in common left to consume.
func (fs *firing) settled() bool {
	if !fs.found || (fs.created.happened && !fs.mixed) {
		return false
	}
	for _, c := range fs.consumed {
		if c > 0 {
			return false
		}
	}
	return true
}

// try records the solution of counts[i] increments of fs.groups[i].v from r
// if the step succeeds after them.
func (fs *firing) try(r register, created creation, counts []int) {
	for i, c := range counts {
		for range c {
			var ok bool
			if r, ok = apply(r, effectOp(effectIncrement, fs.groups[i].v)); !ok {
				return
			}
		}
	}
	r, ok := fs.step(r)
	if !ok {
		return
	}
	if !fs.found {
		fs.found, fs.result, fs.created = true, r, created
		fs.consumed = slices.Clone(counts)
		return
	}
	if r != fs.result {
		panic("linearize: fireSum step depends on the effects")
	}
	if created != fs.created {
		fs.mixed = true
	}
	for i, c := range counts {
		fs.consumed[i] = min(fs.consumed[i], c)
	}
}

// fireLimit returns how many effects can have happened before an operation
// observed version v in s: each writes a version above the last, so no more
// than the gap between v and the largest version of s.
func fireLimit(s state, v int64) int {
	if s.max < 0 && v > math.MaxInt64+s.max { // v - s.max overflows
		return math.MaxInt32
	}
	return int(max(0, min(v-s.max, math.MaxInt32)))
}

// saturatingAdd returns a+b, or the int64 nearest to it if that overflows.
func saturatingAdd(a, b int64) int64 {
	c := a + b
	switch {
	case a > 0 && b > 0 && c < 0:
		return math.MaxInt64
	case a < 0 && b < 0 && c >= 0:
		return math.MinInt64
	}
	return c
}

// saturatingMul returns v*n for n >= 0, or the int64 nearest to it if that
// overflows.
func saturatingMul(v, n int64) int64 {
	switch {
	case n == 0 || v == 0:
		return 0
	case v > 0 && v > math.MaxInt64/n:
		return math.MaxInt64
	case v < 0 && v < math.MinInt64/n:
		return math.MinInt64
	}
	return v * n
}
