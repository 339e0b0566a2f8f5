package linearize

import (
	"cmp"
	"fmt"
	"math"
)

// noVersion is the largest version of a key that never existed: every
// version is greater.
const noVersion = math.MinInt64

// register is what the model knows about the record of one key, apart from
// the effects of unknown writes that may still happen (see state). It is a
// comparable value.
//
// The meaning of max depends on the other fields:
//
//   - !exists: the record does not exist; max is the largest version the key
//     ever had (noVersion if none).
//   - exists && !wild: the record holds value at version max, which is also
//     the largest version the key ever had (versions only grow).
//   - exists && wild: the record holds value at an unknown version w > max,
//     written by a write whose result is unknown. w is the largest version
//     the key ever had; max is the bound it is known to exceed.
//
// A wildcard is never kept for a record that does not exist: deleting it
// requires the expected version to equal w, which pins it.
type register struct {
	exists bool
	wild   bool
	value  int64
	max    int64
}

// holds reports whether the record can be at version v. A wildcard can be
// any version above its bound, so it can be v if v > max; the caller then
// pins it to v.
func (r register) holds(v int64) bool {
	if !r.exists {
		return false
	}
	if r.wild {
		return v > r.max
	}
	return v == r.max
}

// newer returns the bound that every version written after r must exceed,
// and false if no int64 can. Versions written after a wildcard w > max
// exceed w >= max+1.
func (r register) newer() (int64, bool) {
	if !r.wild {
		return r.max, r.max != math.MaxInt64
	}
	if r.max >= math.MaxInt64-1 {
		return 0, false
	}
	return r.max + 1, true
}

// stale reports whether a guarded write expecting version e can be refused
// as stale: the record exists at a version other than e. Against a wildcard
// that is always possible (w can be any number above the bound, and one of
// them is not e); the model then keeps the wildcard and forgets that
// w != e, which can only accept more histories, never fewer.
func (r register) stale(e int64) bool {
	return r.exists && (r.wild || r.max != e)
}

// hash mixes the fields of r; equal registers have equal hashes.
func (r register) hash() uint64 {
	h := uint64(r.max)*0x9e3779b97f4a7c15 ^ uint64(r.value)*0xc2b2ae3d27d4eb4f
	if r.exists {
		h ^= 1
	}
	if r.wild {
		h ^= 2
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	return h
}

// compare orders registers: absent first, then by value, version and
// wildcard.
func (r register) compare(o register) int {
	return cmp.Or(compareBool(r.exists, o.exists), cmp.Compare(r.value, o.value),
		cmp.Compare(r.max, o.max), compareBool(r.wild, o.wild))
}

// compareBool orders false before true.
func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// String describes r for the visualization.
func (r register) String() string {
	switch {
	case !r.exists && r.max == noVersion:
		return "absent"
	case !r.exists:
		return fmt.Sprintf("absent (last version %d)", r.max)
	case r.wild:
		return fmt.Sprintf("value %d, version >%d", r.value, r.max)
	default:
		return fmt.Sprintf("value %d, version %d", r.value, r.max)
	}
}

// observe returns the register after op, whose result is definite, and
// false if op cannot happen to r. Every version op observes pins a
// wildcard.
func observe(r register, op Op) (register, bool) {
	switch op.Result {
	case ResultOK:
		return observeOK(r, op)
	case ResultExists:
		return r, r.exists
	case ResultStale:
		return r, r.stale(op.Expected)
	case ResultNotFound:
		return r, !r.exists
	}
	return r, false
}

// observeOK is observe for an operation whose result is ok.
func observeOK(r register, op Op) (register, bool) {
	switch op.Kind {
	case KindRead:
		if r.value != op.OutValue || !r.holds(op.OutVersion) {
			return r, false
		}
		return register{exists: true, value: op.OutValue, max: op.OutVersion}, true
	case KindCreate:
		if r.exists || op.OutVersion <= r.max {
			return r, false
		}
		return register{exists: true, value: op.Value, max: op.OutVersion}, true
	case KindUpdate:
		// holds pins a wildcard to Expected, so the new version must
		// exceed Expected, which is the largest version so far.
		if !r.holds(op.Expected) || op.OutVersion <= op.Expected {
			return r, false
		}
		return register{exists: true, value: op.Value, max: op.OutVersion}, true
	case KindDelete:
		if !r.holds(op.Expected) {
			return r, false
		}
		return register{max: op.Expected}, true
	case KindIncrement:
		bound, ok := r.newer()
		if !r.exists || !ok || op.OutValue != r.value+op.Delta || op.OutVersion <= bound {
			return r, false
		}
		return register{exists: true, value: op.OutValue, max: op.OutVersion}, true
	}
	return r, false
}

// apply returns the register in which the write op took effect with a
// version its client never saw, and false if op cannot take effect on r.
func apply(r register, op Op) (register, bool) {
	switch op.Kind {
	case KindCreate:
		if r.exists || r.max == math.MaxInt64 {
			return r, false
		}
		return register{exists: true, wild: true, value: op.Value, max: r.max}, true
	case KindUpdate:
		if !r.holds(op.Expected) || op.Expected == math.MaxInt64 {
			return r, false
		}
		return register{exists: true, wild: true, value: op.Value, max: op.Expected}, true
	case KindDelete:
		if !r.holds(op.Expected) {
			return r, false
		}
		return register{max: op.Expected}, true
	case KindIncrement:
		bound, ok := r.newer()
		if !r.exists || !ok {
			return r, false
		}
		return register{exists: true, wild: true, value: r.value + op.Delta, max: bound}, true
	}
	return r, false
}
