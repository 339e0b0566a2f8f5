package gormlockvet

import (
	"go/ast"
	"go/types"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/ssa"
)

// buildSSA builds the SSA form of the package a pass analyzes and lists its
// functions (named ones in source order, each followed by its function
// literals), as buildssa does, but without buildssa's ctrlflow pass: that
// pass exports facts, and an analyzer that requires facts is run by every
// driver on every dependency of the packages named, from source (go vet
// -vettool then type-checks the whole dependency graph, and the checker
// package needs it loaded with syntax). gormlockvet needs only what is
// reachable in the functions it reads: without ctrlflow's "never returns"
// facts, code after a call such as log.Fatal merely counts as reachable.
func buildSSA(pass *analysis.Pass) (*ssa.Package, []*ssa.Function) {
	prog := ssa.NewProgram(pass.Fset, 0)
	for _, p := range pass.Pkg.Imports() {
		prog.CreatePackage(p, nil, nil, true)
	}
	pkg := prog.CreatePackage(pass.Pkg, pass.Files, pass.TypesInfo, false)
	pkg.Build()
	var funcs []*ssa.Function
	var add func(f *ssa.Function)
	add = func(f *ssa.Function) {
		funcs = append(funcs, f)
		for _, anon := range f.AnonFuncs {
			add(anon)
		}
	}
	for _, file := range pass.Files {
		for _, decl := range file.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok {
				continue
			}
			if fn, ok := pass.TypesInfo.Defs[fd.Name].(*types.Func); ok {
				if f := prog.FuncValue(fn); f != nil {
					add(f)
				}
			}
		}
	}
	return pkg, funcs
}
