package gormlockvet_test

import (
	"bytes"
	"fmt"
	"go/format"
	"go/scanner"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/checker"
	"golang.org/x/tools/go/packages"

	"github.com/gormlock/gormlock/gormlockvet"
	"github.com/gormlock/gormlock/gormlockvet/internal/textedit"
)

// The tests' driver. It loads what the command loads, as go vet does: the
// packages analyzed from source, the types of what they import from export
// data (go list -export, which the go build cache keeps across runs), not
// the whole dependency graph type-checked from source again in every test
// (analysistest's way: minutes under -race on the shared machine). It
// checks analysistest's "// want" comments and .golden files.
//
// The test modules (testdata/*) require the golang.org/x/text the
// workspace selects, so that GORM and gormlock compiled for them are the
// ones make test's go vet step has already built.

// loadMode is the command's.
const loadMode = packages.NeedName | packages.NeedFiles | packages.NeedCompiledGoFiles | packages.NeedImports |
	packages.NeedTypes | packages.NeedTypesSizes | packages.NeedSyntax | packages.NeedTypesInfo | packages.NeedModule

// moduleDir returns the absolute directory of a module the tests analyze.
func moduleDir(t *testing.T, dir string) string {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// load loads the packages patterns match in the module at dir, with their
// tests. A module outside the workspace (testdata) is loaded with
// GOWORK=off.
func load(t *testing.T, dir string, ownModule bool, patterns ...string) []*packages.Package {
	t.Helper()
	cfg := &packages.Config{Mode: loadMode, Dir: dir, Tests: true, Env: os.Environ()}
	if ownModule {
		cfg.Env = append(cfg.Env, "GOWORK=off")
	}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		t.Fatal(err)
	}
	if packages.PrintErrors(pkgs) > 0 {
		t.Fatalf("the packages of %s do not load", dir)
	}
	if len(pkgs) == 0 {
		t.Fatalf("no package of %s matches %q", dir, patterns)
	}
	return pkgs
}

// finding is one report of the analyzer.
type finding struct {
	file      string // relative to the module's directory, with slashes
	line, col int
	message   string
	edits     []textedit.Edit // its suggested fix's
}

func (f finding) String() string {
	return fmt.Sprintf("%s:%d:%d: %s", f.file, f.line, f.col, f.message)
}

// analyze runs the analyzer on pkgs and returns its reports, once each (a
// package and its test variant report the same), in file and line order.
func analyze(t *testing.T, dir string, pkgs []*packages.Package) []finding {
	t.Helper()
	graph, err := checker.Analyze([]*analysis.Analyzer{gormlockvet.Analyzer}, pkgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var out []finding
	for act := range graph.All() {
		if act.Err != nil {
			t.Errorf("%s: %v", act, act.Err)
		}
		if !act.IsRoot || act.Analyzer != gormlockvet.Analyzer {
			continue
		}
		for _, d := range act.Diagnostics {
			p := act.Package.Fset.Position(d.Pos)
			f := finding{file: relative(dir, p.Filename), line: p.Line, col: p.Column, message: d.Message,
				edits: textedit.Of(act.Package.Fset, []analysis.Diagnostic{d})}
			if !seen[f.String()] {
				seen[f.String()] = true
				out = append(out, f)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b finding) int {
		if a.file != b.file {
			return strings.Compare(a.file, b.file)
		}
		return a.line - b.line
	})
	return out
}

func relative(dir, file string) string {
	if rel, err := filepath.Rel(dir, file); err == nil {
		return filepath.ToSlash(rel)
	}
	return file
}

// checkWants checks the findings against the "// want" comments of the Go
// files of the module at dir (analysistest's syntax: one or more quoted or
// backquoted regular expressions, each to match one report on the line):
// every report must match one, every expectation must be met.
func checkWants(t *testing.T, dir string, found []finding) {
	t.Helper()
	type key struct {
		file string
		line int
	}
	want := map[key][]*regexp.Regexp{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fset := token.NewFileSet()
		file := fset.AddFile(path, -1, len(src))
		var s scanner.Scanner
		s.Init(file, src, nil, scanner.ScanComments)
		for {
			pos, tok, lit := s.Scan()
			if tok == token.EOF {
				return nil
			}
			text, ok := strings.CutPrefix(lit, "//")
			if tok != token.COMMENT || !ok {
				continue
			}
			rest, ok := strings.CutPrefix(strings.TrimSpace(text), "want")
			if !ok {
				continue
			}
			k := key{relative(dir, path), fset.Position(pos).Line}
			res, err := parseWant(rest)
			if err != nil {
				t.Errorf("%s:%d: in a want comment: %v", k.file, k.line, err)
			}
			want[k] = append(want[k], res...)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		k := key{f.file, f.line}
		i := slices.IndexFunc(want[k], func(re *regexp.Regexp) bool { return re.MatchString(f.message) })
		if i < 0 {
			t.Errorf("%s: unexpected report", f)
			continue
		}
		want[k] = slices.Delete(want[k], i, i+1)
	}
	for k, res := range want {
		for _, re := range res {
			t.Errorf("%s:%d: no report matching %#q", k.file, k.line, re)
		}
	}
}

// parseWant reads the regular expressions of a want comment.
func parseWant(text string) ([]*regexp.Regexp, error) {
	var s scanner.Scanner
	fset := token.NewFileSet()
	var scanErr error
	s.Init(fset.AddFile("", -1, len(text)), []byte(text), func(_ token.Position, msg string) { scanErr = fmt.Errorf("%s", msg) }, 0)
	var out []*regexp.Regexp
	for {
		_, tok, lit := s.Scan()
		switch {
		case tok == token.EOF || tok == token.SEMICOLON && lit == "\n":
			if len(out) == 0 && scanErr == nil {
				scanErr = fmt.Errorf("no regular expression")
			}
			return out, scanErr
		case tok == token.STRING:
			pattern, err := strconv.Unquote(lit)
			if err != nil {
				return out, err
			}
			re, err := regexp.Compile(pattern)
			if err != nil {
				return out, err
			}
			out = append(out, re)
		default:
			return out, fmt.Errorf("got %s, want a quoted regular expression", tok)
		}
	}
}

// checkGolden checks that the suggested fixes turn each file that has them
// into its .golden copy (both formatted, as analysistest compares them),
// and that every .golden file has fixes.
func checkGolden(t *testing.T, dir string, found []finding) {
	t.Helper()
	var edits []textedit.Edit
	for _, f := range found {
		edits = append(edits, f.edits...)
	}
	byFile := textedit.ByFile(edits)
	goldens, err := filepath.Glob(filepath.Join(dir, "*", "*.go.golden"))
	if err != nil {
		t.Fatal(err)
	}
	for _, golden := range goldens {
		if _, ok := byFile[strings.TrimSuffix(golden, ".golden")]; !ok {
			t.Errorf("%s: no suggested fix in %s", relative(dir, golden), relative(dir, strings.TrimSuffix(golden, ".golden")))
		}
	}
	for name, es := range byFile {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(name + ".golden")
		if err != nil {
			t.Errorf("%s has suggested fixes: %v", relative(dir, name), err)
			continue
		}
		if formatted, err := format.Source(want); err == nil {
			want = formatted
		}
		if got := textedit.Apply(src, es); !bytes.Equal(bytes.TrimSpace(got), bytes.TrimSpace(want)) {
			t.Errorf("%s after the suggested fixes:\n%s\nwant (%s.golden):\n%s", relative(dir, name), got, relative(dir, name), want)
		}
	}
}
