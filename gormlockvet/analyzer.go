// Package gormlockvet is a go/analysis analyzer that reports every write of
// a versioned model that no version guards: the plain GORM writes and the
// raw SQL that can erase a concurrent change, found before they run.
//
// A model is versioned as repository.New decides (it embeds
// models.Versioning, models.Versioned or models.Model, or has a field
// tagged `gormlock:"version"`, or one named Version, of an int64 kind).
// The writes it reports:
//
//   - GORM's Update, Updates, UpdateColumn, UpdateColumns, Save and Delete
//     of such a model, whether the model comes from Model(&T{}),
//     Model(&record), Model(&slice), Table("name") naming the model's
//     table, or the value written (Save(&t), Delete(&T{}, id),
//     Updates(&t)), through a *gorm.DB chain built in place, kept in a
//     variable, returned by a helper or passed to one; and the generic API's
//     (gorm.G[T]) Update, Updates and Delete;
//   - raw SQL UPDATE and DELETE statements of the model's table, passed to
//     GORM's Exec and Raw, database/sql's Exec, Query and Prepare (and
//     their Context forms), and the same methods of other clients (sqlx,
//     pgx), when the SQL text is a constant (a literal, a named constant or
//     a local variable holding one).
//
// A write is guarded, and not reported, when its WHERE has an equality on
// the version column joined by AND at the top level, decided as
// repository.StrictGORMWrites decides: Where("version = ?", v),
// Where(map[string]any{"version": v}), Where(&T{Version: v}),
// Where(clause.Eq{Column: "version", Value: v}) (also in clause.And, or
// added by Clauses(clause.Where{...})), or the same in Delete's inline
// conditions or the raw statement's WHERE. An OR
// anywhere at the top level, a NOT, the word in a string literal or a
// comment, a column whose name merely contains the version column's: not
// a guard.
//
// Not reported: gormlock's own calls (they are guarded), reads, creates,
// unversioned models, guarded writes, and a line marked
//
//	//gormlockvet:ignore the reason
//
// on the line of the write or the line above it (a negative control in a
// test, a cleanup of test data).
//
// A plain GORM write through a record read with its version (Save(&t),
// Model(&t).Updates(...)) is reported too: repository.Plugin with
// repository.GuardGORMUpdates would guard it, but only where the plugin is
// registered on the *gorm.DB that runs it, which no analysis of the call
// can see. An application that registers it on every *gorm.DB runs the
// analyzer with -guard-gorm-updates, and such writes are then taken as
// guarded.
//
// Each report names the model, says why the write is unguarded, and the
// gormlock call to use instead. Where the rewrite is mechanical — an
// increment by gorm.Expr("col + ?", d) of the record a Where("id = ?", id)
// names, with one repository of the model, a context and the error in
// reach — the report carries a suggested fix to Repository.Apply with
// repository.Add. See the command gormlockvet/cmd/gormlockvet and
// docs/adopting.md for running it.
package gormlockvet

import (
	"flag"
	"go/ast"
	"go/token"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/passes/inspect"
	"golang.org/x/tools/go/ast/inspector"
	"golang.org/x/tools/go/ssa"
	"gorm.io/gorm/schema"
)

// Analyzer reports the writes of versioned models that no version guards.
var Analyzer = &analysis.Analyzer{
	Name:     "gormlockvet",
	Doc:      doc,
	URL:      "https://pkg.go.dev/github.com/gormlock/gormlock/gormlockvet",
	Run:      run,
	Requires: []*analysis.Analyzer{modelsAnalyzer, inspect.Analyzer},
	Flags:    flags(),
}

const doc = `report writes of gormlock-versioned models that no version guards

gormlockvet finds the plain GORM writes (Update, Updates, UpdateColumn,
UpdateColumns, Save, Delete) and the raw SQL UPDATE and DELETE statements of
a versioned model (one repository.New accepts) whose WHERE has no equality
on the version column joined by AND: each can erase a concurrent change.
Each report names the model and the gormlock call to use instead.
A line marked //gormlockvet:ignore <reason> (or the line after it) is not
reported.`

// config is the analyzer's flags.
type config struct {
	tablePrefix      string
	singularTables   bool
	guardGORMUpdates bool
}

var flagConfig config

func flags() flag.FlagSet {
	var fs flag.FlagSet
	fs.StringVar(&flagConfig.tablePrefix, "table-prefix", "", "the TablePrefix of the application's GORM NamingStrategy")
	fs.BoolVar(&flagConfig.singularTables, "singular-tables", false, "the application's GORM NamingStrategy has SingularTable")
	fs.BoolVar(&flagConfig.guardGORMUpdates, "guard-gorm-updates", false, "every *gorm.DB has repository.Plugin(repository.GuardGORMUpdates()): Save and Updates of a record read with its version are guarded")
	return fs
}

func cfgOf(*analysis.Pass) *config { return &flagConfig }

func (c *config) naming() schema.NamingStrategy {
	return schema.NamingStrategy{TablePrefix: c.tablePrefix, SingularTable: c.singularTables}
}

// checker is the state of one run of the analyzer on a package.
type checker struct {
	pass   *analysis.Pass
	models *models
	flow   *flow
	// calls maps the position of a call's opening parenthesis (an SSA
	// call's position) to the call.
	calls map[token.Pos]*ast.CallExpr
	// ignored holds the lines marked //gormlockvet:ignore, by file.
	ignored  map[*token.File]map[int]bool
	reported map[string]bool
}

func run(pass *analysis.Pass) (any, error) {
	if isLibrary(pass.Pkg.Path()) {
		return nil, nil
	}
	c := &checker{
		pass:     pass,
		models:   pass.ResultOf[modelsAnalyzer].(*models),
		calls:    map[token.Pos]*ast.CallExpr{},
		ignored:  map[*token.File]map[int]bool{},
		reported: map[string]bool{},
	}
	ins := pass.ResultOf[inspect.Analyzer].(*inspector.Inspector)
	ins.Preorder([]ast.Node{(*ast.CallExpr)(nil)}, func(n ast.Node) {
		call := n.(*ast.CallExpr)
		c.calls[call.Lparen] = call
	})
	for _, f := range pass.Files {
		for _, cg := range f.Comments {
			for _, cm := range cg.List {
				if strings.HasPrefix(cm.Text, "//gormlockvet:ignore") {
					tf := pass.Fset.File(cm.Pos())
					if c.ignored[tf] == nil {
						c.ignored[tf] = map[int]bool{}
					}
					line := tf.Line(cm.Pos())
					c.ignored[tf][line] = true
					c.ignored[tf][line+1] = true
				}
			}
		}
	}
	pkg, funcs := buildSSA(pass)
	c.flow = newFlow(pkg, funcs)
	for _, fn := range funcs {
		for _, b := range fn.Blocks {
			for _, instr := range b.Instrs {
				call, ok := instr.(ssa.CallInstruction)
				if !ok {
					continue
				}
				if w, ok := writeOf(call.Common()); ok {
					c.checkWrite(fn, w)
					continue
				}
				c.checkRaw(call.Common())
			}
		}
	}
	return nil, nil
}

// writeMethods are GORM's methods that update or delete rows.
var writeMethods = map[string]bool{"Update": true, "Updates": true, "UpdateColumn": true, "UpdateColumns": true, "Save": true, "Delete": true}

// write is one call of a GORM write method.
type write struct {
	name  string
	call  *ssa.CallCommon
	recv  ssa.Value
	value ssa.Value // the value Save, Delete, Updates or UpdateColumns writes, unwrapped
	// column and set are Update's and UpdateColumn's column and value.
	column ssa.Value
	set    ssa.Value
	inline []ssa.Value // Delete's inline conditions
	// generic is the T of the generic API (gorm.G[T]), nil otherwise.
	generic types.Type
}

func writeOf(call *ssa.CallCommon) (write, bool) {
	recv, name, generic := chainMethod(call)
	if recv == nil || !writeMethods[name] {
		return write{}, false
	}
	w := write{name: name, call: call, recv: recv}
	if generic {
		if name == "Save" || name == "UpdateColumn" || name == "UpdateColumns" {
			return write{}, false
		}
		w.generic = genericModel(recv.Type())
		return w, true
	}
	args := call.Args[1:]
	switch name {
	case "Update", "UpdateColumn":
		if len(args) == 2 {
			w.column, w.set = args[0], unwrap(args[1])
		}
	case "Updates", "UpdateColumns", "Save":
		if len(args) == 1 {
			w.value = unwrap(args[0])
		}
	case "Delete":
		if len(args) == 2 {
			w.value = unwrap(args[0])
			w.inline = variadic(args[1])
		}
	}
	return w, true
}

// checkWrite reports w for each versioned model it writes unguarded.
func (c *checker) checkWrite(fn *ssa.Function, w write) {
	chains := c.flow.resolve(c.flow.eval(w.recv, &env{}), 0)
	for _, ch := range chains {
		for _, t := range c.targets(ch, w) {
			why, ok := c.unguarded(ch, w, t)
			if !ok {
				continue
			}
			c.report(fn, w, ch, t, why)
		}
	}
}

// target is a versioned model a write writes, and how the write names it.
type target struct {
	*model
	how    string // "Model(&Token{})", `Table("tokens")`, "Save(&t)"
	record bool   // a record (a variable), not a fresh literal or a slice
	from   op     // the Model step, if the model comes from one
}

// targets returns the versioned models a write through the chain c writes:
// Table's table when the chain names one, else Model's model, else the
// written value's (GORM's order).
func (c *checker) targets(ch chain, w write) []target {
	var model, table *op
	for i := range ch.ops {
		switch ch.ops[i].kind {
		case opModel:
			model = &ch.ops[i]
		case opTable:
			table = &ch.ops[i]
		}
	}
	if table != nil {
		if table.table == "" {
			return nil
		}
		var out []target
		for _, m := range c.models.tables[table.table] {
			out = append(out, target{model: m, how: "Table(" + quote(table.table) + ")"})
		}
		return out
	}
	if w.generic != nil {
		if m := c.models.lookup(w.generic); m != nil {
			return []target{{model: m, how: "gorm.G[" + m.typ.Obj().Name() + "]"}}
		}
		return nil
	}
	if model != nil {
		if m := c.models.lookup(model.typ); m != nil {
			return []target{{model: m, how: "Model(" + c.text(c.argOf(model.call, 0)) + ")", record: c.isRecord(model.call, model.typ), from: *model}}
		}
		return nil
	}
	if w.value != nil {
		if m := c.models.lookup(w.value.Type()); m != nil {
			return []target{{model: m, how: w.name + "(" + c.text(c.argOf(w.call, 0)) + ")", record: c.isRecord(w.call, w.value.Type())}}
		}
	}
	return nil
}

// isRecord reports whether the first argument of call is one record held in
// a variable (Model(&t), Save(t)), not a composite literal or a slice.
func (c *checker) isRecord(call *ssa.CallCommon, t types.Type) bool {
	if p, ok := types.Unalias(t).(*types.Pointer); ok {
		t = p.Elem()
	}
	if _, ok := t.Underlying().(*types.Struct); !ok {
		return false
	}
	arg := c.argOf(call, 0)
	if u, ok := arg.(*ast.UnaryExpr); ok && u.Op == token.AND {
		arg = u.X
	}
	_, lit := ast.Unparen(arg).(*ast.CompositeLit)
	return arg != nil && !lit
}

// argOf returns the AST of the i-th argument of an SSA call (nil if the
// call has no source).
func (c *checker) argOf(call *ssa.CallCommon, i int) ast.Expr {
	if ce := c.calls[call.Pos()]; ce != nil && i < len(ce.Args) {
		return ce.Args[i]
	}
	return nil
}

// unguarded returns why a write of t through ch is not guarded, or false
// when it is guarded.
func (c *checker) unguarded(ch chain, w write, t target) (string, bool) {
	hasOr := false
	for _, o := range ch.ops {
		if o.kind == opOr {
			hasOr = true
		}
	}
	guarded := false
	for _, o := range ch.ops {
		if o.kind == opWhere && c.condGuards(o.arg, o.args, t.model) {
			guarded = true
		}
	}
	if len(w.inline) > 0 && c.condGuards(w.inline[0], w.inline[1:], t.model) {
		guarded = true
	}
	if hasOr {
		if guarded {
			return "its version condition is joined to the others by OR, so it guards nothing", true
		}
		return "no condition on its version column guards it (and Or joins its conditions)", true
	}
	if guarded {
		return "", false
	}
	if flagConfig.guardGORMUpdates && t.record && w.name != "Delete" {
		return "", false
	}
	return "no condition on its version column (" + t.verCol + ") guards it", true
}

// condGuards reports whether one Where condition (query and args, GORM's
// forms) is an equality on the version column of m.
func (c *checker) condGuards(query ssa.Value, args []ssa.Value, m *model) bool {
	if query == nil {
		return false
	}
	if s, ok := constString(query); ok {
		return stringCondGuards(s, len(args), m)
	}
	if c.clauseGuards(query, m) {
		return true
	}
	for _, a := range args {
		// Where(clause.Eq{...}, clause.Eq{...}): every argument is a
		// condition when the first is not a string.
		if c.clauseGuards(a, m) {
			return true
		}
	}
	switch q := query.(type) {
	case *ssa.Call:
		// gorm.Expr("version = ?", v): a clause.Expr
		if callee := q.Call.StaticCallee(); callee != nil && isGormFunc(callee, "Expr") && len(q.Call.Args) > 0 {
			if s, ok := constString(q.Call.Args[0]); ok {
				return condGuardsSQL(s, m)
			}
		}
		if isGormDB(q.Type()) {
			// a group: Where(db.Where(...).Where(...))
			chains := c.flow.eval(q, &env{})
			for _, ch := range chains {
				if _, unguarded := c.unguarded(ch, write{name: "Where"}, target{model: m}); unguarded {
					return false
				}
			}
			return len(chains) > 0
		}
	case *ssa.MakeMap:
		for _, ref := range *q.Referrers() {
			if mu, ok := ref.(*ssa.MapUpdate); ok && mu.Map == q {
				if k, ok := constString(mu.Key); ok && isVersionColumn(k, m) {
					return true
				}
			}
		}
	}
	return structSetsVersion(query, m)
}

// stringCondGuards decides a string condition as GORM reads it: a number
// is a primary key; a text with a placeholder, or with no arguments, or
// with a space, is SQL; a bare word with one argument is a column.
func stringCondGuards(s string, nargs int, m *model) bool {
	if isNumber(s) {
		return false
	}
	if nargs == 1 && !strings.ContainsAny(s, "?@ \t\n") {
		return isVersionColumn(s, m)
	}
	return condGuardsSQL(s, m)
}

func isNumber(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if (r < '0' || r > '9') && !(i == 0 && (r == '-' || r == '+')) {
			return false
		}
	}
	return true
}

// isVersionColumn reports whether a column name ("version", "Version",
// "tokens.version") names m's version column, as strict mode reads it.
func isVersionColumn(name string, m *model) bool {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		name = name[i+1:]
	}
	name = strings.Trim(name, "`\"")
	return strings.EqualFold(name, m.verCol) || name == m.verField
}

// structSetsVersion reports whether v is a struct of the model (or a
// pointer to one) built with its version field set: Where(&T{Version: v})
// (GORM's condition from a struct names its non-zero fields).
func structSetsVersion(v ssa.Value, m *model) bool {
	if l, ok := v.(*ssa.UnOp); ok && l.Op == token.MUL {
		v = l.X
	}
	alloc, ok := v.(*ssa.Alloc)
	if !ok {
		return false
	}
	var walk func(addr ssa.Value, depth int) bool
	walk = func(addr ssa.Value, depth int) bool {
		if depth > 6 {
			return false
		}
		for _, ref := range *addr.Referrers() {
			fa, ok := ref.(*ssa.FieldAddr)
			if !ok || fa.X != addr {
				continue
			}
			st := types.Unalias(fa.X.Type()).(*types.Pointer).Elem().Underlying().(*types.Struct)
			f := st.Field(fa.Field)
			if f.Name() == m.verField || f.Embedded() && holdsField(f.Type(), m.verField, 0) {
				for _, r := range *fa.Referrers() {
					if s, ok := r.(*ssa.Store); ok && s.Addr == fa && !isZeroConst(s.Val) {
						return true
					}
				}
			}
			if walk(fa, depth+1) {
				return true
			}
		}
		return false
	}
	return walk(alloc, 0)
}

// holdsField reports whether the struct t has a field name, directly or in
// an embedded struct.
func holdsField(t types.Type, name string, depth int) bool {
	st, ok := t.Underlying().(*types.Struct)
	if !ok || depth > 6 {
		return false
	}
	for i := range st.NumFields() {
		f := st.Field(i)
		if f.Name() == name || f.Embedded() && holdsField(f.Type(), name, depth+1) {
			return true
		}
	}
	return false
}

func isZeroConst(v ssa.Value) bool {
	c, ok := v.(*ssa.Const)
	return ok && (c.Value == nil || c.Value.ExactString() == "0")
}

func quote(s string) string { return `"` + s + `"` }

// text returns the source text of an expression, shortened.
func (c *checker) text(e ast.Expr) string {
	if e == nil {
		return "…"
	}
	s := types.ExprString(e)
	if len(s) > 40 {
		s = s[:37] + "..."
	}
	return s
}
