package gormlockvet

import (
	"go/types"

	"golang.org/x/tools/go/ssa"
	"gorm.io/gorm/clause"
)

// GORM's clause expressions as conditions: Where(clause.Eq{...}),
// Where(clause.And(...)), Clauses(clause.Where{Exprs: ...}), read as
// strict mode reads the WHERE that GORM builds of them (repository's
// versionCondition): a clause.Eq of the version column (a name, or a
// clause.Column of the model's table) and one value guards; so does a
// clause.Expr or clause.NamedExpr whose SQL guards, and an AndConditions
// one of whose members guards. A clause.OrConditions (clause.Or) joins by
// OR, as Or does. Only expressions built in place are read: one held in a
// variable or built by a helper guards nothing.

// clausePkg is the path of GORM's clause package.
const clausePkg = "gorm.io/gorm/clause"

// clauseType returns the name of v's type when v is a value of a type of
// GORM's clause package ("Eq", "Where"), and "" otherwise.
func clauseType(v ssa.Value) string {
	n, ok := types.Unalias(unwrap(v).Type()).(*types.Named)
	if !ok || n.Obj().Pkg() == nil || n.Obj().Pkg().Path() != clausePkg {
		return ""
	}
	return n.Obj().Name()
}

// clauseCall returns the name of the function of package clause that v is
// the result of (clause.And, clause.Or), and its arguments.
func clauseCall(v ssa.Value) (string, []ssa.Value) {
	call, ok := unwrap(v).(*ssa.Call)
	if !ok {
		return "", nil
	}
	fn := call.Call.StaticCallee()
	if fn == nil || fn.Pkg == nil || fn.Pkg.Pkg.Path() != clausePkg || fn.Signature.Recv() != nil || len(call.Call.Args) != 1 {
		return "", nil
	}
	return fn.Name(), variadic(call.Call.Args[0])
}

// isOrCondition reports whether v is a clause.OrConditions, which GORM
// joins to the other conditions by OR.
func isOrCondition(v ssa.Value) bool {
	if name, _ := clauseCall(v); name == "Or" {
		return true
	}
	return clauseType(v) == "OrConditions"
}

// clauseConditions returns the conditions an argument of Clauses adds to
// the WHERE: a clause.Where's expressions, or the argument itself when it
// is an expression that is no clause (GORM's Clauses makes a WHERE of
// those); none for the other clauses (Locking, Returning, OnConflict, ...).
// A clause.Where whose expressions are not built in place adds one
// condition of no known shape, v itself.
func clauseConditions(v ssa.Value) []ssa.Value {
	e := unwrap(v)
	if clauseType(e) == "Where" {
		if exprs := variadic(structFields(e)["Exprs"]); exprs != nil {
			return exprs
		}
		return []ssa.Value{e}
	}
	if !types.IsInterface(e.Type()) && implementsClause(e.Type()) {
		return nil
	}
	return []ssa.Value{e}
}

// clauseInterface is clause.Interface, a clause of its own.
var clauseInterface = types.NewInterfaceType([]*types.Func{
	types.NewFunc(0, nil, "Name", types.NewSignatureType(nil, nil, nil, nil, types.NewTuple(types.NewVar(0, nil, "", types.Typ[types.String])), false)),
}, nil).Complete()

// implementsClause reports whether t has clause.Interface's Name method
// (a clause of its own, not a condition).
func implementsClause(t types.Type) bool {
	return types.Implements(t, clauseInterface) || types.Implements(types.NewPointer(t), clauseInterface)
}

// clauseGuards reports whether the clause expression v guards a write of
// m.
func (c *checker) clauseGuards(v ssa.Value, m *model) bool {
	if name, args := clauseCall(v); name == "And" {
		return c.allGuard(args, m)
	}
	fields := structFields(v)
	switch clauseType(v) {
	case "Eq":
		return isVersionColumnValue(fields["Column"], m) && isOneValue(fields["Value"])
	case "Expr", "NamedExpr":
		s, ok := constString(fields["SQL"])
		return ok && condGuardsSQL(s, m)
	case "AndConditions":
		return c.allGuard(variadic(fields["Exprs"]), m)
	}
	return false
}

// allGuard reports whether the members of an AndConditions guard a write
// of m: one of them guards and none joins by OR.
func (c *checker) allGuard(exprs []ssa.Value, m *model) bool {
	guarded := false
	for _, e := range exprs {
		if isOrCondition(e) {
			return false
		}
		if c.clauseGuards(e, m) {
			guarded = true
		}
	}
	return guarded
}

// isVersionColumnValue reports whether v, a clause.Eq's Column, names m's
// version column: a constant name, or a clause.Column of the current
// table or m's, not raw SQL.
func isVersionColumnValue(v ssa.Value, m *model) bool {
	if v == nil {
		return false
	}
	if s, ok := constString(v); ok {
		return isVersionColumn(s, m)
	}
	if clauseType(v) != "Column" {
		return false
	}
	col := structFields(v)
	name, ok := constString(col["Name"])
	if !ok || !isVersionColumn(name, m) {
		return false
	}
	if raw := col["Raw"]; raw != nil && !isZeroConst(raw) {
		return false
	}
	if t := col["Table"]; t != nil {
		table, ok := constString(t)
		return ok && (table == "" || table == clause.CurrentTable || table == m.table)
	}
	return true
}

// isOneValue reports whether v, a clause.Eq's Value, is one value: set,
// not nil (IS NULL), not a slice (IN (...)).
func isOneValue(v ssa.Value) bool {
	if v == nil {
		return false
	}
	if c, ok := unwrap(v).(*ssa.Const); ok && c.IsNil() {
		return false
	}
	switch unwrap(v).Type().Underlying().(type) {
	case *types.Slice, *types.Array:
		return false
	}
	return true
}

// structFields returns the values stored into the fields of a struct built
// in place (a composite literal), by field name; a field stored more than
// once (a variable changed after it was built) is left out.
func structFields(v ssa.Value) map[string]ssa.Value {
	if l, ok := unwrap(v).(*ssa.UnOp); ok {
		v = l.X
	}
	alloc, ok := v.(*ssa.Alloc)
	if !ok {
		return nil
	}
	st, ok := types.Unalias(alloc.Type()).(*types.Pointer).Elem().Underlying().(*types.Struct)
	if !ok {
		return nil
	}
	out := map[string]ssa.Value{}
	stores := map[string]int{}
	for _, ref := range *alloc.Referrers() {
		fa, ok := ref.(*ssa.FieldAddr)
		if !ok || fa.X != alloc {
			continue
		}
		name := st.Field(fa.Field).Name()
		for _, r := range *fa.Referrers() {
			if s, ok := r.(*ssa.Store); ok && s.Addr == fa {
				out[name] = s.Val
				stores[name]++
			}
		}
	}
	for name, n := range stores {
		if n > 1 {
			delete(out, name)
		}
	}
	return out
}
