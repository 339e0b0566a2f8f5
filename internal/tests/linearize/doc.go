// Package linearize checks recorded histories of operations on gormlock's
// versioned records for linearizability, with porcupine
// (github.com/anishathalye/porcupine).
//
// # Use
//
// Each client process records every operation it completes with a
// [Recorder], one JSON line per operation, in a file of its own. Client
// numbers must be unique across processes (for example process*100 +
// goroutine). After the run the test merges the files with [ReadHistory] and
// checks them with [Check]:
//
//	ops, err := linearize.ReadHistory(f1, f2, f3)
//	...
//	res, err := linearize.Check(ops, time.Minute)
//	...
//	if res.Outcome != porcupine.Ok {
//		_ = res.WriteVisualization("history.html")
//		t.Fatalf("history is not linearizable: %v", res)
//	}
//
// Every call to [Recorder.Begin] must be ended with [Pending.End], with
// [ResultUnknown] when the library could not say whether the write happened.
// An operation that was sent but never recorded (its process died before
// End) can make a correct history fail the check.
//
// # Model
//
// The model is a register per key (the history is partitioned by key, so
// keys are checked independently and in parallel). The state of a key is
// whether the record exists, its value, its version, and the largest version
// the key ever had, including in earlier incarnations before a delete. The
// library picks versions, so the model does not predict them; it requires
// that every new version is strictly greater than every version the key ever
// had. A re-created record whose version is not greater than the version of
// the record that was deleted is a violation ("version reuse").
//
//   - read: found {value, version} when the record exists with that value and
//     version; not-found when it does not exist.
//   - create(value): ok {version} when the record does not exist and version
//     is greater than every earlier version; exists when it exists.
//   - update(expected, value): ok {version} when the record exists at
//     version expected and version is greater than every earlier version;
//     stale when it exists at another version; not-found when it does not
//     exist.
//   - delete(expected): ok when the record exists at version expected (the
//     largest version is kept); stale and not-found as for update.
//   - increment(delta): ok {value, version} when the record exists, value is
//     the old value plus delta and version is greater than every earlier
//     version; not-found when it does not exist.
//
// Operations marked Unguarded (the negative-control workload, a blind write
// that ignores the version) are modelled exactly like guarded ones: the
// point of the negative control is that the lost updates it causes make the
// history fail the check.
//
// # Outcomes that are not definite
//
// A not-applied operation had no effect, so [Check] drops it before checking,
// as it does a read whose result is unknown.
//
// A write whose result is unknown may have taken effect at any moment after
// its call, or never, as Jepsen treats :info operations. The client never
// learned the version such a write created, so a state in which it took
// effect holds a wildcard version: "some version w greater than bound".
// The first later operation that observes the version (a read that finds
// the record, an update or delete ok expecting w, an increment ok, whose
// new version must exceed w) pins the wildcard, and the observed version
// must be greater than the bound, that is greater than every version the
// key had before the unknown write.
//
// The model is nondeterministic, and an unknown write is handled in one of
// two ways. An unknown update or delete has two next states, unchanged and
// applied, and its return is moved to the end of the history, or back to
// the moment its expected version is gone for good, which changes no
// verdict. The effect of an unknown create or increment joins the state as
// pending, and may happen before any later operation, at most once; the
// model lets it happen only when an operation cannot be explained without
// it. The second way keeps porcupine from trying such writes at every later
// point of a history that fails, which is exponential in their number. The
// rules are in [NewModel].
package linearize
