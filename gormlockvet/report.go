package gormlockvet

import (
	"fmt"
	"go/ast"
	"go/token"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/ssa"

	"github.com/gormlock/gormlock/gormlockvet/internal/sqltext"
)

// report reports a GORM write of t through ch that why says is unguarded.
func (c *checker) report(fn *ssa.Function, w write, ch chain, t target, why string) {
	ce := c.calls[w.call.Pos()]
	if ce == nil {
		return
	}
	pos := ce.Pos()
	if sel, ok := ce.Fun.(*ast.SelectorExpr); ok {
		pos = sel.Sel.Pos()
	}
	if c.isIgnored(pos, ce.Pos()) || c.isIgnoredCall(ch) {
		return
	}
	key := fmt.Sprintf("%d %s", pos, t.name)
	if c.reported[key] {
		return
	}
	c.reported[key] = true

	inc, incOK := c.increment(w, t)
	var b strings.Builder
	fmt.Fprintf(&b, "unguarded %s of versioned model %s", w.name, t.name)
	if t.table != "" {
		fmt.Fprintf(&b, " (table %s)", t.table)
	}
	fmt.Fprintf(&b, " through %s: %s, so it can erase a concurrent change; ", t.how, why)
	repo := "Repository[" + t.shortName() + "]"
	switch {
	case incOK:
		fmt.Fprintf(&b, "write it with %s.Apply(ctx, id, []repository.Change{repository.Add(%q, %s)})", repo, inc.field, inc.deltaText)
	case w.name == "Save":
		fmt.Fprintf(&b, "write it with %s.Update (guarded by the version the record was read with) or Mutate; Save also inserts the record again when the update matches no row", repo)
	case w.name == "Delete":
		fmt.Fprintf(&b, "delete it with %s.Delete of the record read with its version, or add Where(\"%s = ?\", version)", repo, t.verCol)
	default:
		fmt.Fprintf(&b, "write it with %s.Mutate (read, change, guarded write, retried on conflict) or Apply, or add Where(\"%s = ?\", version)", repo, t.verCol)
	}
	if t.record && w.name != "Delete" && !flagConfig.guardGORMUpdates {
		b.WriteString("; repository.Plugin(repository.GuardGORMUpdates()) guards this call only where it is registered on the *gorm.DB that runs it (if every *gorm.DB has it, run gormlockvet with -guard-gorm-updates)")
	}
	if ch.via != nil {
		p := c.pass.Fset.Position(ch.via.Pos())
		fmt.Fprintf(&b, " (the *gorm.DB is the one passed at %s:%d)", shortFile(p.Filename), p.Line)
	}
	d := analysis.Diagnostic{Pos: pos, End: ce.End(), Message: b.String()}
	if incOK {
		if fix, ok := c.applyFix(fn, w, ch, t, inc, ce); ok {
			d.SuggestedFixes = []analysis.SuggestedFix{fix}
		}
	}
	c.pass.Report(d)
}

// isIgnoredCall reports whether the chain was built on a line marked
// //gormlockvet:ignore (a write in a helper whose caller is marked).
func (c *checker) isIgnoredCall(ch chain) bool {
	return ch.via != nil && c.isIgnored(ch.via.Pos())
}

// isIgnored reports whether one of the positions is on a line marked
// //gormlockvet:ignore or the line after one.
func (c *checker) isIgnored(positions ...token.Pos) bool {
	for _, pos := range positions {
		if !pos.IsValid() {
			continue
		}
		tf := c.pass.Fset.File(pos)
		if tf != nil && c.ignored[tf][tf.Line(pos)] {
			return true
		}
	}
	return false
}

func (m *model) shortName() string {
	if m.typ != nil {
		return m.typ.Obj().Name()
	}
	_, n, _ := strings.Cut(m.name, ".")
	return n
}

func shortFile(name string) string {
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		return name[i+1:]
	}
	return name
}

// rawMethods are the methods (and functions) whose string argument is SQL
// that runs: GORM's Exec and Raw, database/sql's, sqlx's and pgx's.
var rawMethods = map[string]bool{
	"Exec": true, "ExecContext": true, "MustExec": true, "MustExecContext": true,
	"NamedExec": true, "NamedExecContext": true, "Raw": true,
	"Query": true, "QueryContext": true, "QueryRow": true, "QueryRowContext": true,
	"Queryx": true, "QueryxContext": true, "QueryRowx": true, "QueryRowxContext": true,
	"Prepare": true, "PrepareContext": true, "Preparex": true, "PreparexContext": true,
	"Get": true, "GetContext": true, "Select": true, "SelectContext": true,
}

// checkRaw reports the raw SQL UPDATE and DELETE statements of versioned
// models' tables a call runs, when their WHERE has no version guard.
func (c *checker) checkRaw(call *ssa.CallCommon) {
	var name string
	offset := 0
	if call.IsInvoke() {
		name = call.Method.Name()
	} else if callee := call.StaticCallee(); callee != nil {
		name = callee.Name()
		if callee.Signature.Recv() != nil {
			offset = 1
		}
	}
	if !rawMethods[name] {
		return
	}
	sig := call.Signature()
	var sql string
	found := false
	for i := 0; i < sig.Params().Len() && !found; i++ {
		if sig.Variadic() && i == sig.Params().Len()-1 {
			break
		}
		if !isString(sig.Params().At(i).Type()) || i+offset >= len(call.Args) {
			continue
		}
		sql, found = sqlText(call.Args[i+offset], 0)
		if !found {
			return
		}
	}
	if !found {
		return
	}
	ce := c.calls[call.Pos()]
	if ce == nil {
		return
	}
	pos := ce.Pos()
	if sel, ok := ce.Fun.(*ast.SelectorExpr); ok {
		pos = sel.Sel.Pos()
	}
	if c.isIgnored(pos, ce.Pos()) {
		return
	}
	for _, w := range sqltext.Writes(sql) {
		ms := c.models.tables[w.Table]
		if len(ms) == 0 {
			for t, tms := range c.models.tables {
				if strings.EqualFold(t, w.Table) {
					ms = tms
				}
			}
		}
		for _, m := range ms {
			if whereGuards(w.Where, m) {
				continue
			}
			key := fmt.Sprintf("%d %s %s", pos, m.name, w.Op)
			if c.reported[key] {
				continue
			}
			c.reported[key] = true
			advances := ""
			for _, s := range w.Sets {
				if strings.EqualFold(s, m.verCol) {
					advances = " (it advances the version but checks none)"
				}
			}
			c.pass.Report(analysis.Diagnostic{Pos: pos, End: ce.End(), Message: fmt.Sprintf(
				"unguarded raw SQL %s of versioned model %s (table %s) through %s: no condition on its version column (%s) in its WHERE guards it%s, so it can erase a concurrent change; write it with Repository[%s].Apply or Mutate, or add \"AND %s = ?\" to its WHERE",
				w.Op, m.name, w.Table, name, m.verCol, advances, m.shortName(), m.verCol)})
		}
	}
}

// sqlText returns the SQL text of a string value: a constant, or a
// concatenation whose parts that are not constant read as a placeholder.
// ok is false when no part is constant.
func sqlText(v ssa.Value, depth int) (string, bool) {
	if s, ok := constString(v); ok {
		return s, true
	}
	if b, ok := v.(*ssa.BinOp); ok && b.Op == token.ADD && depth < 16 && isString(b.Type()) {
		l, lok := sqlText(b.X, depth+1)
		r, rok := sqlText(b.Y, depth+1)
		if !lok {
			l = " ? "
		}
		if !rok {
			r = " ? "
		}
		return l + r, lok || rok
	}
	return "", false
}
