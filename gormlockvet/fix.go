package gormlockvet

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/token"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/ast/astutil"
	"golang.org/x/tools/go/ssa"

	"github.com/gormlock/gormlock/gormlockvet/internal/sqltext"
)

// The suggested fix: an increment to Apply.
//
// db.Model(&T{}).Where("id = ?", id).Update("n", gorm.Expr("n + ?", d))
// becomes repo.Apply(ctx, id, []repository.Change{repository.Add("N", d)})
// when everything it needs is obvious: the chain is built in place with a
// fresh Model (or none) and one Where on the one-column primary key, the
// function sees exactly one *repository.Repository[T] (a variable, or a
// field of its receiver) and a context (WithContext's, or a variable named
// ctx), the file imports repository, and the call's error is assigned,
// tested in an if, or returned. Otherwise the report has no fix.

// increment is an Update of one column by gorm.Expr("col + ?", d) or
// gorm.Expr("col - ?", d).
type increment struct {
	field     string // the model's field (Go name), or the column
	deltaText string // d, or its negation
	unsigned  bool   // d is unsigned: -d is no delta
}

func (c *checker) increment(w write, t target) (increment, bool) {
	if w.name != "Update" && w.name != "UpdateColumn" || w.column == nil || w.set == nil {
		return increment{}, false
	}
	col, ok := constString(w.column)
	if !ok {
		return increment{}, false
	}
	expr, ok := w.set.(*ssa.Call)
	if !ok {
		return increment{}, false
	}
	callee := expr.Call.StaticCallee()
	if callee == nil || !isGormFunc(callee, "Expr") || len(expr.Call.Args) != 2 {
		return increment{}, false
	}
	sql, ok := constString(expr.Call.Args[0])
	if !ok {
		return increment{}, false
	}
	sign, ok := sqltext.Increment(sql, col)
	if !ok {
		return increment{}, false
	}
	ce := c.calls[expr.Call.Pos()]
	if ce == nil || len(ce.Args) != 2 || ce.Ellipsis.IsValid() {
		return increment{}, false
	}
	delta := ce.Args[1]
	inc := increment{field: col, deltaText: types.ExprString(delta)}
	if f, ok := t.fields[col]; ok {
		inc.field = f
	}
	if b, ok := c.pass.TypesInfo.TypeOf(delta).Underlying().(*types.Basic); ok && b.Info()&types.IsUnsigned != 0 {
		inc.unsigned = true
	}
	if sign == '-' {
		switch d := ast.Unparen(delta).(type) {
		case *ast.Ident, *ast.BasicLit, *ast.SelectorExpr, *ast.CallExpr, *ast.IndexExpr:
			inc.deltaText = "-" + types.ExprString(d)
		default:
			inc.deltaText = "-(" + types.ExprString(d) + ")"
		}
	}
	return inc, true
}

func (c *checker) applyFix(fn *ssa.Function, w write, ch chain, t target, inc increment, ce *ast.CallExpr) (analysis.SuggestedFix, bool) {
	if ch.via != nil || inc.unsigned || t.typ == nil || len(t.pkCols) != 1 {
		return analysis.SuggestedFix{}, false
	}
	var id, ctx ast.Expr
	for _, o := range ch.ops {
		switch o.kind {
		case opModel:
			if t.record {
				return analysis.SuggestedFix{}, false
			}
		case opWhere:
			q, ok := constString(o.arg)
			if !ok || id != nil || len(o.args) != 1 || !isKeyEquality(q, t.pkCols[0]) {
				return analysis.SuggestedFix{}, false
			}
			id = c.argOf(o.call, 1)
		case opContext:
			ctx = c.argOf(o.call, 0)
		default:
			return analysis.SuggestedFix{}, false
		}
	}
	if id == nil {
		return analysis.SuggestedFix{}, false
	}
	file := c.fileOf(ce.Pos())
	if file == nil {
		return analysis.SuggestedFix{}, false
	}
	repoPkg := importName(file, gormlockModule+"/repository")
	if repoPkg == "" {
		return analysis.SuggestedFix{}, false
	}
	scope := c.scopeAt(file, ce.Pos())
	if scope == nil {
		return analysis.SuggestedFix{}, false
	}
	if ctx == nil {
		_, obj := scope.LookupParent("ctx", ce.Pos())
		if v, ok := obj.(*types.Var); !ok || !isContext(v.Type()) {
			return analysis.SuggestedFix{}, false
		}
		ctx = ast.NewIdent("ctx")
	}
	repo := c.repositoryIn(fn, scope, ce.Pos(), t)
	if repo == "" {
		return analysis.SuggestedFix{}, false
	}
	applyCall := fmt.Sprintf("%s.Apply(%s, %s, []%s.Change{%s.Add(%q, %s)})", repo, c.src(ctx), c.src(id), repoPkg, repoPkg, inc.field, inc.deltaText)

	path, _ := astutil.PathEnclosingInterval(file, ce.Pos(), ce.End())
	// path: ce, SelectorExpr(.Error), then the statement
	if len(path) < 3 {
		return analysis.SuggestedFix{}, false
	}
	sel, ok := path[1].(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Error" || sel.X != ce {
		return analysis.SuggestedFix{}, false
	}
	var edit analysis.TextEdit
	switch stmt := path[2].(type) {
	case *ast.AssignStmt:
		if len(stmt.Lhs) != 1 || len(stmt.Rhs) != 1 || stmt.Rhs[0] != sel || (stmt.Tok != token.ASSIGN && stmt.Tok != token.DEFINE) {
			return analysis.SuggestedFix{}, false
		}
		edit = analysis.TextEdit{Pos: stmt.Pos(), End: stmt.End(), NewText: fmt.Appendf(nil, "_, %s %s %s", c.src(stmt.Lhs[0]), stmt.Tok, applyCall)}
	case *ast.ReturnStmt:
		if len(stmt.Results) != 1 || stmt.Results[0] != sel {
			return analysis.SuggestedFix{}, false
		}
		edit = analysis.TextEdit{Pos: stmt.Pos(), End: stmt.End(), NewText: fmt.Appendf(nil, "_, err := %s\n\treturn err", applyCall)}
		if scope.Lookup("err") != nil {
			return analysis.SuggestedFix{}, false // err := would not declare anything new
		}
	default:
		return analysis.SuggestedFix{}, false
	}
	return analysis.SuggestedFix{
		Message:   fmt.Sprintf("write the increment with %s.Apply and %s.Add", repo, repoPkg),
		TextEdits: []analysis.TextEdit{edit},
	}, true
}

// isKeyEquality reports whether cond is exactly `key = ?`.
func isKeyEquality(cond, key string) bool {
	f := strings.Fields(strings.ReplaceAll(cond, "=", " = "))
	if len(f) != 3 || f[1] != "=" || f[2] != "?" {
		return false
	}
	name := strings.Trim(f[0][strings.LastIndexByte(f[0], '.')+1:], "`\"")
	return strings.EqualFold(name, key)
}

// repositoryIn returns the expression of the one *repository.Repository[T]
// the function sees at pos: a variable in scope, or else a field of its
// receiver; "" when there is none or more than one.
func (c *checker) repositoryIn(fn *ssa.Function, scope *types.Scope, pos token.Pos, t target) string {
	var found []string
	seen := map[types.Object]bool{}
	for s := scope; s != nil && s != types.Universe && s != c.pass.Pkg.Scope(); s = s.Parent() {
		for _, name := range s.Names() {
			obj := s.Lookup(name)
			if v, ok := obj.(*types.Var); ok && !seen[obj] && obj.Pos() < pos && isRepositoryOf(v.Type(), t.typ) {
				if _, inner := scope.LookupParent(name, pos); inner == obj {
					seen[obj] = true
					found = append(found, name)
				}
			}
		}
	}
	if len(found) == 0 {
		outer := fn
		for outer.Parent() != nil {
			outer = outer.Parent()
		}
		if recv := outer.Signature.Recv(); recv != nil && recv.Name() != "" && recv.Name() != "_" {
			rt := recv.Type()
			if p, ok := rt.Underlying().(*types.Pointer); ok {
				rt = p.Elem()
			}
			if st, ok := rt.Underlying().(*types.Struct); ok {
				for i := range st.NumFields() {
					if isRepositoryOf(st.Field(i).Type(), t.typ) {
						found = append(found, recv.Name()+"."+st.Field(i).Name())
					}
				}
			}
		}
	}
	if len(found) != 1 {
		return ""
	}
	return found[0]
}

func isRepositoryOf(t types.Type, model *types.Named) bool {
	p, ok := types.Unalias(t).(*types.Pointer)
	if !ok {
		return false
	}
	n, ok := types.Unalias(p.Elem()).(*types.Named)
	return ok && n.Obj().Name() == "Repository" && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == gormlockModule+"/repository" &&
		n.TypeArgs().Len() == 1 && types.Identical(n.TypeArgs().At(0), model)
}

func isContext(t types.Type) bool {
	n, ok := types.Unalias(t).(*types.Named)
	return ok && n.Obj().Name() == "Context" && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == "context"
}

// importName returns the name a file imports path under, "" if it does not.
func importName(f *ast.File, path string) string {
	for _, imp := range f.Imports {
		if strings.Trim(imp.Path.Value, `"`) != path {
			continue
		}
		if imp.Name != nil {
			if imp.Name.Name == "_" || imp.Name.Name == "." {
				return ""
			}
			return imp.Name.Name
		}
		return path[strings.LastIndexByte(path, '/')+1:]
	}
	return ""
}

func (c *checker) fileOf(pos token.Pos) *ast.File {
	for _, f := range c.pass.Files {
		if f.FileStart <= pos && pos < f.FileEnd {
			return f
		}
	}
	return nil
}

// scopeAt returns the innermost scope of file that holds pos.
func (c *checker) scopeAt(file *ast.File, pos token.Pos) *types.Scope {
	s := c.pass.TypesInfo.Scopes[file]
	if s == nil {
		return nil
	}
	return s.Innermost(pos)
}

// src returns the source text of an expression as written.
func (c *checker) src(e ast.Expr) string {
	var b bytes.Buffer
	if err := format.Node(&b, c.pass.Fset, e); err != nil {
		return types.ExprString(e)
	}
	return b.String()
}
