package linearize

import (
	"fmt"
	"hash/maphash"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"
)

// state is one possible state of a key: its register, and the effects of
// unknown creates and increments that have not happened yet and may still
// happen before any later operation. It is a comparable value, so porcupine
// can merge and cache states with == and a hash.
type state struct {
	register
	pending pending
}

// seed seeds the hashes of pending multisets.
var seed = maphash.MakeSeed()

// hash mixes the fields of s; equal states have equal hashes.
func (s state) hash() uint64 {
	h := s.register.hash()
	if s.pending != "" {
		h ^= maphash.String(seed, string(s.pending))
	}
	return h
}

// String describes s for the visualization.
func (s state) String() string {
	if s.pending == "" {
		return s.register.String()
	}
	return fmt.Sprintf("%v; may still happen: %v", s.register, s.pending)
}

// step returns every state op can lead to from s.
func step(s state, op Op) []state {
	switch op.Result {
	case ResultNotApplied:
		return []state{s}
	case ResultUnknown:
		switch op.Kind {
		case KindCreate:
			return []state{{s.register, s.pending.add(effectCreate, op.Value)}}
		case KindIncrement:
			return []state{{s.register, s.pending.add(effectIncrement, op.Delta)}}
		case KindUpdate, KindDelete:
			return append([]state{s}, s.after(op, apply)...)
		}
		return []state{s}
	}
	return s.after(op, observe)
}

// set is the porcupine state of a key: every state it can be in, at most
// one per register, ordered by register. Two states with the same register
// are merged into one whose pending effects are the union of theirs (each
// effect as many times as in either): the merged state can do everything
// either could, so merging only accepts more, and it bounds the set by the
// number of registers instead of the number of ways to have consumed
// pending effects.
type set []state

// step returns the set after op, and false if it is empty.
func (ss set) step(op Op) (set, bool) {
	var next []state
	for _, s := range ss {
		next = append(next, step(s, op)...)
	}
	slices.SortFunc(next, func(a, b state) int { return a.register.compare(b.register) })
	merged := next[:0]
	for _, s := range next {
		if n := len(merged); n > 0 && merged[n-1].register == s.register {
			merged[n-1].pending = merged[n-1].pending.union(s.pending)
			continue
		}
		merged = append(merged, s)
	}
	return set(merged), len(merged) > 0
}

// hash mixes the hashes of the states of ss; equal sets have equal hashes.
func (ss set) hash() uint64 {
	var h uint64
	for _, s := range ss {
		h = h*0x100000001b3 ^ s.hash()
	}
	return h
}

// String describes ss for the visualization.
func (ss set) String() string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = s.String()
	}
	return "{" + strings.Join(parts, " | ") + "}"
}

// after returns the states after op, whose effect on a register is f,
// letting pending effects happen first if op needs them. It keeps only the
// smallest sets of effects that work: any effect left pending can still
// happen later, so a state that consumed more effects than needed is covered
// by one that consumed fewer, except where op overwrites what they did (a
// read, an increment, an update or delete: then the register after op is
// the same and fewer consumed effects leave more possibilities).
func (s state) after(op Op, f func(register, Op) (register, bool)) []state {
	if r, ok := f(s.register, op); ok {
		return []state{{r, s.pending}}
	}
	if s.pending == "" || !mayHelp(s.register, op) {
		return nil
	}
	step := func(r register) (register, bool) { return f(r, op) }
	if want, ok := observedValue(op); ok {
		observed := register{exists: true, value: op.OutValue, max: op.OutVersion}
		if t, ok := s.fireSum(want, fireLimit(s, op.OutVersion), step, observed); ok {
			return []state{t}
		}
		return nil
	}
	// Without a value to explain, one effect is the most that helps: a
	// create makes the record exist, an increment changes its version, and
	// more only raise the version bound.
	return s.fireOne(step)
}

// mayHelp reports whether letting pending effects happen can make op
// possible in r, where it is not. It is a quick filter that rules out the
// common cases, checked exactly afterwards: effects only make the record
// exist and raise versions, so they cannot help a result that needs the
// record absent, nor one that observed a version not above r's.
func mayHelp(r register, op Op) bool {
	switch op.Result {
	case ResultNotFound:
		return false
	case ResultExists:
		return !r.exists
	case ResultStale:
		return true
	}
	switch op.Kind {
	case KindRead, KindIncrement:
		return op.OutVersion > r.max
	case KindUpdate, KindDelete:
		return op.Expected > r.max
	}
	return false
}

// observedValue returns the value the record had just before op, if op
// observed it: the value a read found, or an increment's new value minus
// its delta.
func observedValue(op Op) (int64, bool) {
	if op.Result != ResultOK {
		return 0, false
	}
	switch op.Kind {
	case KindRead:
		return op.OutValue, true
	case KindIncrement:
		return op.OutValue - op.Delta, true
	}
	return 0, false
}

// partition splits a history by key, keys in order.
func partition(history []porcupine.Operation) [][]porcupine.Operation {
	byKey := make(map[string][]porcupine.Operation)
	for _, o := range history {
		key := o.Input.(Op).Key
		byKey[key] = append(byKey[key], o)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([][]porcupine.Operation, len(keys))
	for i, k := range keys {
		parts[i] = byKey[k]
	}
	return parts
}

// describe renders op for the visualization.
func describe(op Op) string {
	var call string
	switch op.Kind {
	case KindRead:
		call = "read()"
	case KindCreate:
		call = fmt.Sprintf("create(%d)", op.Value)
	case KindUpdate:
		call = fmt.Sprintf("update(v%d, %d)", op.Expected, op.Value)
	case KindDelete:
		call = fmt.Sprintf("delete(v%d)", op.Expected)
	case KindIncrement:
		call = fmt.Sprintf("increment(%+d)", op.Delta)
	}
	if op.Unguarded {
		call = "unguarded " + call
	}
	ret := op.Result
	if op.Result == ResultOK {
		switch op.Kind {
		case KindRead, KindIncrement:
			ret = fmt.Sprintf("%d at v%d", op.OutValue, op.OutVersion)
		case KindCreate, KindUpdate:
			ret = fmt.Sprintf("ok v%d", op.OutVersion)
		}
	}
	return fmt.Sprintf("%s %s -> %s", op.Key, call, ret)
}

// NewModel returns the porcupine model of a versioned register per key,
// partitioned by key. Each porcupine.Operation's Input is an [Op] (its
// Output is ignored). [Check] prepares a history for it; a caller that
// builds the operations itself must drop the not-applied ones and give
// every update and delete whose result is unknown a return after the end of
// the history.
//
// A key starts absent with no version. The model is nondeterministic: its
// porcupine state is the set of states the key can be in (the construction
// of porcupine's NondeterministicModel.ToModel, plus merging states with the
// same register). A state is a register (exists, value, version, largest
// version ever, as in the package documentation) plus the multiset of
// pending effects of unknown creates and increments. With w the unknown
// version of a wildcard whose bound is b (w > b), the rules are:
//
//   - not-applied: the state is unchanged.
//   - unknown create or increment: the register is unchanged and the
//     effect joins the pending effects. A pending effect may happen before
//     any later operation, at most once, or never. A pending create happens
//     only while the record is absent and makes it exist with its value and
//     a wildcard version with b = the largest version so far; a pending
//     increment happens only while the record exists, adds its delta and
//     sets a wildcard with b = the old version, or b+1 on top of a wildcard
//     (the new version exceeds w >= b+1).
//   - unknown update or delete: two next states, unchanged and applied.
//     Applied needs the record at version expected (for a wildcard,
//     expected > b, which pins w = expected); update then sets its value
//     with a wildcard version with b = expected, delete removes the record
//     and keeps expected as the largest version.
//   - read found {value, version}, update ok and delete ok (expected): a
//     wildcard matches any version > b and is pinned to it.
//   - create ok, update ok and increment ok {version}: version must exceed
//     every earlier version; after a wildcard that means version > w, so
//     for increment version > b+1 and for update version > expected = w.
//   - stale: the record exists at a version other than expected; against a
//     wildcard always possible, and the wildcard stays.
//   - exists, not-found: the record exists, does not exist.
//
// When an operation is impossible in a state, the model lets pending
// effects happen first, trying only the fewest that can help: one create or
// one increment for a result without a value; for a read that found the
// record and an increment ok, every multiset of pending increments (after
// one pending create if the record is absent) that turns the value into the
// one observed, with no more effects than the gap between the versions
// allows.
//
// Soundness: a wildcard stands for exactly the versions the library could
// have written, and the pending effects for every moment an unknown create
// or increment could have taken effect, so the model rejects no
// linearizable history, provided an unknown write takes effect at most once
// (the library reports an unknown commit rather than retrying it). It
// accepts more than it must in three places: after a stale result against a
// wildcard it forgets that w != expected; when the search for the
// increments that explain an observed value goes past its budget it stops
// consuming them; and states with the same register are merged with the
// union of their pending effects, so when two ways of explaining an
// observation consumed different effects, both stay pending. Lost updates
// and reused versions are pinned by the next observation and rejected.
func NewModel() porcupine.Model {
	return porcupine.Model{
		Partition: partition,
		Init: func() any {
			return set{{register: register{max: noVersion}}}
		},
		Step: func(ss, input, _ any) (bool, any) {
			next, ok := ss.(set).step(input.(Op))
			return ok, next
		},
		Equal: func(a, b any) bool {
			return slices.Equal(a.(set), b.(set))
		},
		Hash: func(ss any) uint64 {
			return ss.(set).hash()
		},
		DescribeOperation: func(input, _ any) string {
			return describe(input.(Op))
		},
		DescribeState: func(ss any) string {
			return ss.(set).String()
		},
	}
}
