package gormlockvet_test

import (
	"path/filepath"
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

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
