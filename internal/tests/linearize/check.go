package linearize

import (
	"fmt"
	"time"

	"github.com/anishathalye/porcupine"
)

// Result is the outcome of [Check].
type Result struct {
	// Outcome is porcupine.Ok if the history is linearizable,
	// porcupine.Illegal if it is not, and porcupine.Unknown if the check
	// timed out first.
	Outcome porcupine.CheckResult
	// Ops is the number of operations in the history.
	Ops int
	// Checked is the number of operations given to porcupine: Ops minus
	// Dropped.
	Checked int
	// Dropped is the number of operations without effect that were left
	// out: not-applied operations and reads whose result is unknown.
	Dropped int
	// Unknown is the number of writes whose result is unknown, checked as
	// taking effect at any time after their call, or never.
	Unknown int
	// Keys is the number of keys (partitions).
	Keys int
	// Results counts the operations of the history by Op.Result.
	Results map[string]int
	// Elapsed is how long porcupine took.
	Elapsed time.Duration

	history []porcupine.Operation
	timeout time.Duration
}

// String summarises r in one line.
func (r Result) String() string {
	return fmt.Sprintf("%s: %d operations on %d keys (%d checked, %d dropped, %d unknown writes), results %v, checked in %v",
		r.Outcome, r.Ops, r.Keys, r.Checked, r.Dropped, r.Unknown, r.Results, r.Elapsed.Round(time.Millisecond))
}

// WriteVisualization writes porcupine's HTML visualization of the checked
// history to the file at path: the linearization of each key if there is
// one, else the longest partial linearizations and the operations that
// could not be linearized. It runs the check again, collecting the
// linearization data, with the same timeout as Check, so it takes about as
// long.
func (r Result) WriteVisualization(path string) error {
	model := NewModel()
	_, info := porcupine.CheckOperationsVerbose(model, r.history, r.timeout)
	if err := porcupine.VisualizePath(model, info, path); err != nil {
		return fmt.Errorf("linearize: writing visualization: %w", err)
	}
	return nil
}

// Check checks whether the history ops is linearizable under the model of
// [NewModel]. The operations may be in any order. A timeout of 0 means no
// limit; when the timeout expires the Outcome is porcupine.Unknown.
//
// Before checking, Check drops the operations without effect (not-applied,
// and reads with an unknown result). A write whose result is unknown may
// take effect at any time after its call, or never: the model keeps the
// effects of unknown creates and increments pending, and Check moves the
// return of unknown updates and deletes to after the end of the history, or
// back to the moment their expected version is gone for good (which changes
// no verdict). For the visualization, a client gets a new row after an
// unknown operation, as a Jepsen process does after :info.
//
// Check returns an error, and no Result, if an operation is malformed: an
// unknown kind, a result its kind cannot have, or a return before its call.
func Check(ops []Op, timeout time.Duration) (Result, error) {
	res := Result{Ops: len(ops), Results: make(map[string]int), timeout: timeout}
	if len(ops) == 0 {
		res.Outcome = porcupine.Ok
		return res, nil
	}
	end := ops[0].Return
	for _, op := range ops {
		if err := op.validate(); err != nil {
			return Result{}, err
		}
		res.Results[op.Result]++
		end = max(end, op.Return)
	}

	res.history = prepare(ops, end, &res)
	res.Checked = len(res.history)

	start := time.Now()
	res.Outcome = porcupine.CheckOperationsTimeout(NewModel(), res.history, timeout)
	res.Elapsed = time.Since(start)
	return res, nil
}
