package gormlockvet_test

import (
	"os"
	"path/filepath"
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
	if testing.Short() {
		t.Skip("loads the examples module and its dependencies")
	}
	dir, err := filepath.Abs("../examples")
	if err != nil {
		t.Fatal(err)
	}
	// Not analysistest: the examples' own comments are not its "want"s.
	cfg := &packages.Config{
		Mode:  packages.LoadAllSyntax | packages.NeedModule,
		Dir:   dir,
		Tests: true,
		Env:   append(os.Environ(), "GOWORK=off"),
	}
	pkgs, err := packages.Load(cfg, "./...")
	if err != nil {
		t.Fatal(err)
	}
	if packages.PrintErrors(pkgs) > 0 {
		t.Fatal("the examples do not load")
	}
	graph, err := checker.Analyze([]*analysis.Analyzer{gormlockvet.Analyzer}, pkgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	roots := 0
	for act := range graph.All() {
		if act.Err != nil {
			t.Errorf("%s: %v", act, act.Err)
		}
		if !act.IsRoot {
			continue
		}
		roots++
		for _, d := range act.Diagnostics {
			t.Errorf("%s: %s", act.Package.Fset.Position(d.Pos), d.Message)
		}
	}
	if roots < 5 {
		t.Fatalf("analyzed %d packages of the examples, want every one", roots)
	}
}
