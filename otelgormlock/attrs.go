package otelgormlock

import (
	"context"
	"errors"
	"maps"
	"strings"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.39.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

// The attributes of one table's calls of one operation are built once, on
// its first call, and kept with the counters' values for them: counting
// is an atomic add, recording a measurement allocates nothing, and a span
// starts with options made beforehand. Tables and
// operations are few (one entry per repository and call kind), and so are
// error types (errorType).

// attrKey names one set of attributes: op is "" for waits and unknown
// outcomes, which are per table.
type attrKey struct{ system, table, op string }

// attrCache holds the attrSets built so far, in a map that is replaced,
// never changed, when one is added: a lookup is a plain map read, with no
// lock and no hashing through an interface.
type attrCache struct {
	m  atomic.Pointer[map[attrKey]*attrSets]
	mu sync.Mutex // serialises additions
}

// attrSets are the attributes of one attrKey, ready to use.
type attrSets struct {
	spanName  string
	spanStart []trace.SpanStartOption
	base      opts // db.system.name, db.collection.name, db.operation.name
	// attempts is base with an attempt's locked and outcome attributes,
	// by locked (0, 1) and outcome.
	attempts [2][repository.AttemptFailed + 1]opts
	withErr  sync.Map // error.type -> *opts
	kvs      []attribute.KeyValue
	// n are the counters' values for these attributes, which the
	// meter's callback reports: counting is an atomic add.
	n counts
}

// counts are the values of the counters for one attrSets.
type counts struct {
	attempts, conflicts               [2][repository.AttemptFailed + 1]atomic.Int64
	escalations, releases, giveUps    atomic.Int64
	grants, expiries, fenced, unknown atomic.Int64
}

// each calls fn with every attrSets built so far.
func (c *attrCache) each(fn func(*attrSets)) {
	if m := c.m.Load(); m != nil {
		for _, s := range *m {
			fn(s)
		}
	}
}

// of returns the attributes of op's calls on table.
func (c *attrCache) of(system, table, op string) *attrSets {
	k := attrKey{system, table, op}
	if m := c.m.Load(); m != nil {
		if s, ok := (*m)[k]; ok {
			return s
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old != nil {
		if s, ok := (*old)[k]; ok {
			return s
		}
	}
	s := newAttrSets(k)
	m := make(map[attrKey]*attrSets, 1)
	if old != nil {
		m = make(map[attrKey]*attrSets, len(*old)+1)
		maps.Copy(m, *old)
	}
	m[k] = s
	c.m.Store(&m)
	return s
}

// newAttrSets builds the attributes of k.
func newAttrSets(k attrKey) *attrSets {
	system, table, op := k.system, k.table, k.op
	kvs := []attribute.KeyValue{semconv.DBSystemNameKey.String(system)}
	if table != "" { // a wait of RunInTx, which has no table
		kvs = append(kvs, semconv.DBCollectionName(table))
	}
	if op != "" {
		kvs = append(kvs, semconv.DBOperationName(op))
	}
	s := &attrSets{
		spanName: strings.TrimSpace(op + " " + table),
		spanStart: []trace.SpanStartOption{
			trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithAttributes(kvs...),
		},
		base: optsOf(kvs...),
		kvs:  kvs,
	}
	for locked := range s.attempts {
		for outcome := range s.attempts[locked] {
			s.attempts[locked][outcome] = optsOf(append(kvs[:len(kvs):len(kvs)],
				AttrAttemptLocked.Bool(locked == 1),
				AttrAttemptOutcome.String(repository.AttemptOutcome(outcome).String()))...)
		}
	}
	return s
}

// attempt returns the indexes of an attempt's attributes and counts in
// attempts and n: locked (0, 1) and outcome.
func (s *attrSets) attempt(locked bool, outcome repository.AttemptOutcome) (int, int) {
	l := 0
	if locked {
		l = 1
	}
	if int(outcome) >= len(s.attempts[l]) {
		outcome = repository.AttemptFailed
	}
	return l, int(outcome)
}

// withError returns the base attributes with error.type errType, or
// without when it is "".
func (s *attrSets) withError(errType string) opts {
	if errType == "" {
		return s.base
	}
	if o, ok := s.withErr.Load(errType); ok {
		return *o.(*opts)
	}
	o := optsOf(append(s.kvs[:len(s.kvs):len(s.kvs)], semconv.ErrorTypeKey.String(errType))...)
	actual, _ := s.withErr.LoadOrStore(errType, &o)
	return *actual.(*opts)
}

// opts are one attribute set as the options of a counter's Observe and of
// a histogram's Record. Passed as a slice made beforehand (opts.add...), they
// cost no allocation; a single option would be put in a new slice each
// time.
type opts struct {
	obs []metric.ObserveOption
	rec []metric.RecordOption
}

// optsOf returns the options of the attribute set of kvs.
func optsOf(kvs ...attribute.KeyValue) opts {
	o := metric.WithAttributeSet(attribute.NewSet(kvs...))
	return opts{obs: []metric.ObserveOption{o}, rec: []metric.RecordOption{o}}
}

// errorTypes name the conditions gormlock reports, as error.type: the
// first that err matches, in this order (a give-up matches the stale data
// it gave up on, a lease refusal matches ErrLocked).
var errorTypes = []struct {
	err  error
	name string
}{
	{locking.ErrRetriesExhausted, "retries_exhausted"},
	{locking.ErrCommitUnknown, "commit_unknown"},
	{locking.ErrLeaseExpired, "lease_expired"},
	{locking.ErrLeased, "leased"},
	{locking.ErrLockTimeout, "lock_timeout"},
	{locking.ErrLocked, "locked"},
	{locking.ErrDeadlock, "deadlock"},
	{locking.ErrSerialization, "serialization"},
	{locking.ErrStaleData, "stale_data"},
	{locking.ErrNotFound, "not_found"},
	{locking.ErrAlreadyExists, "already_exists"},
	{locking.ErrConditionFailed, "condition_failed"},
	{locking.ErrOperationKeyReused, "operation_key_reused"},
	{locking.ErrInvalidArgument, "invalid_argument"},
	{locking.ErrNotSupported, "not_supported"},
	{locking.ErrUnguardedWrite, "unguarded_write"},
	{context.DeadlineExceeded, "deadline_exceeded"},
	{context.Canceled, "canceled"},
}

// errorType returns error.type for err: the name of the gormlock condition
// it matches, "_OTHER" for any other error (fn's own), "" for nil.
func errorType(err error) string {
	if err == nil {
		return ""
	}
	for _, t := range errorTypes {
		if errors.Is(err, t.err) {
			return t.name
		}
	}
	return semconv.ErrorTypeOther.Value.AsString()
}
