//go:build linux

package otelgormlock_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"runtime/pprof"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/otelgormlock"
	"github.com/gormlock/gormlock/repository"
)

// discard is a span exporter that drops what it is given: the spans are
// made, sampled and batched as in production, and not sent anywhere.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// What OpenTelemetry costs per Mutate: the same uncontended Mutate calls
// (one goroutine, 100 records in turn) without an Observer ("off") and with
// otelgormlock on the SDK: a MeterProvider with a ManualReader, and a
// TracerProvider that samples every span ("sampled"), one trace in ten
// ("sampled10", TraceIDRatioBased(0.1) under ParentBased) or none
// ("unsampled": the metrics, and a span context for the call), into a
// BatchSpanProcessor whose exporter discards them; or the metrics alone,
// with OpenTelemetry's no-op TracerProvider ("metrics"); or, the control
// of what the library's call sites cost, an Observer that does nothing
// ("nop"). The two modes alternate
// in blocks of 50 calls within one run, each pair of blocks in a random
// order, so that a change in the machine's load falls on both; each reports its process CPU time per call (user and
// system, getrusage: the batch processor's goroutine and the GC included),
// the CPU time of the calling goroutine's thread alone (it is locked to
// its thread), and its wall time per call; otel-cpu-% and
// otel-thread-cpu-% are what the otel mode costs over off. ns/op counts
// both modes' calls.
//
//	go test -run '^$' -bench BenchmarkMutateCost -benchtime 4000x -count 5
func BenchmarkMutateCost(b *testing.B) {
	for _, d := range []string{"sqlite", "postgres"} {
		b.Run(d, func(b *testing.B) {
			db := testdb.Open(b, d)
			for _, s := range []struct {
				name    string
				sampler sdktrace.Sampler
			}{
				{"sampled", sdktrace.AlwaysSample()},
				{"sampled10", sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.1))},
				{"unsampled", sdktrace.NeverSample()},
				{"metrics", nil},
				{"nop", nil},
			} {
				b.Run(s.name, func(b *testing.B) {
					var obs repository.Observer = nopObserver{}
					if s.name != "nop" {
						obs = sdkObserver(b, s.sampler)
					}
					off, otel := mutator(b, db, nil), mutator(b, db, obs)
					alternate(b, off, otel)
				})
			}
		})
	}
}

// alternate runs b.N calls, off's and otel's in turn in blocks of 50, and
// reports each one's CPU and wall time per call.
func alternate(b *testing.B, off, otel func()) {
	const block = 50
	var cpu, thread, wall [2]time.Duration
	var calls [2]int
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	b.ResetTimer()
	flip := 0
	for i := 0; i < b.N; {
		// Each pair of blocks runs in a random order: a periodic cost,
		// such as SQLite's checkpoint every so many commits, would
		// otherwise fall on the same mode every time.
		if (i/block)%2 == 0 {
			flip = rand.IntN(2)
		}
		m := (i/block + flip) % 2
		n := min(block, b.N-i)
		run := [2]func(){off, otel}[m]
		c0, t0, w0 := cpuTime(syscall.RUSAGE_SELF), cpuTime(syscall.RUSAGE_THREAD), time.Now()
		pprof.Do(context.Background(), pprof.Labels("mode", [2]string{"off", "otel"}[m]), func(context.Context) {
			for range n {
				run()
			}
		})
		cpu[m] += cpuTime(syscall.RUSAGE_SELF) - c0
		thread[m] += cpuTime(syscall.RUSAGE_THREAD) - t0
		wall[m] += time.Since(w0)
		calls[m] += n
		i += n
	}
	b.StopTimer()
	if calls[0] == 0 || calls[1] == 0 {
		return // the first, one-call run
	}
	per := func(d time.Duration, m int) float64 { return float64(d.Nanoseconds()) / float64(calls[m]) }
	b.ReportMetric(per(cpu[0], 0), "off-cpu-ns/op")
	b.ReportMetric(per(cpu[1], 1), "otel-cpu-ns/op")
	b.ReportMetric(per(wall[0], 0), "off-wall-ns/op")
	b.ReportMetric(per(wall[1], 1), "otel-wall-ns/op")
	b.ReportMetric(100*(per(cpu[1], 1)/per(cpu[0], 0)-1), "otel-cpu-%")
	b.ReportMetric(per(thread[0], 0), "off-thread-cpu-ns/op")
	b.ReportMetric(per(thread[1], 1), "otel-thread-cpu-ns/op")
	b.ReportMetric(100*(per(thread[1], 1)/per(thread[0], 0)-1), "otel-thread-cpu-%")
}

// sdkObserver returns an otelgormlock Observer on the SDK, as
// BenchmarkMutateCost describes; a nil sampler makes no spans at all.
func sdkObserver(b *testing.B, sampler sdktrace.Sampler) *otelgormlock.Observer {
	ctx := context.Background()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() { _ = mp.Shutdown(ctx) })
	if sampler == nil {
		obs, err := otelgormlock.New(otelgormlock.WithMeterProvider(mp), otelgormlock.WithTracerProvider(noop.NewTracerProvider()))
		require.NoError(b, err)
		return obs
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler), sdktrace.WithBatcher(discard{}))
	b.Cleanup(func() { _ = tp.Shutdown(ctx) })
	obs, err := otelgormlock.New(otelgormlock.WithMeterProvider(mp), otelgormlock.WithTracerProvider(tp))
	require.NoError(b, err)
	return obs
}

// nopObserver is an Observer that does nothing.
type nopObserver struct{}

func (nopObserver) StartCall(ctx context.Context, _ repository.Call) context.Context { return ctx }
func (nopObserver) Attempt(context.Context, repository.Call, repository.Attempt)     {}
func (nopObserver) EndCall(context.Context, repository.Call, repository.CallEnd)     {}
func (nopObserver) Wait(context.Context, repository.Wait)                            {}
func (nopObserver) UnknownOutcome(context.Context, repository.UnknownOutcome)        {}

// mutator returns a func that runs one Mutate on db, on 100 records of
// its own in turn, reporting to obs (none when nil).
func mutator(b *testing.B, db *gorm.DB, obs repository.Observer) func() {
	ctx := context.Background()
	r, err := repository.New[fixtures.Account](db, repository.WithObserver(obs))
	require.NoError(b, err)
	ids := make([]int64, 100)
	for i := range ids {
		a := &fixtures.Account{Owner: fmt.Sprintf("bench-%d", i)}
		require.NoError(b, r.Create(ctx, a))
		ids[i] = a.ID
	}
	i := 0
	return func() {
		i++
		if _, err := r.Mutate(ctx, ids[i%len(ids)], increment); err != nil {
			b.Fatal(err)
		}
	}
}

// cpuTime is the user and system CPU time the process (who
// syscall.RUSAGE_SELF) or the calling thread (syscall.RUSAGE_THREAD) has
// used.
func cpuTime(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// What the Observer's own methods cost for one uncontended Mutate (a
// start, an attempt, a wait, an end), with no database: the part of
// BenchmarkMutateCost's difference that is otelgormlock and the SDK.
func BenchmarkObserverCalls(b *testing.B) {
	for _, s := range []struct {
		name    string
		sampler sdktrace.Sampler
	}{{"sampled", sdktrace.AlwaysSample()}, {"unsampled", sdktrace.NeverSample()}, {"metrics", nil}} {
		b.Run(s.name, func(b *testing.B) {
			ctx := context.Background()
			obs := sdkObserver(b, s.sampler)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				c := repository.Call{System: "postgresql", Table: "accounts", Op: repository.OpMutate, ID: int64(i), Start: time.Now()}
				cctx := obs.StartCall(ctx, c)
				obs.Wait(cctx, repository.Wait{Kind: repository.SQLiteGateWait, System: "postgresql", Table: "accounts", Duration: time.Microsecond})
				obs.Attempt(cctx, c, repository.Attempt{N: 1, Outcome: repository.AttemptApplied})
				obs.EndCall(cctx, c, repository.CallEnd{Report: repository.MutateReport{Op: repository.OpMutate, Attempts: 1}})
			}
		})
	}
}
