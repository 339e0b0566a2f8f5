// Command bench answers "which mode should I use, and what does gormlock
// cost me?" on your own database: it runs the same work — increment a
// counter in a random record — in each mode, with 1, 8 and 32 workers, on
// one hot row and on 1,000 rows, and prints a table, writes it as JSON and
// draws a chart.
//
//	go run ./bench                                   # embedded SQLite in a temporary file
//	go run ./bench -db postgres -dsn postgres://postgres@127.0.0.1:5432/test?sslmode=disable
//	go run ./bench -db mariadb -dsn 'root@tcp(127.0.0.1:3306)/test?parseTime=true'
//	go run ./bench -db galera -dsn 'dsn1,dsn2,dsn3'   # or GORMLOCK_GALERA_DSNS; worker w on node w%3
//	go run ./bench -modes mutate,pessimistic -workers 32 -keys 1 -duration 5s
//
// Modes: raw (the same SQL through database/sql: the floor), gorm (plain GORM
// with a hand-written WHERE version = ?), mutate (Mutate as repository.New
// gives it, one Repository per process), optimistic-multi (Mutate with
// adaptive off, a Repository per worker), adaptive (Mutate as New gives
// it, a Repository per worker), pessimistic (MutateRowLocked), atomic
// (Apply), lease (Leases.Acquire + Leases.Update); and, only when named,
// optimistic (Mutate with adaptive off, one Repository per process), claim
// (Claim, FOR UPDATE SKIP LOCKED, in a transaction; skipped where gormlock
// refuses it) and unguarded, the negative control (read, write back, no
// version), which fails the run by losing updates. Every cell checks
// that no increment was lost — the counters grew by exactly the successful
// operations — and the run fails loudly when one was. On a Galera cluster
// the workers are spread over the nodes, each node with its own pool and
// repositories, and the counters are read on every node after it caught up.
//
// With -procs N the workers of a cell run in up to N child processes (this
// command, started again), each with its own pools and repositories, so
// contention between processes is measured rather than modelled; the
// counters are still checked here, against every child's operations.
//
// Output: the table on stdout (Markdown), results.json and throughput.svg in
// -out, and progress on stderr.
//
// With -docs it measures nothing: it rewrites the generated tables of
// bench/README.md and docs/performance.md from bench/results/<db>.json
// (report.go); make bench-report runs the whole matrix and then this.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gormlock/gormlock/locking"
)

// config is one run of the command.
type config struct {
	DB       string        `json:"db"`
	Modes    []string      `json:"modes"`
	Workers  []int         `json:"workers"`
	Keys     []int         `json:"keys"`
	Duration time.Duration `json:"duration_ns"`
	// Rounds is how many times each cell is measured. The rounds run one
	// after another over all cells, so every mode sees the same spells of
	// machine noise; a cell reports the median round.
	Rounds int `json:"rounds"`
	// Procs is how many processes a cell's workers are spread over: 1,
	// goroutines of this process; more, child processes, each with its own
	// pools and repositories (see procs.go).
	Procs int    `json:"procs"`
	Out   string `json:"-"`
	// Nodes is how many servers the workers were spread over (Galera).
	Nodes int `json:"nodes,omitempty"`
	// Retry is the policy of every retrying mode (gormlock's and the
	// hand-written loops alike); the zero value means
	// locking.DefaultRetryPolicy().
	Retry locking.RetryPolicy `json:"retry"`
	// SweepRows and SweepPayloads, when set, add the size sweep: a guarded
	// Update's cost per table size and payload size.
	SweepRows     []int `json:"sweep_rows,omitempty"`
	SweepPayloads []int `json:"sweep_payloads,omitempty"`
}

// report is the JSON file.
type report struct {
	Config  config        `json:"config"`
	Started time.Time     `json:"started"`
	Go      string        `json:"go"`
	Results []Result      `json:"results"`
	Sweep   []SweepResult `json:"sweep,omitempty"`
	// Skipped are the modes this database cannot run, and why.
	Skipped []Skip `json:"skipped,omitempty"`
}

// Skip is a mode left out of a run, and gormlock's reason.
type Skip struct {
	Mode string `json:"mode"`
	Why  string `json:"why"`
}

func main() {
	runChildIfAsked() // a child process of a -procs run does its part and exits
	var cfg config
	var modes, workers, keys, dsn string
	flag.StringVar(&cfg.DB, "db", dbSQLite, "database: "+strings.Join(databases, ", "))
	flag.StringVar(&dsn, "dsn", "", "the database's `DSN`: a PostgreSQL URL; a MariaDB one, root@tcp(127.0.0.1:3306)/test?parseTime=true; with -db galera, the nodes' DSNs separated by commas (default: $"+galeraEnv+"); or a SQLite file (default: a temporary file)")
	flag.StringVar(&modes, "modes", strings.Join(AllModes, ","), "comma-separated `modes`; also "+strings.Join(OptInModes, " and ")+", which run only when named")
	flag.StringVar(&workers, "workers", "1,8,32", "comma-separated worker `counts`")
	flag.StringVar(&keys, "keys", "1,1000", "comma-separated key `counts` (1 = one hot row)")
	flag.DurationVar(&cfg.Duration, "duration", 2*time.Second, "measuring time per cell and round")
	flag.IntVar(&cfg.Rounds, "rounds", 1, "measure every cell this many `times`, interleaved, and report the median")
	flag.IntVar(&cfg.Procs, "procs", 1, "spread each cell's workers over this many `processes` (worker w in process w % procs), each with its own pool: 1 runs them as goroutines of this process")
	def := locking.DefaultRetryPolicy()
	flag.IntVar(&cfg.Retry.MaxAttempts, "retry-attempts", def.MaxAttempts, "retry policy: attempts in all, the first included")
	flag.DurationVar(&cfg.Retry.BaseDelay, "retry-base", def.BaseDelay, "retry policy: backoff ceiling before the second attempt (doubles per attempt)")
	flag.DurationVar(&cfg.Retry.MaxDelay, "retry-max", def.MaxDelay, "retry policy: cap of the backoff ceiling")
	flag.StringVar(&cfg.Out, "out", "bench/out", "output `folder` for results.json and throughput.svg")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to `file` (go tool pprof)")
	sweepRows := flag.String("sweep-rows", "", "comma-separated table `sizes` for the size sweep, e.g. 1000,1000000 (off when empty)")
	sweepPayloads := flag.String("sweep-payloads", "", "comma-separated payload `bytes` for the size sweep (default 100,102400; 100,65535 on MariaDB, whose TEXT column holds 64 KB)")
	docs := flag.Bool("docs", false, "measure nothing: rewrite the generated tables of bench/README.md and docs/performance.md from bench/results/<db>.json (make bench-report runs the matrix and then this)")
	flag.Parse()
	if *docs {
		root, err := repoRoot()
		if err == nil {
			err = generateDocs(root)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	var err error
	if cfg.Modes, err = parseModes(modes); err == nil {
		if cfg.Workers, err = parseInts("workers", workers); err == nil {
			cfg.Keys, err = parseInts("keys", keys)
		}
	}
	if err == nil && *sweepRows != "" {
		if *sweepPayloads == "" {
			*sweepPayloads = defaultSweepPayloads(cfg.DB)
		}
		if cfg.SweepRows, err = parseInts("sweep-rows", *sweepRows); err == nil {
			cfg.SweepPayloads, err = parseInts("sweep-payloads", *sweepPayloads)
		}
	}
	if err == nil && !slices.Contains(databases, cfg.DB) {
		err = fmt.Errorf("-db must be one of %s, got %q", strings.Join(databases, ", "), cfg.DB)
	}
	if err == nil && (cfg.DB == dbPostgres || cfg.DB == dbMariaDB) && dsn == "" {
		err = fmt.Errorf("-db %s needs -dsn", cfg.DB)
	}
	if err == nil && cfg.DB == dbGalera {
		_, err = galeraDSNs(dsn)
	}
	if err == nil && cfg.Duration <= 0 {
		err = errors.New("-duration must be positive")
	}
	if err == nil && cfg.Rounds < 1 {
		err = fmt.Errorf("-rounds must be at least 1, got %d", cfg.Rounds)
	}
	if err == nil && cfg.Procs < 1 {
		err = fmt.Errorf("-procs must be at least 1, got %d", cfg.Procs)
	}
	if err == nil {
		err = cfg.Retry.Validate()
	}
	if err != nil || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "bench:", err)
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		defer func() { pprof.StopCPUProfile(); _ = f.Close() }()
	}
	if err := run(ctx, os.Stdout, os.Stderr, cfg, dsn); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		stop()
		pprof.StopCPUProfile() // flush what was measured; a no-op without -cpuprofile
		os.Exit(1)
	}
}

func parseModes(s string) ([]string, error) {
	var out []string
	for _, m := range strings.Split(s, ",") {
		m = strings.TrimSpace(m)
		if !slices.Contains(AllModes, m) && !slices.Contains(OptInModes, m) {
			return nil, fmt.Errorf("unknown mode %q (want some of %s)", m, strings.Join(slices.Concat(AllModes, OptInModes), ","))
		}
		out = append(out, m)
	}
	return out, nil
}

func parseInts(name, s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-%s: %q is not a positive integer", name, f)
		}
		out = append(out, n)
	}
	return out, nil
}

// run measures every cell of cfg and writes the outputs.
func run(ctx context.Context, stdout, stderr io.Writer, cfg config, dsn string) (err error) {
	maxWorkers := 0
	for _, w := range cfg.Workers {
		maxWorkers = max(maxWorkers, w)
	}
	t, err := openTarget(ctx, stderr, cfg.DB, dsn, maxWorkers)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, t.close()) }()
	if cfg.Retry == (locking.RetryPolicy{}) {
		cfg.Retry = locking.DefaultRetryPolicy()
	}
	h, err := newHarness(t, cfg.DB, cfg.Retry)
	if err != nil {
		return err
	}
	defer h.close()
	if len(t.nodes) > 1 {
		cfg.Nodes = len(t.nodes)
	}
	cfg.Procs = max(cfg.Procs, 1)
	if h.procs = cfg.Procs; h.procs > 1 {
		if h.procDSNs, err = processDSNs(t, cfg.DB); err != nil {
			return err
		}
	}
	rep := report{Config: cfg, Started: time.Now().UTC(), Go: goVersion()}
	var modes []string
	for _, m := range cfg.Modes {
		if why := h.skip(ctx, m); why != "" {
			fmt.Fprintf(stderr, "bench: %s skipped on %s: %s\n", m, cfg.DB, why)
			rep.Skipped = append(rep.Skipped, Skip{Mode: m, Why: why})
			continue
		}
		modes = append(modes, m)
	}
	if len(modes) == 0 {
		return fmt.Errorf("%w: every mode of -modes %s is skipped on %s", errNothingToRun, strings.Join(cfg.Modes, ","), cfg.DB)
	}
	var cells []Cell
	for _, k := range cfg.Keys {
		for _, w := range cfg.Workers {
			for _, m := range modes {
				cells = append(cells, Cell{Mode: m, Keys: k, Workers: w})
			}
		}
	}
	rounds := max(cfg.Rounds, 1)
	rep.Results = make([]Result, len(cells))
	total := rounds * len(cells)
	for round := range rounds {
		for j := range cells {
			// Odd rounds run the cells in reverse, so that no cell always
			// runs right after another (a cell's rounds alternate which of
			// two neighbours runs first).
			i := j
			if round%2 == 1 {
				i = len(cells) - 1 - j
			}
			c := cells[i]
			step := round*len(cells) + j
			fmt.Fprintf(stderr, "\r%s [%3d/%3d] round %d/%d %-11s keys=%-5d workers=%-3d", bar(step, total), step+1, total, round+1, rounds, c.Mode, c.Keys, c.Workers)
			r, err := h.run(ctx, c, cfg.Duration)
			if err != nil {
				fmt.Fprintln(stderr)
				return err
			}
			rep.Results[i].merge(r)
		}
	}
	fmt.Fprintf(stderr, "\r%s [%3d/%3d] done%60s\n", bar(total, total), total, total, "")
	summarize(rep.Results)

	writeTable(stdout, cfg.DB, cfg.Procs, rep.Results)
	writeNotes(stdout, rep)
	if len(cfg.SweepRows) > 0 {
		fmt.Fprintf(stderr, "size sweep: rows %v, payloads %v\n", cfg.SweepRows, cfg.SweepPayloads)
		if rep.Sweep, err = sweep(ctx, stderr, t.nodes[0], t.dsns[0], cfg.SweepRows, cfg.SweepPayloads, cfg.Duration, cfg.Rounds); err != nil {
			return err
		}
		writeSweep(stdout, cfg.DB, rep.Sweep)
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(cfg.Out, "results.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return writeChart(filepath.Join(cfg.Out, "throughput.svg"), cfg.DB, cfg.Procs, rep.Results)
}

// bar is a 20-character progress bar.
func bar(done, total int) string {
	n := 0
	if total > 0 {
		n = done * 20 / total
	}
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", 20-n) + "]"
}

// summarize finishes every cell and sets its throughput relative to the raw
// mode's in the same keys and workers: the median over rounds of the ratio
// within each round, so both sides of every ratio ran next to each other.
func summarize(results []Result) {
	raw := map[[2]int]*Result{}
	for i := range results {
		results[i].finish()
		if r := &results[i]; r.Mode == ModeRaw {
			raw[[2]int{r.Keys, r.Workers}] = r
		}
	}
	for i := range results {
		r := &results[i]
		base := raw[[2]int{r.Keys, r.Workers}]
		if base == nil || len(base.RoundOpsPerSec) != len(r.RoundOpsPerSec) {
			continue
		}
		var ratios []float64
		for k, ops := range r.RoundOpsPerSec {
			if b := base.RoundOpsPerSec[k]; b > 0 {
				ratios = append(ratios, ops/b)
			}
		}
		r.VsRaw = median(ratios)
	}
}

// median returns the median of xs, 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// writeTable prints the results as a Markdown table. On Galera it adds
// the transactions the cluster aborted per operation, and marks the modes
// whose locks are node-local; with -procs above 1, the processes each
// cell's workers ran in.
func writeTable(w io.Writer, db string, procs int, results []Result) {
	galera := db == dbGalera
	aborts, alignAborts := "", ""
	if galera {
		aborts, alignAborts = " aborts/op |", "---:|"
	}
	procsCol, alignProcs := "", ""
	if procs > 1 {
		procsCol, alignProcs = " procs |", "---:|"
	}
	fmt.Fprintf(w, "| db | mode | keys | workers |%s ops/s | vs raw | client CPU/op | retries/op |%s p50 | p99 | max | errors | lost |\n", procsCol, aborts)
	fmt.Fprintf(w, "|---|---|---:|---:|%s---:|---:|---:|---:|%s---:|---:|---:|---:|---:|\n", alignProcs, alignAborts)
	for _, r := range results {
		procsCell := ""
		if procs > 1 {
			procsCell = fmt.Sprintf(" %d |", r.Procs)
		}
		vs := "—"
		if r.VsRaw > 0 {
			vs = fmt.Sprintf("%.2f×", r.VsRaw)
		}
		mode, extra := r.Mode, ""
		if galera {
			extra = fmt.Sprintf(" %.2f |", r.AbortsPerOp)
			if r.Note != "" {
				mode += " (node-local)"
			}
		}
		fmt.Fprintf(w, "| %s | %s | %d | %d |%s %.0f | %s | %v | %.2f |%s %v | %v | %v | %d | %d |\n",
			db, mode, r.Keys, r.Workers, procsCell, r.OpsPerSec, vs, r.CPUPerOp.Round(100*time.Nanosecond), r.RetriesPerOp, extra,
			r.P50.Round(time.Microsecond), r.P99.Round(time.Microsecond), r.Max.Round(time.Microsecond), r.Errors, r.Lost)
	}
}

// writeNotes prints, under the table, the modes left out and how the
// others behave where that differs from their description.
func writeNotes(w io.Writer, rep report) {
	var notes []string
	for _, s := range rep.Skipped {
		notes = append(notes, fmt.Sprintf("%s: skipped: %s", s.Mode, s.Why))
	}
	seen := map[string]bool{}
	for _, r := range rep.Results {
		if r.Note != "" && !seen[r.Mode] {
			seen[r.Mode] = true
			notes = append(notes, fmt.Sprintf("%s: %s", r.Mode, r.Note))
		}
	}
	if rep.Config.Nodes > 1 {
		notes = append(notes, fmt.Sprintf("workers spread over %d nodes (worker w on node w %% %d), each node with its own pool and repositories; aborts/op: transactions the cluster aborted (wsrep_local_cert_failures + wsrep_local_bf_aborts, all nodes) per successful operation; each is either answered with 1213 (ErrDeadlock) and retried by the client, which retries/op counts, or an autocommit statement the node retried by itself (wsrep_retry_autocommit)", rep.Config.Nodes, rep.Config.Nodes))
	}
	if p := rep.Config.Procs; p > 1 {
		notes = append(notes, fmt.Sprintf("procs: each cell's workers ran in min(%d, workers) child processes started together (worker w in process w %% %d), each with its own pool and repositories (mutate and optimistic: one Repository per process, shared by its workers); client CPU/op sums the processes' CPU time, and lost is checked here on the database, against the successful operations of all of them", p, p))
	}
	if len(notes) == 0 {
		return
	}
	fmt.Fprintln(w)
	for _, n := range notes {
		fmt.Fprintf(w, "- %s\n", n)
	}
}
