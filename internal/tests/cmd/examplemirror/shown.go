package main

import (
	"fmt"
	"go/ast"
	"go/build"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// modulePath is the import path of the repository's root.
const modulePath = "github.com/gormlock/gormlock"

// A shownPackage is what pkg.go.dev shows of a public package's Examples:
// go/doc attaches each Example to the package, or to the function, type or
// method its name names, and leaves out one whose name names none.
type shownPackage struct {
	dir      string   // relative to the repository's root
	shown    []string // the Examples attached, by function name
	orphaned []string // Examples whose name matches nothing the package declares
}

// publicPackages returns the directories of the public packages under
// root, relative to it: those with Go files, outside internal/, examples/,
// bench/ and testdata/.
func publicPackages(root string) ([]string, error) {
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		name := d.Name()
		if rel != "." && (strings.HasPrefix(name, ".") || slices.Contains([]string{"internal", "examples", "bench", "testdata"}, name)) {
			return filepath.SkipDir
		}
		goFiles, _ := filepath.Glob(filepath.Join(path, "*.go"))
		for _, f := range goFiles {
			if !strings.HasSuffix(f, "_test.go") {
				// A command (package main) shows its doc comment on
				// pkg.go.dev, not Examples.
				if !isCommand(f) {
					dirs = append(dirs, filepath.ToSlash(rel))
				}
				break
			}
		}
		return nil
	})
	return dirs, err
}

// shown returns what go/doc, as pkg.go.dev runs it, makes of the Examples
// of the package in dir (relative to root).
func shown(root, dir string) (shownPackage, error) {
	out := shownPackage{dir: dir}
	full := filepath.Join(root, dir)
	entries, err := os.ReadDir(full)
	if err != nil {
		return out, err
	}
	fset := token.NewFileSet()
	var files []*ast.File
	var all []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") {
			continue
		}
		if ok, err := build.Default.MatchFile(full, name); err != nil || !ok {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(full, name), nil, parser.ParseComments)
		if err != nil {
			return out, err
		}
		files = append(files, f)
		if strings.HasSuffix(name, "_test.go") {
			for _, ex := range doc.Examples(f) {
				all = append(all, "Example"+ex.Name)
			}
		}
	}
	importPath := modulePath
	if dir != "." {
		importPath += "/" + dir
	}
	p, err := doc.NewFromFiles(fset, files, importPath)
	if err != nil {
		return out, err
	}
	add := func(exs []*doc.Example) {
		for _, ex := range exs {
			out.shown = append(out.shown, "Example"+ex.Name)
		}
	}
	add(p.Examples)
	for _, f := range p.Funcs {
		add(f.Examples)
	}
	for _, t := range p.Types {
		add(t.Examples)
		for _, f := range t.Funcs {
			add(f.Examples)
		}
		for _, m := range t.Methods {
			add(m.Examples)
		}
	}
	sort.Strings(out.shown)
	for _, name := range all {
		if !slices.Contains(out.shown, name) {
			out.orphaned = append(out.orphaned, name)
		}
	}
	return out, nil
}

// listShown prints, for each public package, the Examples pkg.go.dev
// shows, and those it leaves out.
func listShown(root string) error {
	dirs, err := publicPackages(root)
	if err != nil {
		return err
	}
	for _, dir := range dirs {
		s, err := shown(root, dir)
		if err != nil {
			return err
		}
		fmt.Printf("%s: %d Examples shown\n", dir, len(s.shown))
		for _, name := range s.shown {
			fmt.Printf("\t%s\n", name)
		}
		for _, name := range s.orphaned {
			fmt.Printf("\t%s (not shown: its name names nothing the package declares)\n", name)
		}
	}
	return nil
}

// isCommand tells whether the Go file f belongs to package main.
func isCommand(f string) bool {
	file, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.PackageClauseOnly)
	return err == nil && file.Name.Name == "main"
}
