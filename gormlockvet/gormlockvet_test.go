package gormlockvet_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/analysistest"
	"golang.org/x/tools/go/analysis/checker"
	"golang.org/x/tools/go/packages"

	"github.com/gormlock/gormlock/gormlockvet"
)

// TestApp runs the analyzer over testdata/app: every unguarded write there
// carries the report it must get, and the guarded writes, reads, creates,
// unversioned models, gormlock's calls and marked lines get none. The
// suggested fixes turn each file into its .golden copy.
func TestApp(t *testing.T) {
	dir, err := filepath.Abs("testdata/app")
	if err != nil {
		t.Fatal(err)
	}
	analysistest.RunWithSuggestedFixes(t, dir, gormlockvet.Analyzer, "./...")
}

// TestExamples runs the analyzer over the project's examples module: it
// must report nothing. Its deliberate unguarded writes (the bank's negative
// control, the clean-ups of each run's own rows, the quickstart's act 1)
// carry //gormlockvet:ignore with the reason; remove one and this fails.
func TestExamples(t *testing.T) {
	skipWholeModules(t)
	dir, err := filepath.Abs("../examples")
	if err != nil {
		t.Fatal(err)
	}
	// Not analysistest: the examples' own comments are not its "want"s.
	if got := analyze(t, dir, "./..."); len(got) != 0 {
		t.Errorf("%d reports on the examples, want none:\n%s", len(got), strings.Join(got, "\n"))
	}
}

// skipWholeModules skips a test that type-checks a whole module's
// dependencies from source under -race (minutes on the shared machine, for
// no concurrency of ours: the analyzer runs one package at a time); CI runs
// them again without -race, on the newer Go.
func skipWholeModules(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("loads a whole module and its dependencies from source; run without -short and -race")
	}
}

// analyze loads the packages of the module in dir (with their tests) and
// returns the analyzer's reports on them, as path:line:col: message with
// the path relative to dir.
func analyze(t *testing.T, dir string, patterns ...string) []string {
	t.Helper()
	cfg := &packages.Config{
		Mode:  packages.LoadAllSyntax | packages.NeedModule,
		Dir:   dir,
		Tests: true,
		Env:   append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod"),
	}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		t.Fatal(err)
	}
	if packages.PrintErrors(pkgs) > 0 {
		t.Fatalf("the packages of %s do not load", dir)
	}
	graph, err := checker.Analyze([]*analysis.Analyzer{gormlockvet.Analyzer}, pkgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var out []string
	roots := 0
	for act := range graph.All() {
		if act.Err != nil {
			t.Errorf("%s: %v", act, act.Err)
		}
		if !act.IsRoot || act.Analyzer != gormlockvet.Analyzer {
			continue
		}
		roots++
		for _, d := range act.Diagnostics {
			p := act.Package.Fset.Position(d.Pos)
			rel, err := filepath.Rel(dir, p.Filename)
			if err != nil {
				rel = p.Filename
			}
			r := fmt.Sprintf("%s:%d:%d: %s", filepath.ToSlash(rel), p.Line, p.Column, d.Message)
			if !seen[r] { // a package and its test variant
				seen[r] = true
				out = append(out, r)
			}
		}
	}
	if roots == 0 {
		t.Fatalf("analyzed no package of %s", dir)
	}
	return out
}
