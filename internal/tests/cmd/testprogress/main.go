// Command testprogress reads `go test -json` from standard input and prints
// the run as it goes, for CI logs on a slow or busy machine: each package
// when it starts and ends, every top-level test that took long, the full
// output of every failing test, and every minute the packages and tests
// still running. It exits with status 1 when a test or a build failed, or
// when the input ends before a package reported its end.
//
//	go test -race -json ./... | go run ./internal/tests/cmd/testprogress
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

// event is one line of test2json's output.
type event struct {
	Time       time.Time
	Action     string
	Package    string
	ImportPath string // of build-output and build-fail events
	Test       string
	Elapsed    float64
	Output     string
}

// slow is how long a top-level test must take to be named when it passes.
const slow = 10 * time.Second

// heartbeat is how often the tests still running are listed.
const heartbeat = time.Minute

type run struct {
	mu      sync.Mutex
	out     io.Writer
	start   time.Time
	running map[string]time.Time            // package -> start
	tests   map[string]map[string]time.Time // package -> top-level test -> start
	logs    map[string]*strings.Builder     // package/test -> output
	failed  []string
	passed  int
	skipped int
	pkgs    int
}

func main() {
	r := &run{out: os.Stdout, start: time.Now(), running: map[string]time.Time{},
		tests: map[string]map[string]time.Time{}, logs: map[string]*strings.Builder{}}
	done := make(chan struct{})
	go r.beat(done)
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 16<<20)
	for in.Scan() {
		line := in.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			// Not an event: the go command's own output (a build
			// error, a panic outside a test binary).
			fmt.Fprintln(r.out, string(line))
			continue
		}
		r.handle(e)
	}
	close(done)
	os.Exit(r.summary())
}

func (r *run) handle(e event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := e.Package + "/" + e.Test
	top := e.Test != "" && !strings.Contains(e.Test, "/")
	switch e.Action {
	case "start":
		r.running[e.Package] = e.Time
		r.tests[e.Package] = map[string]time.Time{}
	case "run":
		if top {
			r.tests[e.Package][e.Test] = e.Time
		}
	case "output", "build-output":
		switch {
		case e.Action == "build-output":
			key = e.ImportPath + "/"
		case e.Test == "":
			// Package-level output: kept for a package failure.
			key = e.Package + "/"
		}
		b := r.logs[key]
		if b == nil {
			b = &strings.Builder{}
			r.logs[key] = b
		}
		b.WriteString(e.Output)
	case "pass", "skip", "fail":
		if e.Test == "" {
			r.endPackage(e)
			return
		}
		if !top {
			return
		}
		delete(r.tests[e.Package], e.Test)
		d := time.Duration(e.Elapsed * float64(time.Second))
		switch e.Action {
		case "pass":
			r.passed++
			if d >= slow {
				fmt.Fprintf(r.out, "    ok   %s %s (%s)\n", short(e.Package), e.Test, d.Round(100*time.Millisecond))
			}
		case "skip":
			r.skipped++
		case "fail":
			r.failed = append(r.failed, e.Package+" "+e.Test)
			fmt.Fprintf(r.out, "--- FAIL %s %s (%s)\n", short(e.Package), e.Test, d.Round(100*time.Millisecond))
			r.printLogs(e.Package, e.Test)
		}
	case "build-fail":
		r.failed = append(r.failed, e.ImportPath+" (build)")
		fmt.Fprintf(r.out, "--- BUILD FAILED %s\n", e.ImportPath)
		if b := r.logs[e.ImportPath+"/"]; b != nil {
			fmt.Fprint(r.out, b.String())
		}
	}
}

// printLogs prints the output of test and of its subtests.
func (r *run) printLogs(pkg, test string) {
	var keys []string
	for k := range r.logs {
		if k == pkg+"/"+test || strings.HasPrefix(k, pkg+"/"+test+"/") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprint(r.out, r.logs[k].String())
	}
}

func (r *run) endPackage(e event) {
	delete(r.running, e.Package)
	r.pkgs++
	d := time.Duration(e.Elapsed * float64(time.Second)).Round(100 * time.Millisecond)
	switch e.Action {
	case "fail":
		if left := r.tests[e.Package]; len(left) > 0 {
			// The binary died (a panic, a timeout) with tests running.
			for t := range left {
				r.failed = append(r.failed, e.Package+" "+t+" (did not finish)")
			}
		}
		r.failed = append(r.failed, e.Package)
		fmt.Fprintf(r.out, "FAIL     %s (%s)\n", e.Package, d)
		if b := r.logs[e.Package+"/"]; b != nil {
			fmt.Fprint(r.out, b.String())
		}
	case "skip":
		// No test files.
	default:
		fmt.Fprintf(r.out, "ok       %s (%s)\n", e.Package, d)
	}
	delete(r.tests, e.Package)
}

// beat lists what is still running, every heartbeat, until done.
func (r *run) beat(done <-chan struct{}) {
	t := time.NewTicker(heartbeat)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case now := <-t.C:
			r.mu.Lock()
			var parts []string
			for pkg, since := range r.running {
				var ts []string
				for name, at := range r.tests[pkg] {
					ts = append(ts, fmt.Sprintf("%s %s", name, now.Sub(at).Round(time.Second)))
				}
				sort.Strings(ts)
				p := fmt.Sprintf("%s %s", short(pkg), now.Sub(since).Round(time.Second))
				if len(ts) > 0 {
					p += " [" + strings.Join(ts, ", ") + "]"
				}
				parts = append(parts, p)
			}
			sort.Strings(parts)
			fmt.Fprintf(r.out, "... %s: %d tests passed; running: %s\n",
				now.Sub(r.start).Round(time.Second), r.passed, strings.Join(parts, "; "))
			r.mu.Unlock()
		}
	}
}

func (r *run) summary() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	for pkg := range r.running {
		r.failed = append(r.failed, pkg+" (no end reported)")
	}
	fmt.Fprintf(r.out, "%d packages, %d top-level tests passed, %d skipped, %d failed, in %s\n",
		r.pkgs, r.passed, r.skipped, len(r.failed), time.Since(r.start).Round(time.Second))
	if len(r.failed) == 0 {
		return 0
	}
	fmt.Fprintln(r.out, "FAILED:")
	for _, f := range r.failed {
		fmt.Fprintln(r.out, "  "+f)
	}
	return 1
}

// short drops the module path from a package path.
func short(pkg string) string {
	return strings.TrimPrefix(pkg, "github.com/gormlock/gormlock/")
}
