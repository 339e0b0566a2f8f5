package gormlockvet_test

import (
	"strings"
	"testing"
)

// TestApp runs the analyzer over testdata/app: every unguarded write there
// carries the report it must get, and the guarded writes, reads, creates,
// unversioned models, gormlock's calls and marked lines get none. The
// suggested fixes turn each file into its .golden copy.
func TestApp(t *testing.T) {
	dir := moduleDir(t, "testdata/app")
	found := analyze(t, dir, load(t, dir, true, "./..."))
	checkWants(t, dir, found)
	checkGolden(t, dir, found)
}

// TestStorefront runs the analyzer over testdata/storefront, a small shop
// back end written the way GORM applications are (handlers, a service
// layer passing *gorm.DB around, a repository layer with raw SQL,
// transactions, scopes, helpers returning chains, an admin form): every
// unguarded write carries the report it must get, every other write and
// read none.
func TestStorefront(t *testing.T) {
	dir := moduleDir(t, "testdata/storefront")
	checkWants(t, dir, analyze(t, dir, load(t, dir, true, "./...")))
}

// TestExamples runs the analyzer over the project's examples module: it
// must report nothing. Its deliberate unguarded writes (the bank's negative
// control, the clean-ups of each run's own rows, the quickstart's act 1)
// carry //gormlockvet:ignore with the reason; remove one and this fails.
func TestExamples(t *testing.T) {
	if !raceEnabled {
		// make test runs the suite twice; this test checks the examples'
		// code, not the toolchain, so it runs once: in the -race pass,
		// where go vet has just built what the examples import for the
		// same toolchain (the newer Go's pass would build it again).
		t.Skip("runs in the -race pass of make test; run with -race")
	}
	dir := moduleDir(t, "../examples")
	// Not checkWants: the examples' own comments are not "want"s. The
	// examples are a module of the workspace: loaded in it, what they
	// import is what the rest of the suite builds.
	found := analyze(t, dir, load(t, dir, false, "./..."))
	if len(found) != 0 {
		var b strings.Builder
		for _, f := range found {
			b.WriteString(f.String() + "\n")
		}
		t.Errorf("%d reports on the examples, want none:\n%s", len(found), b.String())
	}
}
