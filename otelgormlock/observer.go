package otelgormlock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.39.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

// ScopeName is the instrumentation scope of the meter and the tracer.
const ScopeName = "github.com/gormlock/gormlock/otelgormlock"

// The metrics an Observer records. Each has the attributes db.system.name
// and db.collection.name; those of calls and attempts also
// db.operation.name (one of the repository.Op constants).
const (
	// MetricCallDuration (histogram, s): each Mutate, Upsert,
	// MutateRowLocked and lease call, from start to return; error.type
	// when it failed.
	MetricCallDuration = "gormlock.call.duration"
	// MetricAttempts (counter): attempts of Mutate, Upsert and
	// MutateRowLocked, with gormlock.attempt.locked and
	// gormlock.attempt.outcome.
	MetricAttempts = "gormlock.mutate.attempts"
	// MetricConflicts (counter): attempts lost to another writer, the
	// outcomes "conflict" and "aborted"; attributes as MetricAttempts.
	MetricConflicts = "gormlock.mutate.conflicts"
	// MetricEscalations (counter): calls of adaptive Mutate or Upsert
	// that took the row lock after a lost race (MutateReport.Escalated).
	MetricEscalations = "gormlock.mutate.escalations"
	// MetricLockReleases (counter): calls whose fn held the row lock too
	// long, so that the lock was released (MutateReport.Released).
	MetricLockReleases = "gormlock.mutate.lock_releases"
	// MetricGiveUps (counter): calls that ran out of attempts
	// (locking.RetryExhaustedError).
	MetricGiveUps = "gormlock.mutate.give_ups"
	// MetricUnknownOutcomes (counter): writes whose outcome is unknown
	// (locking.ErrCommitUnknown), a statement's or a COMMIT's.
	MetricUnknownOutcomes = "gormlock.write.unknown_outcomes"
	// MetricRowLockWait (histogram, s): each locked read, from asking for
	// the row lock to holding it (repository.RowLockWait); error.type
	// when it failed.
	MetricRowLockWait = "gormlock.row_lock.wait_time"
	// MetricSQLiteGateWait (histogram, s): each write on SQLite, from
	// asking for the database's write lock to holding it
	// (repository.SQLiteGateWait); error.type when it failed.
	MetricSQLiteGateWait = "gormlock.sqlite.gate.wait_time"
	// MetricLeaseGrants (counter): leases granted by Leases.Acquire.
	MetricLeaseGrants = "gormlock.lease.grants"
	// MetricLeaseExpiries (counter): calls that presented a lease that
	// had ended (repository.LeaseExpired).
	MetricLeaseExpiries = "gormlock.lease.expiries"
	// MetricLeaseFencingRefusals (counter): calls that presented a lease
	// another lease has replaced (repository.LeaseFenced).
	MetricLeaseFencingRefusals = "gormlock.lease.fencing_refusals"
)

// The attributes an Observer adds to OpenTelemetry's.
const (
	// AttrAttemptNumber is an attempt's number, 1 for the first (the
	// "gormlock.attempt" span event).
	AttrAttemptNumber = attribute.Key("gormlock.attempt.number")
	// AttrAttemptLocked says whether an attempt ran with the row locked.
	AttrAttemptLocked = attribute.Key("gormlock.attempt.locked")
	// AttrAttemptOutcome is how an attempt ended, as
	// repository.AttemptOutcome's String names it.
	AttrAttemptOutcome = attribute.Key("gormlock.attempt.outcome")
	// AttrAttempts is how many attempts a call ran (its span;
	// MutateReport.Attempts).
	AttrAttempts = attribute.Key("gormlock.attempts")
	// AttrLockedAttempts is how many of them held the row lock
	// (MutateReport.Locked).
	AttrLockedAttempts = attribute.Key("gormlock.locked_attempts")
	// AttrHot is true on the span of a call that started locked because
	// the record was hot (MutateReport.Hot).
	AttrHot = attribute.Key("gormlock.hot")
	// AttrEscalated is true on the span of a call that took the row lock
	// after a lost race (MutateReport.Escalated).
	AttrEscalated = attribute.Key("gormlock.escalated")
	// AttrWaited is true on the span of a call whose locked attempt
	// waited for another transaction's lock (MutateReport.Waited).
	AttrWaited = attribute.Key("gormlock.waited")
	// AttrReleased is true on the span of a call whose fn held the row
	// lock too long (MutateReport.Released).
	AttrReleased = attribute.Key("gormlock.released")
	// AttrLeaseEvent is what a lease call did to its lease
	// (repository.LeaseEvent's String), on its span when not "none".
	AttrLeaseEvent = attribute.Key("gormlock.lease.event")
)

// EventAttempt is the name of the span event of each attempt.
const EventAttempt = "gormlock.attempt"

// Observer records what gormlock's calls decide as OpenTelemetry metrics
// and spans; it implements repository.Observer. Make one with New and
// share it: it is safe for concurrent use.
type Observer struct {
	tracer trace.Tracer

	callDuration, rowLockWait, gateWait metric.Float64Histogram
	// The counters are asynchronous: the calls add to the values kept
	// with their attributes (attrSets.n), and report reads them when the
	// meter collects.
	attempts, conflicts, escalations metric.Int64ObservableCounter
	releases, giveUps, unknown       metric.Int64ObservableCounter
	grants, expiries, fenced         metric.Int64ObservableCounter

	sets attrCache
}

var _ repository.Observer = (*Observer)(nil)

// Option configures New.
type Option func(*config) error

type config struct {
	mp metric.MeterProvider
	tp trace.TracerProvider
}

// WithMeterProvider records the metrics with mp instead of the global
// MeterProvider (otel.GetMeterProvider). A nil mp makes New fail.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) error {
		if mp == nil {
			return fmt.Errorf("%w: otelgormlock: WithMeterProvider: nil MeterProvider", locking.ErrInvalidArgument)
		}
		c.mp = mp
		return nil
	}
}

// WithTracerProvider makes the spans with tp instead of the global
// TracerProvider (otel.GetTracerProvider). A nil tp makes New fail.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) error {
		if tp == nil {
			return fmt.Errorf("%w: otelgormlock: WithTracerProvider: nil TracerProvider", locking.ErrInvalidArgument)
		}
		c.tp = tp
		return nil
	}
}

// waitBuckets are the bounds of the wait and duration histograms, in
// seconds: from an uncontended lock (a fraction of a millisecond) to a
// lock timeout.
var waitBuckets = []float64{0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// New returns an Observer that records with the global MeterProvider and
// TracerProvider, or those the options give. It fails when an option is
// invalid or an instrument cannot be created.
func New(opts ...Option) (*Observer, error) {
	c := config{}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&c); err != nil {
			return nil, err
		}
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	o := &Observer{tracer: c.tp.Tracer(ScopeName, trace.WithSchemaURL(semconv.SchemaURL))}
	m := c.mp.Meter(ScopeName, metric.WithSchemaURL(semconv.SchemaURL))
	var errs []error
	histogram := func(name, desc string) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(waitBuckets...))
		errs = append(errs, err)
		return h
	}
	counter := func(name, unit, desc string) metric.Int64ObservableCounter {
		ctr, err := m.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return ctr
	}
	o.callDuration = histogram(MetricCallDuration, "Duration of gormlock's Mutate, Upsert, MutateRowLocked and lease calls.")
	o.rowLockWait = histogram(MetricRowLockWait, "Time a locked read took to get its row lock.")
	o.gateWait = histogram(MetricSQLiteGateWait, "Time a SQLite write waited for the database's write lock at gormlock's gate.")
	o.attempts = counter(MetricAttempts, "{attempt}", "Attempts of Mutate, Upsert and MutateRowLocked calls.")
	o.conflicts = counter(MetricConflicts, "{conflict}", "Attempts lost to another writer: stale data, or aborted by the database.")
	o.escalations = counter(MetricEscalations, "{escalation}", "Mutate and Upsert calls that took the row lock after a lost race.")
	o.releases = counter(MetricLockReleases, "{release}", "Calls whose fn held the row lock too long, so that it was released.")
	o.giveUps = counter(MetricGiveUps, "{call}", "Calls that ran out of attempts.")
	o.unknown = counter(MetricUnknownOutcomes, "{write}", "Writes whose outcome is unknown: the answer to a statement or COMMIT was lost.")
	o.grants = counter(MetricLeaseGrants, "{lease}", "Leases granted.")
	o.expiries = counter(MetricLeaseExpiries, "{lease}", "Calls that presented a lease that had ended.")
	o.fenced = counter(MetricLeaseFencingRefusals, "{refusal}", "Calls refused because they presented a lease another lease has replaced.")
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("otelgormlock: creating the instruments: %w", err)
	}
	if _, err := m.RegisterCallback(o.report, o.attempts, o.conflicts, o.escalations, o.releases, o.giveUps,
		o.unknown, o.grants, o.expiries, o.fenced); err != nil {
		return nil, fmt.Errorf("otelgormlock: registering the counters' callback: %w", err)
	}
	return o, nil
}

// report observes the counters' values, those that are not zero: a
// counter that was never added to has no point.
func (o *Observer) report(_ context.Context, ob metric.Observer) error {
	o.sets.each(func(s *attrSets) {
		for l := range s.n.attempts {
			for k := range s.n.attempts[l] {
				if v := s.n.attempts[l][k].Load(); v > 0 {
					ob.ObserveInt64(o.attempts, v, s.attempts[l][k].obs...)
				}
				if v := s.n.conflicts[l][k].Load(); v > 0 {
					ob.ObserveInt64(o.conflicts, v, s.attempts[l][k].obs...)
				}
			}
		}
		for _, c := range [...]struct {
			ctr metric.Int64ObservableCounter
			n   *atomic.Int64
		}{
			{o.escalations, &s.n.escalations}, {o.releases, &s.n.releases}, {o.giveUps, &s.n.giveUps},
			{o.unknown, &s.n.unknown}, {o.grants, &s.n.grants}, {o.expiries, &s.n.expiries}, {o.fenced, &s.n.fenced},
		} {
			if v := c.n.Load(); v > 0 {
				ob.ObserveInt64(c.ctr, v, s.base.obs...)
			}
		}
	})
	return nil
}

// StartCall implements repository.Observer: it starts the call's span.
func (o *Observer) StartCall(ctx context.Context, c repository.Call) context.Context {
	s := o.sets.of(c.System, c.Table, c.Op)
	ctx, _ = o.tracer.Start(ctx, s.spanName, s.spanStart...)
	return ctx
}

// Attempt implements repository.Observer: it counts the attempt (and the
// conflict), and adds its event to the call's span.
func (o *Observer) Attempt(ctx context.Context, c repository.Call, a repository.Attempt) {
	s := o.sets.of(c.System, c.Table, c.Op)
	l, k := s.attempt(a.Locked, a.Outcome)
	s.n.attempts[l][k].Add(1)
	if a.Outcome == repository.AttemptConflict || a.Outcome == repository.AttemptAborted {
		s.n.conflicts[l][k].Add(1)
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent(EventAttempt, trace.WithAttributes(
			AttrAttemptNumber.Int(a.N),
			AttrAttemptLocked.Bool(a.Locked),
			AttrAttemptOutcome.String(a.Outcome.String()),
		))
	}
}

// EndCall implements repository.Observer: it records the call's duration
// and what it did, and ends its span.
func (o *Observer) EndCall(ctx context.Context, c repository.Call, end repository.CallEnd) {
	s := o.sets.of(c.System, c.Table, c.Op)
	errType := errorType(end.Err)
	o.callDuration.Record(ctx, time.Since(c.Start).Seconds(), s.withError(errType).rec...)
	rep := end.Report
	if rep.Escalated {
		s.n.escalations.Add(1)
	}
	if rep.Released {
		s.n.releases.Add(1)
	}
	if errors.Is(end.Err, locking.ErrRetriesExhausted) {
		s.n.giveUps.Add(1)
	}
	switch end.Lease {
	case repository.LeaseGranted:
		s.n.grants.Add(1)
	case repository.LeaseExpired:
		s.n.expiries.Add(1)
	case repository.LeaseFenced:
		s.n.fenced.Add(1)
	}
	span := trace.SpanFromContext(ctx)
	if span.IsRecording() {
		attrs := make([]attribute.KeyValue, 0, 8)
		if rep.Op != "" {
			attrs = append(attrs, AttrAttempts.Int(rep.Attempts), AttrLockedAttempts.Int(rep.Locked))
			for _, f := range [...]struct {
				on  bool
				key attribute.Key
			}{{rep.Hot, AttrHot}, {rep.Escalated, AttrEscalated}, {rep.Waited, AttrWaited}, {rep.Released, AttrReleased}} {
				if f.on {
					attrs = append(attrs, f.key.Bool(true))
				}
			}
		}
		if end.Lease != repository.LeaseNone {
			attrs = append(attrs, AttrLeaseEvent.String(end.Lease.String()))
		}
		if end.Err != nil {
			attrs = append(attrs, semconv.ErrorTypeKey.String(errType))
			span.SetStatus(codes.Error, end.Err.Error())
		}
		span.SetAttributes(attrs...)
	}
	span.End()
}

// Wait implements repository.Observer: it records the wait in its
// histogram.
func (o *Observer) Wait(ctx context.Context, w repository.Wait) {
	h := o.rowLockWait
	if w.Kind == repository.SQLiteGateWait {
		h = o.gateWait
	}
	h.Record(ctx, w.Duration.Seconds(), o.sets.of(w.System, w.Table, "").withError(errorType(w.Err)).rec...)
}

// UnknownOutcome implements repository.Observer: it counts the write.
func (o *Observer) UnknownOutcome(ctx context.Context, u repository.UnknownOutcome) {
	o.sets.of(u.System, u.Table, "").n.unknown.Add(1)
}
