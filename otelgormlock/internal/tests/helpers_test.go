// Package otelgormlock_test tests package otelgormlock on real databases
// with OpenTelemetry's SDK: an in-memory metric reader and a span recorder.
// It is a module of its own, so that the adapter's module requires nothing
// but gormlock and OpenTelemetry's API.
package otelgormlock_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/otelgormlock"
	"github.com/gormlock/gormlock/repository"
)

// telemetry is an Observer recording into the SDK's in-memory reader and
// span recorder.
type telemetry struct {
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	obs    *otelgormlock.Observer
	// system and table are what every metric point must name; the
	// counts leave them out.
	system, table string
}

// newTelemetry returns a fresh telemetry for the database db (nil for
// none: system and table are then not checked).
func newTelemetry(t testing.TB, db *gorm.DB) *telemetry {
	t.Helper()
	tm := &telemetry{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder(), table: "accounts"}
	if db != nil {
		tm.system = systemOf(db)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(tm.reader))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tm.spans))
	t.Cleanup(func() {
		_ = mp.Shutdown(context.Background())
		_ = tp.Shutdown(context.Background())
	})
	obs, err := otelgormlock.New(otelgormlock.WithMeterProvider(mp), otelgormlock.WithTracerProvider(tp))
	require.NoError(t, err)
	tm.obs = obs
	return tm
}

// systemOf is db's db.system.name.
func systemOf(db *gorm.DB) string {
	switch db.Dialector.Name() {
	case "postgres":
		return "postgresql"
	case "mysql":
		return "mariadb" // the tests' server
	}
	return "sqlite"
}

// repo returns a repository of accounts on db that reports to tm.
func (tm *telemetry) repo(t testing.TB, db *gorm.DB, opts ...repository.Option) *repository.Repository[fixtures.Account] {
	t.Helper()
	r, err := repository.New[fixtures.Account](db, append([]repository.Option{repository.WithObserver(tm.obs)}, opts...)...)
	require.NoError(t, err)
	return r
}

// counts returns the points of metric name so far: for each attribute set
// (written "k=v,k=v", sorted, without db.system.name and the test's
// db.collection.name, which it checks; "no db.collection.name" when the
// point has none), a counter's value or a
// histogram's count. A metric with no point gives an empty map.
func (tm *telemetry) counts(t testing.TB, name string) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, tm.reader.Collect(context.Background(), &rm))
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		require.Equal(t, otelgormlock.ScopeName, sm.Scope.Name)
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch data := m.Data.(type) {
			case metricdata.Sum[int64]:
				require.True(t, data.IsMonotonic, "%s is a counter", name)
				for _, p := range data.DataPoints {
					out[tm.key(t, p.Attributes)] += p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range data.DataPoints {
					out[tm.key(t, p.Attributes)] += int64(p.Count)
				}
			default:
				t.Fatalf("%s: unexpected data %T", name, m.Data)
			}
		}
	}
	return out
}

// key writes a point's attributes for counts.
func (tm *telemetry) key(t testing.TB, set attribute.Set) string {
	t.Helper()
	var kvs []string
	if _, ok := set.Value("db.collection.name"); !ok {
		kvs = append(kvs, "no db.collection.name")
	}
	for _, kv := range set.ToSlice() {
		switch kv.Key {
		case "db.system.name":
			if tm.system != "" {
				require.Equal(t, tm.system, kv.Value.String())
			}
			continue
		case "db.collection.name":
			if kv.Value.String() == tm.table {
				continue
			}
		}
		kvs = append(kvs, string(kv.Key)+"="+kv.Value.String())
	}
	sort.Strings(kvs)
	return strings.Join(kvs, ",")
}

// spanView is what the tests check of an ended span.
type spanView struct {
	Name   string
	Kind   string
	Attrs  map[string]string
	Events []string // "name k=v ..." each
	Status string   // "Unset", "Ok" or "Error: description"
}

// ended returns the spans ended so far, leaving out the attributes in
// skip (whose values depend on timing, such as gormlock.waited).
func (tm *telemetry) ended(skip ...string) []spanView {
	var out []spanView
	for _, s := range tm.spans.Ended() {
		v := spanView{Name: s.Name(), Kind: s.SpanKind().String(), Attrs: map[string]string{}, Status: s.Status().Code.String()}
		if s.Status().Description != "" {
			v.Status += ": " + s.Status().Description
		}
		for _, kv := range s.Attributes() {
			if !slices.Contains(skip, string(kv.Key)) {
				v.Attrs[string(kv.Key)] = kv.Value.String()
			}
		}
		for _, e := range s.Events() {
			line := e.Name
			for _, kv := range e.Attributes {
				line += fmt.Sprintf(" %s=%s", kv.Key, kv.Value.String())
			}
			v.Events = append(v.Events, line)
		}
		out = append(out, v)
	}
	return out
}

// callAttrs are the attributes every call span starts with.
func (tm *telemetry) callAttrs(op string, more ...string) map[string]string {
	m := map[string]string{"db.system.name": tm.system, "db.collection.name": tm.table, "db.operation.name": op}
	for i := 0; i+1 < len(more); i += 2 {
		m[more[i]] = more[i+1]
	}
	return m
}

// attempt is the event of an attempt, as ended writes it.
func attempt(n int, locked bool, outcome string) string {
	return fmt.Sprintf("gormlock.attempt gormlock.attempt.number=%d gormlock.attempt.locked=%t gormlock.attempt.outcome=%s", n, locked, outcome)
}

// newAccount creates an account through r.
func newAccount(t testing.TB, r *repository.Repository[fixtures.Account], owner string) *fixtures.Account {
	t.Helper()
	a := &fixtures.Account{Owner: owner}
	require.NoError(t, r.Create(context.Background(), a))
	return a
}

// plain returns a repository of accounts on db without an Observer: the
// other writer of the tests, whose work is not counted.
func plain(t testing.TB, db *gorm.DB, opts ...repository.Option) *repository.Repository[fixtures.Account] {
	t.Helper()
	r, err := repository.New[fixtures.Account](db, opts...)
	require.NoError(t, err)
	return r
}

// increment adds 1 to an account's balance.
func increment(a *fixtures.Account) error {
	a.Balance++
	return nil
}
