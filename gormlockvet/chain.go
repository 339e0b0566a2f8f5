package gormlockvet

import (
	"go/constant"
	"go/token"
	"go/types"

	"golang.org/x/tools/go/ssa"
)

// The dataflow: what a *gorm.DB value is.
//
// A *gorm.DB reaching a write is traced back through its SSA definitions,
// inside the function and through the functions of the same package that
// it calls or that call it:
//
//   - a call of a chain method (Model, Table, Where, Or, Not, Scopes, and
//     the methods that only pass the chain on: Session, WithContext, Debug,
//     Select, Omit, Order, Limit, ...) adds its step to what its receiver is;
//   - a variable assigned in several branches (an SSA φ) is each of them, a
//     variable captured by a closure or whose address is taken is every
//     value stored into it;
//   - a helper of the package that returns a *gorm.DB is what its return
//     statements give, its parameters bound to the caller's arguments;
//   - a parameter of the function is what the package's callers pass for
//     it, when they all call it directly; otherwise (an exported function
//     called from elsewhere, a callback) it is a *gorm.DB of no model.
//
// Limits: a chain kept in a struct field, a global, a map or a channel is
// a *gorm.DB of no model; a helper or a scope of another package is not
// followed; GORM's in-place update of a statement (q.Where(...) with its
// result dropped) is not seen, so a guard added that way is missed and the
// write reported. Depths are bounded (helpers 4 deep, callers 3 up, 32
// alternative chains per value).

// opKind is the kind of one step of a chain.
type opKind int

const (
	opModel opKind = iota
	opTable
	opWhere
	opOr
	opNot
	opContext
)

// op is one step of a chain.
type op struct {
	kind opKind
	call *ssa.CallCommon
	// typ is Model's argument's type (or the generic API's T).
	typ types.Type
	// arg is Model's argument, WithContext's context or the first
	// argument of Where, Or and Not.
	arg   ssa.Value
	args  []ssa.Value // the rest of Where's, Or's and Not's arguments
	table string      // Table's name, "" when not a constant
}

// chain is one way a *gorm.DB value can be built: its steps, in order, from
// a *gorm.DB of no model or from a parameter whose callers are unknown.
type chain struct {
	ops   []op
	param *ssa.Parameter  // the parameter it starts from, if any
	via   *ssa.CallCommon // the call in a caller that passed the parameter
}

func (c chain) then(o op) chain {
	ops := make([]op, len(c.ops), len(c.ops)+1)
	copy(ops, c.ops)
	c.ops = append(ops, o)
	return c
}

const (
	maxAlternatives = 32
	maxHelperDepth  = 4
	maxCallerDepth  = 3
)

// env binds the parameters of a helper being followed to what its caller
// passed.
type env struct {
	params map[*ssa.Parameter][]chain
	depth  int
}

// flow traces *gorm.DB values within one package.
type flow struct {
	pkg *ssa.Package
	// callers maps a function of the package to the calls of it the
	// package makes directly.
	callers map[*ssa.Function][]*ssa.CallCommon
	// closures maps an anonymous function to the closures made of it.
	closures map[*ssa.Function][]*ssa.MakeClosure
	visiting map[ssa.Value]bool
}

func newFlow(pkg *ssa.Package, funcs []*ssa.Function) *flow {
	f := &flow{pkg: pkg, callers: map[*ssa.Function][]*ssa.CallCommon{}, closures: map[*ssa.Function][]*ssa.MakeClosure{}, visiting: map[ssa.Value]bool{}}
	for _, fn := range funcs {
		for _, b := range fn.Blocks {
			for _, instr := range b.Instrs {
				switch instr := instr.(type) {
				case ssa.CallInstruction:
					if callee := instr.Common().StaticCallee(); callee != nil && callee.Pkg == pkg {
						f.callers[callee] = append(f.callers[callee], instr.Common())
					}
				case *ssa.MakeClosure:
					if fn, ok := instr.Fn.(*ssa.Function); ok {
						f.closures[fn] = append(f.closures[fn], instr)
					}
				}
			}
		}
	}
	return f
}

// eval returns the chains v can be.
func (f *flow) eval(v ssa.Value, e *env) []chain {
	if f.visiting[v] {
		return nil
	}
	f.visiting[v] = true
	defer delete(f.visiting, v)
	var out []chain
	switch v := v.(type) {
	case *ssa.Call:
		out = f.evalCall(&v.Call, e)
	case *ssa.Phi:
		for _, edge := range v.Edges {
			out = append(out, f.eval(edge, e)...)
		}
	case *ssa.Parameter:
		if bound, ok := e.params[v]; ok {
			return bound
		}
		out = []chain{{param: v}}
	case *ssa.UnOp:
		if v.Op == token.MUL {
			out = f.stored(v.X, e)
		}
	case *ssa.Extract:
		if call, ok := v.Tuple.(*ssa.Call); ok {
			out = f.helper(&call.Call, v.Index, e)
		}
	case *ssa.ChangeType:
		out = f.eval(v.X, e)
	case *ssa.FreeVar:
		out = f.freeVar(v, e, f.eval)
	}
	if len(out) == 0 {
		out = []chain{{}}
	}
	if len(out) > maxAlternatives {
		out = out[:maxAlternatives]
	}
	return out
}

// stored returns the chains of every value stored at addr: a local
// variable whose address is taken, or one captured by a closure.
func (f *flow) stored(addr ssa.Value, e *env) []chain {
	switch a := addr.(type) {
	case *ssa.Alloc:
		var out []chain
		for _, ref := range *a.Referrers() {
			if st, ok := ref.(*ssa.Store); ok && st.Addr == a {
				out = append(out, f.eval(st.Val, e)...)
			}
		}
		return out
	case *ssa.FreeVar:
		return f.freeVar(a, e, f.stored)
	}
	return nil
}

// freeVar follows a closure's captured variable to what each closure made
// of the function binds to it.
func (f *flow) freeVar(v *ssa.FreeVar, e *env, next func(ssa.Value, *env) []chain) []chain {
	fn := v.Parent()
	idx := -1
	for i, fv := range fn.FreeVars {
		if fv == v {
			idx = i
		}
	}
	var out []chain
	for _, mc := range f.closures[fn] {
		if idx >= 0 && idx < len(mc.Bindings) {
			out = append(out, next(mc.Bindings[idx], e)...)
		}
	}
	return out
}

// evalCall returns the chains the result of a call can be.
func (f *flow) evalCall(call *ssa.CallCommon, e *env) []chain {
	recv, name, generic := chainMethod(call)
	if recv == nil {
		if callee := call.StaticCallee(); callee != nil && isGormFunc(callee, "G") {
			// gorm.G[T](db): the generic API, whose model is T.
			if targs := callee.TypeArgs(); len(targs) == 1 && len(call.Args) > 0 {
				return f.each(f.eval(call.Args[0], e), func(c chain) chain { return c.then(op{kind: opModel, call: call, typ: targs[0]}) })
			}
		}
		return f.helper(call, 0, e)
	}
	base := f.eval(recv, e)
	args := call.Args
	if !generic {
		args = args[1:] // the receiver
	}
	switch name {
	case "Model":
		if len(args) == 1 {
			arg := unwrap(args[0])
			return f.each(base, func(c chain) chain { return c.then(op{kind: opModel, call: call, typ: arg.Type(), arg: arg}) })
		}
	case "Table":
		if len(args) >= 1 {
			table, _ := constString(args[0])
			return f.each(base, func(c chain) chain { return c.then(op{kind: opTable, call: call, table: table}) })
		}
	case "Where", "Or", "Not":
		if len(args) == 2 {
			k := map[string]opKind{"Where": opWhere, "Or": opOr, "Not": opNot}[name]
			query, rest := unwrap(args[0]), variadic(args[1])
			if k == opWhere && joinsByOr(query, rest) {
				k = opOr
			}
			return f.each(base, func(c chain) chain { return c.then(op{kind: k, call: call, arg: query, args: rest}) })
		}
	case "Clauses":
		if !generic && len(args) == 1 {
			var ops []op
			for _, e := range variadic(args[0]) {
				for _, cond := range clauseConditions(e) {
					k := opWhere
					if isOrCondition(cond) {
						k = opOr
					}
					ops = append(ops, op{kind: k, call: call, arg: cond})
				}
			}
			return f.each(base, func(c chain) chain {
				for _, o := range ops {
					c = c.then(o)
				}
				return c
			})
		}
	case "WithContext":
		if len(args) == 1 {
			return f.each(base, func(c chain) chain { return c.then(op{kind: opContext, call: call, arg: args[0]}) })
		}
	case "Scopes":
		if !generic && len(args) == 1 {
			out := base
			for _, fn := range variadic(args[0]) {
				out = f.scope(fn, out, e)
			}
			return out
		}
	}
	return base
}

// scope applies a Scopes function to the chains it receives: what the
// function returns when its parameter is each of them. A scope of another
// package, or one not known, leaves them as they are.
func (f *flow) scope(fn ssa.Value, in []chain, e *env) []chain {
	targets := f.scopeFuncs(fn)
	if len(targets) == 0 || e.depth >= maxHelperDepth {
		return in
	}
	var out []chain
	for _, target := range targets {
		if len(target.Blocks) == 0 || len(target.Params) != 1 {
			return in
		}
		inner := &env{params: map[*ssa.Parameter][]chain{target.Params[0]: in}, depth: e.depth + 1}
		out = append(out, f.returns(target, 0, inner)...)
	}
	return out
}

// scopeFuncs returns the functions a Scopes argument can be: a function, a
// closure, or the closures a function of the package returns
// (Scopes(AtVersion(v))).
func (f *flow) scopeFuncs(v ssa.Value) []*ssa.Function {
	if fn := calledFunction(v); fn != nil {
		return []*ssa.Function{fn}
	}
	call, ok := unwrap(v).(*ssa.Call)
	if !ok {
		return nil
	}
	callee := call.Call.StaticCallee()
	if callee == nil || callee.Pkg != f.pkg || len(callee.Blocks) == 0 {
		return nil
	}
	var out []*ssa.Function
	for _, b := range callee.Blocks {
		if ret, ok := b.Instrs[len(b.Instrs)-1].(*ssa.Return); ok && len(ret.Results) == 1 {
			fn := calledFunction(ret.Results[0])
			if fn == nil {
				return nil
			}
			out = append(out, fn)
		}
	}
	return out
}

// helper returns the chains result index of a call of a function of the
// package can be, following its return statements with its parameters
// bound to the call's arguments.
func (f *flow) helper(call *ssa.CallCommon, index int, e *env) []chain {
	callee := call.StaticCallee()
	if callee == nil || callee.Pkg != f.pkg || len(callee.Blocks) == 0 || e.depth >= maxHelperDepth {
		return nil
	}
	inner := &env{params: map[*ssa.Parameter][]chain{}, depth: e.depth + 1}
	for i, p := range callee.Params {
		if i < len(call.Args) && isGormDB(p.Type()) {
			inner.params[p] = f.eval(call.Args[i], e)
		}
	}
	return f.returns(callee, index, inner)
}

// returns returns the chains result index of fn can be.
func (f *flow) returns(fn *ssa.Function, index int, e *env) []chain {
	var out []chain
	for _, b := range fn.Blocks {
		if ret, ok := b.Instrs[len(b.Instrs)-1].(*ssa.Return); ok && index < len(ret.Results) {
			out = append(out, f.eval(ret.Results[index], e)...)
		}
	}
	return out
}

func (f *flow) each(in []chain, g func(chain) chain) []chain {
	out := make([]chain, len(in))
	for i, c := range in {
		out[i] = g(c)
	}
	return out
}

// resolve replaces a chain that starts from a parameter by the chains the
// package's callers pass for it, when every caller is known.
func (f *flow) resolve(cs []chain, depth int) []chain {
	var out []chain
	for _, c := range cs {
		if c.param == nil || depth >= maxCallerDepth {
			out = append(out, c)
			continue
		}
		fn := c.param.Parent()
		idx := -1
		for i, p := range fn.Params {
			if p == c.param {
				idx = i
			}
		}
		calls := f.callers[fn]
		if idx < 0 || len(calls) == 0 || fn.Object() != nil && fn.Object().Exported() || isAddressTaken(fn) {
			out = append(out, c)
			continue
		}
		for _, call := range calls {
			if idx >= len(call.Args) {
				continue
			}
			for _, prefix := range f.resolve(f.eval(call.Args[idx], &env{}), depth+1) {
				joined := prefix
				joined.ops = append(append([]op(nil), prefix.ops...), c.ops...)
				if joined.via == nil {
					joined.via = call
				}
				out = append(out, joined)
			}
		}
	}
	return out
}

// joinsByOr reports whether a Where's conditions hold a clause.Or: GORM
// joins it to the others by OR. A condition that is no string is followed
// by more conditions in the arguments.
func joinsByOr(query ssa.Value, args []ssa.Value) bool {
	if isOrCondition(query) {
		return true
	}
	if _, ok := constString(query); ok {
		return false
	}
	for _, a := range args {
		if isOrCondition(a) {
			return true
		}
	}
	return false
}

// isAddressTaken reports whether fn is used other than by direct calls
// (passed as a value, stored): then its callers are not all known.
func isAddressTaken(fn *ssa.Function) bool {
	if fn.Object() == nil {
		return true // an anonymous function: called through its closure
	}
	for _, r := range fnReferrers(fn) {
		if call, ok := r.(ssa.CallInstruction); ok && call.Common().Value == fn {
			continue
		}
		return true
	}
	return false
}

// fnReferrers returns the instructions of fn's package that use fn.
func fnReferrers(fn *ssa.Function) []ssa.Instruction {
	var out []ssa.Instruction
	for _, m := range fn.Pkg.Members {
		g, ok := m.(*ssa.Function)
		if !ok {
			continue
		}
		for _, h := range append([]*ssa.Function{g}, g.AnonFuncs...) {
			for _, b := range h.Blocks {
				for _, instr := range b.Instrs {
					for _, op := range instr.Operands(nil) {
						if op != nil && *op == fn {
							out = append(out, instr)
						}
					}
				}
			}
		}
	}
	return out
}

// chainMethod returns the receiver and name of a call of a chain method:
// a method of *gorm.DB, or of the generic API's interfaces (generic true).
func chainMethod(call *ssa.CallCommon) (recv ssa.Value, name string, generic bool) {
	if call.IsInvoke() {
		if isGenericChain(call.Value.Type()) {
			return call.Value, call.Method.Name(), true
		}
		return nil, "", false
	}
	callee := call.StaticCallee()
	if callee == nil || callee.Signature.Recv() == nil || len(call.Args) == 0 {
		return nil, "", false
	}
	if isGormDB(callee.Signature.Recv().Type()) {
		return call.Args[0], callee.Name(), false
	}
	return nil, "", false
}

// isGormDB reports whether t is *gorm.DB.
func isGormDB(t types.Type) bool {
	p, ok := types.Unalias(t).(*types.Pointer)
	if !ok {
		return false
	}
	n, ok := types.Unalias(p.Elem()).(*types.Named)
	return ok && n.Obj().Name() == "DB" && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == "gorm.io/gorm"
}

// isGenericChain reports whether t is one of the generic API's chain
// interfaces (gorm.Interface[T], ChainInterface[T], ...).
func isGenericChain(t types.Type) bool { return genericModel(t) != nil }

// genericModel returns the T of a generic API interface type, or nil.
func genericModel(t types.Type) types.Type {
	n, ok := types.Unalias(t).(*types.Named)
	if !ok || n.Obj().Pkg() == nil || n.Obj().Pkg().Path() != "gorm.io/gorm" || n.TypeArgs().Len() != 1 {
		return nil
	}
	if _, ok := n.Underlying().(*types.Interface); !ok {
		return nil
	}
	return n.TypeArgs().At(0)
}

func isGormFunc(fn *ssa.Function, name string) bool {
	if o := fn.Origin(); o != nil {
		fn = o
	}
	obj := fn.Object()
	return obj != nil && obj.Name() == name && obj.Pkg() != nil && obj.Pkg().Path() == "gorm.io/gorm" && fn.Signature.Recv() == nil
}

// calledFunction returns the function a func value is, directly or as a
// closure.
func calledFunction(v ssa.Value) *ssa.Function {
	switch v := unwrap(v).(type) {
	case *ssa.Function:
		return v
	case *ssa.MakeClosure:
		fn, _ := v.Fn.(*ssa.Function)
		return fn
	}
	return nil
}

// unwrap returns the value inside an interface conversion.
func unwrap(v ssa.Value) ssa.Value {
	for {
		switch x := v.(type) {
		case *ssa.MakeInterface:
			v = x.X
		case *ssa.ChangeInterface:
			v = x.X
		case *ssa.ChangeType:
			v = x.X
		default:
			return v
		}
	}
}

// variadic returns the values of a variadic argument: the elements stored
// into the array the slice is made of, in order (unwrapped).
func variadic(v ssa.Value) []ssa.Value {
	sl, ok := v.(*ssa.Slice)
	if !ok {
		return nil
	}
	alloc, ok := sl.X.(*ssa.Alloc)
	if !ok {
		return nil
	}
	arr, ok := types.Unalias(alloc.Type()).(*types.Pointer)
	if !ok {
		return nil
	}
	at, ok := arr.Elem().Underlying().(*types.Array)
	if !ok {
		return nil
	}
	out := make([]ssa.Value, at.Len())
	for _, ref := range *alloc.Referrers() {
		ia, ok := ref.(*ssa.IndexAddr)
		if !ok {
			continue
		}
		c, ok := ia.Index.(*ssa.Const)
		if !ok {
			continue
		}
		i, ok := constant.Int64Val(c.Value)
		if !ok || i < 0 || i >= at.Len() {
			continue
		}
		for _, r := range *ia.Referrers() {
			if st, ok := r.(*ssa.Store); ok && st.Addr == ia {
				out[i] = unwrap(st.Val)
			}
		}
	}
	for _, x := range out {
		if x == nil {
			return nil
		}
	}
	return out
}

// constString returns the value of a string constant.
func constString(v ssa.Value) (string, bool) {
	c, ok := unwrap(v).(*ssa.Const)
	if !ok || c.Value == nil || c.Value.Kind() != constant.String {
		return "", false
	}
	return constant.StringVal(c.Value), true
}
