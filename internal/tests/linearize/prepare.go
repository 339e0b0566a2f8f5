package linearize

import (
	"cmp"
	"math"
	"slices"
	"sort"

	"github.com/anishathalye/porcupine"
)

// prepare turns a valid history into porcupine operations and fills in the
// counts of res: it drops the operations without effect and gives every
// update and delete whose result is unknown the latest return it can need.
//
// Jepsen's rule is that a write whose result is unknown may take effect at
// any time after its call. For unknown creates and increments the model
// itself carries that (their effects stay pending in the state), so they
// keep their recorded interval. Unknown updates and deletes are branches of
// porcupine's search instead, so their return becomes end+1, after every
// other operation. But an update or delete expecting version e can only
// take effect while the record is at version e, and versions are never
// reused: once an operation with a definite result has shown that the key
// moved past e (a version above e read or written, or e deleted), e never
// comes back. Such an operation O is linearized before its return, so every
// linearization that puts the unknown write after O's return must take its
// "unchanged" branch there, and the same linearization with the write moved
// back to max(call, O's return) is valid too. Returning there instead of at
// the end therefore changes no verdict, and it keeps porcupine from trying
// the write at every later point of a failing history, which is
// exponential in the number of such writes.
func prepare(ops []Op, end int64, res *Result) []porcupine.Operation {
	horizons := horizonsByKey(ops)
	sorted := slices.Clone(ops)
	slices.SortStableFunc(sorted, func(a, b Op) int {
		return cmp.Or(cmp.Compare(a.Client, b.Client), byCall(a, b))
	})
	keys := make(map[string]bool)
	history := make([]porcupine.Operation, 0, len(ops))
	row := -1
	for i, op := range sorted {
		if i == 0 || op.Client != sorted[i-1].Client || sorted[i-1].Result == ResultUnknown {
			row++
		}
		if op.Result == ResultNotApplied || (op.Result == ResultUnknown && op.Kind == KindRead) {
			res.Dropped++
			continue
		}
		ret := op.Return
		if op.Result == ResultUnknown {
			res.Unknown++
			if op.Kind == KindUpdate || op.Kind == KindDelete {
				ret = end + 1
				if t, ok := horizons[op.Key].goneBy(op.Expected); ok {
					ret = max(op.Call, t)
				}
			}
		}
		keys[op.Key] = true
		history = append(history, porcupine.Operation{ClientId: row, Input: op, Call: op.Call, Return: ret})
	}
	res.Keys = len(keys)
	return history
}

// horizon records, for one key, when versions become gone for good.
type horizon struct {
	returns []int64 // returns of the operations with a definite result, ascending
	gone    []int64 // gone[i]: every version <= gone[i] is gone once returns[i] has passed
}

// horizonsByKey builds the horizon of every key from the operations with a
// definite result.
func horizonsByKey(ops []Op) map[string]*horizon {
	type mark struct{ ret, gone int64 }
	marks := make(map[string][]mark)
	for _, op := range ops {
		if g, ok := retires(op); ok {
			marks[op.Key] = append(marks[op.Key], mark{op.Return, g})
		}
	}
	horizons := make(map[string]*horizon, len(marks))
	for key, ms := range marks {
		slices.SortFunc(ms, func(a, b mark) int { return cmp.Compare(a.ret, b.ret) })
		h := &horizon{returns: make([]int64, len(ms)), gone: make([]int64, len(ms))}
		g := int64(math.MinInt64)
		for i, m := range ms {
			g = max(g, m.gone)
			h.returns[i], h.gone[i] = m.ret, g
		}
		horizons[key] = h
	}
	return horizons
}

// retires returns the largest version that can never be the record's
// version again once op has taken effect, and false if op shows none. A
// version below one that was read or written is gone, since new versions
// only grow; so is a deleted one.
func retires(op Op) (int64, bool) {
	if op.Result != ResultOK {
		return 0, false
	}
	switch op.Kind {
	case KindDelete:
		return op.Expected, true
	case KindRead, KindCreate, KindUpdate, KindIncrement:
		if op.OutVersion == math.MinInt64 {
			return 0, false
		}
		return op.OutVersion - 1, true
	}
	return 0, false
}

// goneBy returns the earliest return after which version e is gone for
// good, and false if the history never shows that. h may be nil.
func (h *horizon) goneBy(e int64) (int64, bool) {
	if h == nil {
		return 0, false
	}
	i := sort.Search(len(h.gone), func(i int) bool { return h.gone[i] >= e })
	if i == len(h.gone) {
		return 0, false
	}
	return h.returns[i], true
}
