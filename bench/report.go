package main

// The document generator: `go run ./bench -docs` rewrites the generated
// tables of bench/README.md and docs/performance.md from one run's JSON
// (bench/results/<db>.json), so that every figure in them comes from one
// run and is stated once. `make bench-report` runs the matrix first.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// reportDBs are the runs whose results the documents show, in order: the
// name of the run's results/<name>.json and of its blocks, its database,
// and the heading it gets. sqlite-procs is SQLite with the workers in
// processes (-procs 4 -workers 32).
var reportDBs = []struct{ name, db, title string }{
	{dbSQLite, dbSQLite, "SQLite"},
	{"sqlite-procs", dbSQLite, "SQLite, workers in processes"},
	{dbPostgres, dbPostgres, "PostgreSQL"},
	{dbMariaDB, dbMariaDB, "MariaDB"},
	{dbGalera, dbGalera, "Galera"},
}

// baselines are the modes every other mode is compared with, in the order
// of the comparison rows: database/sql with the database's driver, pgx's
// own pool (PostgreSQL), plain GORM. A baseline is compared with the ones
// before it only, so no ratio is stated twice (as itself and its inverse).
var baselines = []struct{ mode, name string }{
	{ModeRaw, "`database/sql`"},
	{ModePgxPool, "pgxpool"},
	{ModeGORM, "plain GORM"},
}

// generatedDocs are the documents the generator rewrites, relative to the
// repository root, and the blocks each must hold: results-<db> (the
// measurements) in bench/README.md, ratios-<db> (every mode against every
// baseline) in docs/performance.md.
var generatedDocs = []struct {
	path   string
	prefix string
}{
	{"bench/README.md", "results-"},
	{"docs/performance.md", "ratios-"},
}

// ErrMarkers is a document whose generated-block markers are malformed.
var ErrMarkers = errors.New("bench: malformed generated-block markers")

var markerRE = regexp.MustCompile(`(?m)^<!-- bench:(begin|end) ([a-z0-9-]+) -->[ \t]*$`)

// block is one generated region of a document: the lines strictly between
// its markers are start:end of the text.
type block struct {
	name       string
	start, end int
}

// findBlocks returns the generated blocks of text, in order, or an error
// naming the first marker that does not pair (an end without its begin, a
// begin without its end, nested or repeated blocks).
func findBlocks(path, text string) ([]block, error) {
	var out []block
	open := ""
	openAt := 0
	for _, m := range markerRE.FindAllStringSubmatchIndex(text, -1) {
		kind, name := text[m[2]:m[3]], text[m[4]:m[5]]
		line := strings.Count(text[:m[0]], "\n") + 1
		switch {
		case kind == "begin" && open != "":
			return nil, fmt.Errorf("%w: %s:%d: bench:begin %s inside block %s", ErrMarkers, path, line, name, open)
		case kind == "begin":
			open, openAt = name, m[1]+1
			if openAt > len(text) {
				openAt = len(text)
			}
		case open != name:
			return nil, fmt.Errorf("%w: %s:%d: bench:end %s without its bench:begin", ErrMarkers, path, line, name)
		default:
			if slices.ContainsFunc(out, func(b block) bool { return b.name == name }) {
				return nil, fmt.Errorf("%w: %s:%d: block %s appears twice", ErrMarkers, path, line, name)
			}
			out = append(out, block{name: name, start: openAt, end: m[0]})
			open = ""
		}
	}
	if open != "" {
		return nil, fmt.Errorf("%w: %s: bench:begin %s has no bench:end", ErrMarkers, path, open)
	}
	return out, nil
}

// loadReports reads results/<db>.json under benchDir for every database
// of reportDBs.
func loadReports(benchDir string) (map[string]report, error) {
	out := map[string]report{}
	for _, d := range reportDBs {
		path := filepath.Join(benchDir, "results", d.name+".json")
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("bench -docs: %w (make bench-report writes it)", err)
		}
		var rep report
		if err := json.Unmarshal(b, &rep); err != nil {
			return nil, fmt.Errorf("bench -docs: %s: %w", path, err)
		}
		if rep.Config.DB != d.db {
			return nil, fmt.Errorf("bench -docs: %s holds a run on %q", path, rep.Config.DB)
		}
		if len(rep.Results) == 0 {
			return nil, fmt.Errorf("bench -docs: %s has no results", path)
		}
		out[d.name] = rep
	}
	return out, nil
}

// renderBlocks returns every generated block's content by name.
func renderBlocks(reps map[string]report) map[string]string {
	out := map[string]string{}
	for _, d := range reportDBs {
		rep, ok := reps[d.name]
		if !ok {
			continue
		}
		out["results-"+d.name] = renderResults(d.name, d.title, rep)
		out["ratios-"+d.name] = renderRatios(d.name, d.title, rep)
	}
	return out
}

// runLine says how and when rep, results/name.json, was measured.
func runLine(name string, rep report) string {
	c := rep.Config
	extra := ""
	if c.Nodes > 1 {
		extra = fmt.Sprintf(", workers spread over %d nodes", c.Nodes)
	}
	if c.Procs > 1 {
		extra += fmt.Sprintf(", workers in %d processes", c.Procs)
	}
	return fmt.Sprintf("Run of %s, %s: %d interleaved rounds of %v per cell, modes %s%s (`results/%s.json`).",
		rep.Started.Format("2006-01-02 15:04 UTC"), rep.Go, c.Rounds, c.Duration, strings.Join(c.Modes, ", "), extra, name)
}

// renderResults is the measurement table of one run, without ratios
// (docs/performance.md states those).
func renderResults(name, title string, rep report) string {
	var b strings.Builder
	galera := rep.Config.DB == dbGalera
	fmt.Fprintf(&b, "%s\n\n", runLine(name, rep))
	aborts, align := "", ""
	if galera {
		aborts, align = " aborts/op |", "---:|"
	}
	procs, alignProcs := "", ""
	if rep.Config.Procs > 1 {
		procs, alignProcs = " procs |", "---:|"
	}
	fmt.Fprintf(&b, "| mode | keys | workers |%s ops/s | client CPU/op | retries/op |%s p50 | p99 | max | errors | lost |\n", procs, aborts)
	fmt.Fprintf(&b, "|---|---:|---:|%s---:|---:|---:|%s---:|---:|---:|---:|---:|\n", alignProcs, align)
	for _, r := range rep.Results {
		extra, procsCell := "", ""
		if galera {
			extra = fmt.Sprintf(" %.2f |", r.AbortsPerOp)
		}
		if rep.Config.Procs > 1 {
			procsCell = fmt.Sprintf(" %d |", r.Procs)
		}
		fmt.Fprintf(&b, "| %s | %d | %d |%s %.0f | %v | %.2f |%s %v | %v | %v | %d | %d |\n",
			r.Mode, r.Keys, r.Workers, procsCell, r.OpsPerSec, r.CPUPerOp.Round(100*time.Nanosecond), r.RetriesPerOp, extra,
			r.P50.Round(time.Microsecond), r.P99.Round(time.Microsecond), r.Max.Round(time.Microsecond), r.Errors, r.Lost)
	}
	var notes strings.Builder
	writeNotes(&notes, rep)
	b.WriteString(notes.String())
	fmt.Fprintf(&b, "\n![%s throughput](results/%s.svg)\n", title, name)
	return b.String()
}

// cellKey is a cell without its mode.
type cellKey struct{ keys, workers int }

// roundRatio is the median over rounds of a's throughput over b's in the
// same round: both sides of every ratio ran next to each other. It is 0
// when the rounds do not pair up.
func roundRatio(a, b Result) float64 {
	if len(a.RoundOpsPerSec) == 0 || len(a.RoundOpsPerSec) != len(b.RoundOpsPerSec) {
		return 0
	}
	var rs []float64
	for i, x := range a.RoundOpsPerSec {
		if y := b.RoundOpsPerSec[i]; y > 0 {
			rs = append(rs, x/y)
		}
	}
	return median(rs)
}

// renderRatios is, for one run, every mode's throughput against every
// baseline that ran, in every cell: the median of the per-round ratios.
func renderRatios(name, title string, rep report) string {
	var cells []cellKey
	byCell := map[cellKey]map[string]Result{}
	var modes []string
	for _, r := range rep.Results {
		k := cellKey{r.Keys, r.Workers}
		if byCell[k] == nil {
			byCell[k] = map[string]Result{}
			cells = append(cells, k)
		}
		byCell[k][r.Mode] = r
		if !slices.Contains(modes, r.Mode) {
			modes = append(modes, r.Mode)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s, the run of %s (`bench/results/%s.json`, %d rounds of %v): the row's mode's throughput over the baseline's, the median of the per-round ratios.\n\n",
		title, rep.Started.Format("2006-01-02 15:04 UTC"), name, rep.Config.Rounds, rep.Config.Duration)
	b.WriteString("| mode | against |")
	for _, c := range cells {
		fmt.Fprintf(&b, " %s × %d |", keysLabel(c.keys), c.workers)
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---:|", len(cells)) + "\n")
	for _, m := range modes {
		for bi, base := range baselines {
			if base.mode == m || !slices.Contains(modes, base.mode) {
				continue
			}
			// A baseline is compared with the baselines before it only.
			if mi := slices.IndexFunc(baselines, func(x struct{ mode, name string }) bool { return x.mode == m }); mi >= 0 && mi < bi {
				continue
			}
			fmt.Fprintf(&b, "| %s | %s |", m, base.name)
			for _, c := range cells {
				r, ok1 := byCell[c][m]
				bs, ok2 := byCell[c][base.mode]
				if x := roundRatio(r, bs); ok1 && ok2 && x > 0 {
					fmt.Fprintf(&b, " %.2f× |", x)
				} else {
					b.WriteString(" — |")
				}
			}
			b.WriteString("\n")
		}
	}
	for _, s := range rep.Skipped {
		fmt.Fprintf(&b, "\n- %s: skipped: %s", s.Mode, s.Why)
	}
	if len(rep.Skipped) > 0 {
		b.WriteString("\n")
	}
	return b.String()
}

// keysLabel names a key count as the column heading shows it.
func keysLabel(keys int) string {
	if keys == 1 {
		return "1 row"
	}
	s := strconv.Itoa(keys)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s + " rows"
}

// rewriteDoc replaces the content of every generated block of the document
// text with blocks[name] and reports an error for a block it does not
// know; want lists the names it must hold (every one, exactly once).
func rewriteDoc(path, text string, blocks map[string]string, want []string) (string, error) {
	found, err := findBlocks(path, text)
	if err != nil {
		return "", err
	}
	var out strings.Builder
	last := 0
	var names []string
	for _, bl := range found {
		content, ok := blocks[bl.name]
		if !ok {
			return "", fmt.Errorf("%w: %s: unknown generated block %s", ErrMarkers, path, bl.name)
		}
		names = append(names, bl.name)
		out.WriteString(text[last:bl.start])
		out.WriteString(strings.TrimRight(content, "\n") + "\n")
		last = bl.end
	}
	out.WriteString(text[last:])
	for _, w := range want {
		if !slices.Contains(names, w) {
			return "", fmt.Errorf("%w: %s: the generated block %s is missing (add <!-- bench:begin %s --> and <!-- bench:end %s -->)", ErrMarkers, path, w, w, w)
		}
	}
	return out.String(), nil
}

// wantBlocks are the blocks the document with prefix must hold.
func wantBlocks(prefix string) []string {
	var out []string
	for _, d := range reportDBs {
		out = append(out, prefix+d.name)
	}
	return out
}

// generateDocs rewrites the generated blocks of the documents under root
// from root/bench/results/*.json. It writes nothing unless every document
// could be rewritten.
func generateDocs(root string) error {
	reps, err := loadReports(filepath.Join(root, "bench"))
	if err != nil {
		return err
	}
	blocks := renderBlocks(reps)
	updated := map[string]string{}
	for _, d := range generatedDocs {
		path := filepath.Join(root, d.path)
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if updated[path], err = rewriteDoc(d.path, string(b), blocks, wantBlocks(d.prefix)); err != nil {
			return err
		}
	}
	for path, text := range updated {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// repoRoot finds the repository root from the working directory: the
// folder holding bench/README.md, here or one up (go run from bench/).
func repoRoot() (string, error) {
	for _, dir := range []string{".", ".."} {
		if _, err := os.Stat(filepath.Join(dir, "bench", "README.md")); err == nil {
			return dir, nil
		}
	}
	return "", errors.New("bench -docs: run it from the repository root or from bench/ (no bench/README.md found)")
}
