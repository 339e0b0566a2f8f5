// Command gormlockvet reports the writes of gormlock-versioned models that
// no version guards (see package gormlockvet for what it reports).
//
// Standalone, on the packages go list names:
//
//	gormlockvet ./...
//
// It prints each finding as file:line:col: message on standard error and
// exits as go vet does: 0 when it found nothing, 1 when it found something
// or could not load or analyze a package. -fix applies the suggested fixes
// (the Apply rewrite of an increment) to the files.
//
// As go vet's analysis tool, with go vet's package handling and caching:
//
//	go vet -vettool=$(command -v gormlockvet) ./...
//
// The analyzer's flags: -table-prefix and -singular-tables describe the
// application's GORM NamingStrategy (for Table("name") and raw SQL);
// -guard-gorm-updates says every *gorm.DB has
// repository.Plugin(repository.GuardGORMUpdates()).
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/checker"
	"golang.org/x/tools/go/analysis/singlechecker"
	"golang.org/x/tools/go/packages"

	"github.com/gormlock/gormlock/gormlockvet"
	"github.com/gormlock/gormlock/gormlockvet/internal/textedit"
)

func main() {
	if invokedByVet(os.Args[1:]) {
		singlechecker.Main(gormlockvet.Analyzer)
		return
	}
	os.Exit(standalone(os.Args[1:]))
}

// invokedByVet reports whether go vet runs the command: it asks for its
// version (-V=full) or flags (-flags), or hands it a unit's .cfg file.
func invokedByVet(args []string) bool {
	for _, a := range args {
		if a == "-V=full" || a == "-V" || a == "-flags" || a == "--flags" {
			return true
		}
	}
	return len(args) > 0 && strings.HasSuffix(args[len(args)-1], ".cfg")
}

// loadMode is what the command loads of the packages it analyzes: their
// syntax and types, and the types of what they import from its export
// data, as go vet does (go list -export builds it once into the go build
// cache), not from source: the analyzer needs no more, and type-checking
// a whole dependency graph from source again on every run is what makes a
// driver slow.
const loadMode = packages.NeedName | packages.NeedFiles | packages.NeedCompiledGoFiles | packages.NeedImports |
	packages.NeedTypes | packages.NeedTypesSizes | packages.NeedSyntax | packages.NeedTypesInfo | packages.NeedModule

// standalone loads the packages, runs the analyzer and prints its
// findings; it returns the exit status.
func standalone(args []string) int {
	fs := flag.NewFlagSet("gormlockvet", flag.ContinueOnError)
	fix := fs.Bool("fix", false, "apply the suggested fixes")
	tests := fs.Bool("test", true, "also analyze the packages' tests")
	tags := fs.String("tags", "", "build tags, as go build's -tags")
	gormlockvet.Analyzer.Flags.VisitAll(func(f *flag.Flag) { fs.Var(f.Value, f.Name, f.Usage) })
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "gormlockvet: report writes of gormlock-versioned models that no version guards\n\n")
		fmt.Fprintf(os.Stderr, "Usage: gormlockvet [flags] packages\n       go vet -vettool=$(command -v gormlockvet) [flags] packages\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	cfg := &packages.Config{Mode: loadMode, Tests: *tests}
	if *tags != "" {
		cfg.BuildFlags = []string{"-tags=" + *tags}
	}
	pkgs, err := packages.Load(cfg, fs.Args()...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "gormlockvet: %v\n", err)
		return 1
	}
	if n := packages.PrintErrors(pkgs); n > 0 {
		return 1
	}
	graph, err := checker.Analyze([]*analysis.Analyzer{gormlockvet.Analyzer}, pkgs, nil)
	if err != nil {
		fmt.Fprintf(os.Stderr, "gormlockvet: %v\n", err)
		return 1
	}
	if err := graph.PrintText(os.Stderr, -1); err != nil {
		fmt.Fprintf(os.Stderr, "gormlockvet: %v\n", err)
		return 1
	}
	status := 0
	var edits []textedit.Edit
	for act := range graph.All() {
		if act.Err != nil {
			fmt.Fprintf(os.Stderr, "gormlockvet: %s: %v\n", act.Package.PkgPath, act.Err)
			status = 1
		}
		if !act.IsRoot || act.Analyzer != gormlockvet.Analyzer {
			continue
		}
		if len(act.Diagnostics) > 0 {
			status = 1
		}
		if *fix {
			edits = append(edits, textedit.Of(act.Package.Fset, act.Diagnostics)...)
		}
	}
	for name, es := range textedit.ByFile(edits) {
		src, err := os.ReadFile(name)
		if err == nil {
			err = os.WriteFile(name, textedit.Apply(src, es), 0o644)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "gormlockvet: -fix: %v\n", err)
			return 1
		}
	}
	return status
}
