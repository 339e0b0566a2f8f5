package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fixtureRoot lays out a repository root under a temporary folder: the
// fixture run as every database's results JSON, and the two documents
// with every block's markers around stale content.
func fixtureRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	b, err := os.ReadFile(filepath.Join("testdata", "report-fixture.json"))
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(root, "bench", "results"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "docs"), 0o755))
	for _, d := range reportDBs {
		var rep map[string]any
		require.NoError(t, json.Unmarshal(b, &rep))
		rep["config"].(map[string]any)["db"] = d.db
		out, err := json.Marshal(rep)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(root, "bench", "results", d.name+".json"), out, 0o644))
	}
	for _, d := range generatedDocs {
		var doc strings.Builder
		doc.WriteString("# Title\n\nKept before.\n\n")
		for _, name := range wantBlocks(d.prefix) {
			doc.WriteString("<!-- bench:begin " + name + " -->\nstale 9.99×\n<!-- bench:end " + name + " -->\n\nKept between.\n\n")
		}
		require.NoError(t, os.WriteFile(filepath.Join(root, d.path), []byte(doc.String()), 0o644))
	}
	return root
}

// The generator fills every block from the JSON, leaves the text around the
// blocks alone, and states each ratio as the median of the per-round
// ratios, not the ratio of the medians.
func TestGenerateDocsFromFixture(t *testing.T) {
	root := fixtureRoot(t)
	require.NoError(t, generateDocs(root))

	perf, err := os.ReadFile(filepath.Join(root, "docs", "performance.md"))
	require.NoError(t, err)
	p := string(perf)
	assert.NotContains(t, p, "stale")
	assert.True(t, strings.HasPrefix(p, "# Title\n\nKept before.\n\n<!-- bench:begin ratios-sqlite -->\n"), p)
	assert.Equal(t, len(reportDBs), strings.Count(p, "Kept between."))
	// Per round mutate/raw is 1.1, 0.9, 1.1: median 1.10×; the ratio of the
	// medians (180/200) would be 0.90×.
	for _, row := range []string{
		"| mode | against | 1,000 rows × 8 |",
		"| pgxpool | `database/sql` | 0.50× |",
		"| gorm | `database/sql` | 0.65× |",
		"| gorm | pgxpool | 1.30× |",
		"| mutate | `database/sql` | 1.10× |",
		"| mutate | pgxpool | 2.20× |",
		"| mutate | plain GORM | 1.38× |",
	} {
		assert.Equal(t, len(reportDBs), strings.Count(p, row+"\n"), row)
	}
	assert.NotContains(t, p, "0.90×")
	// No ratio twice: a baseline is not compared with a later one, nor a
	// mode with itself.
	for _, row := range []string{"| raw |", "| pgxpool | plain GORM |", "| gorm | plain GORM |"} {
		assert.NotContains(t, p, row)
	}
	assert.Contains(t, p, "the run of 2026-11-27 20:00 UTC (`bench/results/postgres.json`, 3 rounds of 1s)")
	assert.Contains(t, p, "- claim: skipped: fixture")

	readme, err := os.ReadFile(filepath.Join(root, "bench", "README.md"))
	require.NoError(t, err)
	r := string(readme)
	assert.NotContains(t, r, "stale")
	// Galera's table has the aborts column; the three others do not.
	assert.Equal(t, len(reportDBs)-1, strings.Count(r, "| mutate | 1000 | 8 | 180 | 130µs | 0.00 | 2.1ms | 9.1ms | 19ms | 0 | 0 |\n"), r)
	assert.Equal(t, 1, strings.Count(r, "| mutate | 1000 | 8 | 180 | 130µs | 0.00 | 0.00 | 2.1ms | 9.1ms | 19ms | 0 | 0 |\n"), r)
	assert.Contains(t, r, "![PostgreSQL throughput](results/postgres.svg)")
	// The measurements hold no ratio: those are performance.md's.
	assert.NotContains(t, r, "×")

	// Running it again changes nothing.
	require.NoError(t, generateDocs(root))
	again, err := os.ReadFile(filepath.Join(root, "docs", "performance.md"))
	require.NoError(t, err)
	assert.Equal(t, p, string(again))
}

// Malformed markers, an unknown block or a missing one stop the generator
// before it writes anything.
func TestGenerateDocsRefusesBadMarkers(t *testing.T) {
	for name, tc := range map[string]struct{ doc, want string }{
		"end without begin":  {"<!-- bench:end results-sqlite -->\n", "bench:end results-sqlite without its bench:begin"},
		"begin without end":  {"<!-- bench:begin results-sqlite -->\n", "bench:begin results-sqlite has no bench:end"},
		"nested":             {"<!-- bench:begin results-sqlite -->\n<!-- bench:begin results-postgres -->\n", "inside block results-sqlite"},
		"mismatched end":     {"<!-- bench:begin results-sqlite -->\n<!-- bench:end results-postgres -->\n", "bench:end results-postgres without"},
		"repeated":           {"<!-- bench:begin results-sqlite -->\n<!-- bench:end results-sqlite -->\n<!-- bench:begin results-sqlite -->\n<!-- bench:end results-sqlite -->\n", "appears twice"},
		"unknown block":      {"<!-- bench:begin results-oracle -->\n<!-- bench:end results-oracle -->\n", "unknown generated block results-oracle"},
		"missing block":      {"no markers\n", "the generated block results-sqlite is missing"},
		"missing some block": {"<!-- bench:begin results-sqlite -->\n<!-- bench:end results-sqlite -->\n", "the generated block results-sqlite-procs is missing"},
	} {
		t.Run(name, func(t *testing.T) {
			root := fixtureRoot(t)
			path := filepath.Join(root, "bench", "README.md")
			require.NoError(t, os.WriteFile(path, []byte(tc.doc), 0o644))
			perfBefore, err := os.ReadFile(filepath.Join(root, "docs", "performance.md"))
			require.NoError(t, err)

			err = generateDocs(root)
			require.ErrorIs(t, err, ErrMarkers)
			assert.Contains(t, err.Error(), tc.want)
			after, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, tc.doc, string(after))
			perfAfter, err := os.ReadFile(filepath.Join(root, "docs", "performance.md"))
			require.NoError(t, err)
			assert.Equal(t, string(perfBefore), string(perfAfter), "nothing written")
		})
	}
}

// A missing or foreign results file is a clear error.
func TestGenerateDocsNeedsEveryRun(t *testing.T) {
	root := fixtureRoot(t)
	require.NoError(t, os.Remove(filepath.Join(root, "bench", "results", "mariadb.json")))
	err := generateDocs(root)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "mariadb.json")
	assert.Contains(t, err.Error(), "make bench-report")

	root = fixtureRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "bench", "results", "sqlite.json"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(root, "bench", "results", "mariadb.json"), b, 0o644))
	err = generateDocs(root)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `holds a run on "sqlite"`)
}

// The project's documents hold every generated block once, with well
// formed markers, and what is between them is what the generator makes of
// the committed results: the figures come from those runs only.
func TestDocsAreGenerated(t *testing.T) {
	root, err := repoRoot()
	require.NoError(t, err)
	reps, err := loadReports(filepath.Join(root, "bench"))
	require.NoError(t, err)
	blocks := renderBlocks(reps)
	for _, d := range generatedDocs {
		b, err := os.ReadFile(filepath.Join(root, d.path))
		require.NoError(t, err)
		got, err := rewriteDoc(d.path, string(b), blocks, wantBlocks(d.prefix))
		require.NoError(t, err)
		assert.Equal(t, string(b), got, "%s is not what go run ./bench -docs makes of bench/results: run it", d.path)
	}
}
