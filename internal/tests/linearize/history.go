package linearize

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
)

// Kinds of operation, the values of [Op.Kind].
const (
	KindRead      = "read"
	KindCreate    = "create"
	KindUpdate    = "update"
	KindDelete    = "delete"
	KindIncrement = "increment"
)

// Results of an operation, the values of [Op.Result].
const (
	// ResultOK is a success: a read that found the record, or a write that
	// took effect.
	ResultOK = "ok"
	// ResultStale is a guarded update or delete refused because the record
	// exists at another version.
	ResultStale = "stale"
	// ResultNotFound is an operation that found no record.
	ResultNotFound = "not-found"
	// ResultExists is a create refused because the record exists.
	ResultExists = "exists"
	// ResultNotApplied is a definite failure that changed nothing, such as
	// a timeout before the statement was sent, or an increment that ran out
	// of retries.
	ResultNotApplied = "not-applied"
	// ResultUnknown is an operation that may or may not have taken effect,
	// such as a commit whose outcome the library reported as unknown.
	ResultUnknown = "unknown"
)

// results lists the results each kind of operation can have.
var results = map[string][]string{
	KindRead:      {ResultOK, ResultNotFound, ResultNotApplied, ResultUnknown},
	KindCreate:    {ResultOK, ResultExists, ResultNotApplied, ResultUnknown},
	KindUpdate:    {ResultOK, ResultStale, ResultNotFound, ResultNotApplied, ResultUnknown},
	KindDelete:    {ResultOK, ResultStale, ResultNotFound, ResultNotApplied, ResultUnknown},
	KindIncrement: {ResultOK, ResultNotFound, ResultNotApplied, ResultUnknown},
}

// Op is one completed operation on one key, as a line of a history file.
//
// Which input and output fields are meaningful depends on Kind and Result:
//
//	kind       input             output when Result is ok
//	read       -                 OutValue, OutVersion
//	create     Value             OutVersion
//	update     Expected, Value   OutVersion
//	delete     Expected          -
//	increment  Delta             OutValue (the new value), OutVersion
type Op struct {
	// Client is the client that ran the operation. A client runs one
	// operation at a time; clients in different processes must have
	// different numbers.
	Client int `json:"client"`
	// Key names the record.
	Key string `json:"key"`
	// Kind is one of the Kind constants.
	Kind string `json:"kind"`
	// Value is the value a create or update writes.
	Value int64 `json:"value,omitempty"`
	// Expected is the version a guarded update or delete expects.
	Expected int64 `json:"expected,omitempty"`
	// Delta is what an increment adds.
	Delta int64 `json:"delta,omitempty"`
	// Unguarded marks a blind write of the negative-control workload. The
	// model treats it like a guarded write, so a lost update it causes
	// fails the check.
	Unguarded bool `json:"unguarded,omitempty"`
	// Result is one of the Result constants.
	Result string `json:"result"`
	// OutValue is the value a read found or an increment wrote.
	OutValue int64 `json:"out_value,omitempty"`
	// OutVersion is the version a read found or a write created.
	OutVersion int64 `json:"out_version,omitempty"`
	// Call is when the operation started, in nanoseconds on the machine's
	// monotonic clock (CLOCK_MONOTONIC on Linux), which every process reads
	// alike.
	Call int64 `json:"call"`
	// Return is when the operation returned, on the same clock as Call.
	Return int64 `json:"return"`
}

// validate reports whether op is well formed: a known kind, a result that
// kind can have, and a return no earlier than the call.
func (op Op) validate() error {
	allowed, ok := results[op.Kind]
	if !ok {
		return fmt.Errorf("linearize: unknown kind %q", op.Kind)
	}
	if !slices.Contains(allowed, op.Result) {
		return fmt.Errorf("linearize: %s cannot have result %q", op.Kind, op.Result)
	}
	if op.Return < op.Call {
		return fmt.Errorf("linearize: %s on %q by client %d returns (%d) before its call (%d)",
			op.Kind, op.Key, op.Client, op.Return, op.Call)
	}
	return nil
}

// Recorder writes completed operations to an io.Writer as JSON lines. It is
// safe for concurrent use; each line is written with a single Write call.
type Recorder struct {
	mu  sync.Mutex
	w   io.Writer
	err error
}

// NewRecorder returns a Recorder that writes to w.
func NewRecorder(w io.Writer) *Recorder {
	return &Recorder{w: w}
}

// Begin notes that the operation op starts now and returns the Pending
// operation to end when it returns. The fields Result, OutValue, OutVersion,
// Call and Return of op are ignored.
func (r *Recorder) Begin(op Op) *Pending {
	op.Call = now()
	return &Pending{r: r, op: op}
}

// Err returns the first error the Recorder met, if any. A history with an
// operation missing cannot be checked soundly, so after an error the
// Recorder writes nothing more.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// record writes op as one line, or returns the Recorder's earlier error.
func (r *Recorder) record(op Op, bad error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	if bad != nil {
		r.err = bad
		return bad
	}
	line, err := json.Marshal(op)
	if err != nil {
		r.err = fmt.Errorf("linearize: encoding operation: %w", err)
		return r.err
	}
	if _, err := r.w.Write(append(line, '\n')); err != nil {
		r.err = fmt.Errorf("linearize: writing history: %w", err)
	}
	return r.err
}

// Pending is an operation that has begun and not yet been recorded. It is
// used by the one goroutine that runs the operation.
type Pending struct {
	r     *Recorder
	op    Op
	ended bool
}

// errEnded is returned by a second End on the same Pending.
var errEnded = errors.New("linearize: operation already ended")

// End records the operation as returning now with the given result. value
// is the value a read found or an increment wrote, version the version a
// read found or a write created; pass 0 for those the result does not
// carry.
//
// Call and return times are read from the system-wide monotonic clock (see
// now), so the operations of every process on the machine are ordered by
// one clock that never steps. End returns an error if the result is not one
// the kind can have or the line could not be written; that error also
// poisons the Recorder (see [Recorder.Err]).
func (p *Pending) End(result string, value, version int64) error {
	ret := now()
	if p.ended {
		return errEnded
	}
	p.ended = true
	p.op.Return = ret
	p.op.Result = result
	p.op.OutValue = value
	p.op.OutVersion = version
	return p.r.record(p.op, p.op.validate())
}

// maxLine is the longest history line ReadHistory accepts.
const maxLine = 1 << 20

// ReadHistory reads the JSON-lines histories that Recorders wrote and merges
// them into one history ordered by call time. Blank lines are skipped; an
// unparsable or invalid line is an error naming the reader (by position,
// from 0) and the line.
func ReadHistory(readers ...io.Reader) ([]Op, error) {
	var ops []Op
	for i, r := range readers {
		sc := bufio.NewScanner(r)
		sc.Buffer(nil, maxLine)
		for line := 1; sc.Scan(); line++ {
			b := bytes.TrimSpace(sc.Bytes())
			if len(b) == 0 {
				continue
			}
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.DisallowUnknownFields()
			var op Op
			err := dec.Decode(&op)
			if err == nil && dec.More() {
				err = errors.New("trailing data after the operation")
			}
			if err == nil {
				err = op.validate()
			}
			if err != nil {
				return nil, fmt.Errorf("linearize: history %d line %d: %w", i, line, err)
			}
			ops = append(ops, op)
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("linearize: reading history %d: %w", i, err)
		}
	}
	slices.SortStableFunc(ops, byCall)
	return ops, nil
}

// byCall orders operations by call, then return, then client.
func byCall(a, b Op) int {
	return cmp.Or(cmp.Compare(a.Call, b.Call), cmp.Compare(a.Return, b.Return), cmp.Compare(a.Client, b.Client))
}
