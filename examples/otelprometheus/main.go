// Command otelprometheus exports what gormlock's calls decide to
// Prometheus, through OpenTelemetry: package otelgormlock records the
// metrics with an OpenTelemetry MeterProvider whose reader is the
// Prometheus exporter, and promhttp serves them.
//
// From the examples directory:
//
//	go run ./otelprometheus                      # run, then print the gormlock metrics it exported
//	go run ./otelprometheus -addr :9464          # and serve them at http://localhost:9464/metrics until ^C
//	go run ./otelprometheus -db demo.db          # SQLite, in the file you name
//
// Writers increment one counter with Repository.Mutate; the program then
// checks the total and lists the metric families it exported (their
// values vary from run to run). Spans go to the global TracerProvider,
// which does nothing unless the application sets one (see
// otelgormlock.WithTracerProvider).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/opendb/sqlite"
	"github.com/gormlock/gormlock/otelgormlock"
	"github.com/gormlock/gormlock/repository"
)

// Counter is the record the writers share.
type Counter struct {
	models.Model
	N int64 `gorm:"not null"`
}

func main() {
	dbPath := flag.String("db", "", "SQLite database `file` to use (default: a temporary file, removed at exit)")
	addr := flag.String("addr", "", "after the run, serve /metrics at this `address` (host:port) until interrupted")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, *dbPath, *addr); err != nil {
		fmt.Fprintln(os.Stderr, "otelprometheus:", err)
		stop()
		os.Exit(1)
	}
}

// run sets up the exporter and the Observer, runs the writers on the SQLite
// file path (a temporary one when empty), writes what was exported to w,
// and serves /metrics at addr until ctx ends when addr is not empty.
func run(ctx context.Context, w io.Writer, path, addr string) (err error) {
	// The Prometheus exporter is a reader of an OpenTelemetry
	// MeterProvider; it registers its collector with reg.
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer func() { err = errors.Join(err, mp.Shutdown(context.WithoutCancel(ctx))) }()
	obs, err := otelgormlock.New(otelgormlock.WithMeterProvider(mp))
	if err != nil {
		return err
	}

	if path == "" {
		dir, err := os.MkdirTemp("", "otelprometheus")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		path = filepath.Join(dir, "demo.db")
	}
	db, err := sqlite.Open(path)
	if err != nil {
		return err
	}
	defer func() {
		if sqlDB, e := db.DB(); e == nil {
			err = errors.Join(err, sqlDB.Close())
		}
	}()
	// Every repository built on db afterwards reports to obs.
	if err := db.Use(repository.ObserverPlugin(obs)); err != nil {
		return err
	}
	if err := db.WithContext(ctx).AutoMigrate(&Counter{}); err != nil {
		return err
	}
	counters, err := repository.New[Counter](db)
	if err != nil {
		return err
	}
	c := &Counter{}
	if err := counters.Create(ctx, c); err != nil {
		return err
	}

	const writers, calls = 4, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for range writers {
		wg.Go(func() {
			for range calls {
				if _, err := counters.Mutate(ctx, c.ID, func(c *Counter) error { c.N++; return nil }); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := errors.Join(<-errs); err != nil {
		return err
	}
	got, err := counters.Get(ctx, c.ID)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%d writers x %d Mutate calls: counter at %d\n", writers, calls, got.N)

	handler := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	scrape := httptest.NewRecorder()
	handler.ServeHTTP(scrape, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	fmt.Fprintln(w, "gormlock metric families exported:")
	for _, f := range families(scrape.Body.String()) {
		fmt.Fprintln(w, " ", f)
	}

	if addr == "" {
		return nil
	}
	srv := &http.Server{Addr: addr, Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(rw, r)
			return
		}
		handler.ServeHTTP(rw, r)
	})}
	go func() {
		<-ctx.Done()
		_ = srv.Shutdown(context.WithoutCancel(ctx))
	}()
	fmt.Fprintf(w, "serving http://%s/metrics until interrupted\n", addr)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// families returns the "name type" of each gormlock metric family in a
// Prometheus text exposition, sorted.
func families(text string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if f, ok := strings.CutPrefix(line, "# TYPE "); ok && strings.HasPrefix(f, "gormlock_") {
			out = append(out, f)
		}
	}
	sort.Strings(out)
	return out
}
