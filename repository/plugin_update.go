package repository

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strconv"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/callbacks"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"

	"github.com/gormlock/gormlock/internal/dialect"
	"github.com/gormlock/gormlock/internal/sqlguard"
	"github.com/gormlock/gormlock/internal/store"
	"github.com/gormlock/gormlock/locking"
)

// pluginWrites holds the plugin's callbacks for one database.
type pluginWrites struct {
	*plugin
	greatest string // the SQL function of the larger of two values: GREATEST, or SQLite's MAX
	mysql    bool   // MySQL and MariaDB: an upsert names the new row's values VALUES(col)
}

// updateKey is the Statement.Settings key of an update's updateState.
type updateKey struct{}

// updateState is what the update callbacks tell each other about one
// statement of a versioned model.
type updateState struct {
	version *schema.Field

	// guarded: GuardGORMUpdates added AND version = expected; the
	// statement gives the record the version next.
	guarded  bool
	expected int64
	next     int64
	keys     []any         // the record's key values, in the schema's order
	record   reflect.Value // the record, addressable, to take next
	// where is the WHERE clause before the guard was added (hadWhere: there
	// was one), put back after the statement.
	where    clause.Clause
	hadWhere bool

	// setAdded: the SET clause is the plugin's; set is the one there was
	// before (hadSet), put back after the statement.
	setAdded bool
	set      clause.Clause
	hadSet   bool
	expr     versionExpr // the version's new value, in the SET clause
	// kept: the statement changes only fields tagged gormlock:"unversioned"
	// (and the update time): the version is left as it is.
	kept bool
	// ctx is the statement's context, when the guarded update is sent on
	// SQLite with one that does not end instead (see updateGuard); put
	// back after the statement.
	ctx context.Context
}

// updateGuard runs first among the update callbacks: it adds the version
// guard (GuardGORMUpdates), and reports or refuses an unguarded update
// (StrictGORMWrites) before any hook runs.
func (w *pluginWrites) updateGuard(db *gorm.DB) {
	stmt := db.Statement
	if db.Error != nil || stmt.SQL.Len() > 0 {
		return
	}
	ver := w.versionOf(stmt.Schema)
	if ver == nil {
		return
	}
	st := &updateState{version: ver}
	if (w.cfg.guard || w.cfg.strict != nil) && w.hasUnversioned(stmt.Schema) {
		if names := blindUnversioned(stmt); len(names) > 0 && !w.blindWrite(db, names) {
			return
		}
	}
	if w.cfg.guard && !w.guard(db, st) {
		return
	}
	// A guarded statement without conditions of its own has the plugin's
	// guard alone: nothing to check.
	check := w.cfg.strict != nil && !st.guarded || st.guarded && hasConditions(st.where)
	if check {
		if ok, why := whereGuards(stmt, ver); !ok {
			if st.guarded {
				// The caller's condition can undo the guard the plugin
				// added (an unbalanced parenthesis, a comment): refused,
				// strict mode or not.
				st.restoreWhere(stmt)
				db.AddError(fmt.Errorf("%w: update of %s at %s: GuardGORMUpdates cannot guard it: its condition, with the guard, is not a version guard (%s); nothing was written",
					locking.ErrUnguardedWrite, stmt.Table, pluginCaller(), why))
				return
			}
			if !w.unguarded(db, "update", why) {
				return
			}
		}
	}
	stmt.Settings.Store(updateKey{}, st)
}

// guard adds AND version = ? to the update when its model is one record
// with its key and version set, and notes what updateCheck needs. It
// returns false when the statement must not run.
func (w *pluginWrites) guard(db *gorm.DB, st *updateState) bool {
	stmt := db.Statement
	rv := reflect.ValueOf(stmt.Model)
	for rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return true
		}
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Struct || rv.Type() != stmt.Schema.ModelType || len(stmt.Schema.PrimaryFields) == 0 {
		return true
	}
	keys := make([]any, 0, len(stmt.Schema.PrimaryFields))
	for _, f := range stmt.Schema.PrimaryFields {
		v, zero := f.ValueOf(stmt.Context, rv)
		if zero {
			return true
		}
		keys = append(keys, v)
	}
	expected, ok := intOf(st.version, rv)
	if !ok || expected == 0 {
		return true
	}
	next, ok := nextVersion(expected)
	if !ok {
		db.AddError(locking.Invalid("%s: update id=%v: version %d cannot advance", stmt.Table, keyValue(keys), expected))
		return false
	}
	st.guarded, st.expected, st.next, st.keys = true, expected, next, keys
	if rv.CanAddr() {
		st.record = rv
	}

	c, had := stmt.Clauses["WHERE"]
	st.where, st.hadWhere = c, had
	if where, ok := c.Expression.(clause.Where); ok && len(where.Exprs) > 0 {
		// a OR b AND version = ? would guard b only, and GORM puts an
		// OR in parentheses only when it sees one: (a OR b) AND version = ?
		c.Expression = clause.Where{Exprs: []clause.Expression{grouped(where.Exprs)}}
		stmt.Clauses["WHERE"] = c
	}
	stmt.AddClause(clause.Where{Exprs: []clause.Expression{
		clause.Eq{Column: clause.Column{Table: clause.CurrentTable, Name: st.version.DBName}, Value: expected},
	}})
	return true
}

// updateSet runs right before GORM's update: it builds the SET clause as
// GORM would (callbacks.ConvertToAssignments; GORM's update callback uses
// a SET clause that is there already), without any assignment to the
// version, and with version = GREATEST(COALESCE(version, 0) + 1, ?) —
// unless the statement changes only fields tagged gormlock:"unversioned"
// (and the update time): then the version is left as it is.
func (w *pluginWrites) updateSet(db *gorm.DB) {
	stmt := db.Statement
	if db.Error != nil || stmt.SQL.Len() > 0 {
		return
	}
	st := updateStateOf(stmt)
	if st == nil {
		return
	}
	if st.guarded && stmt.Context != nil {
		// The outcome is the statement's rows affected, and on SQLite a
		// statement whose context ends as it runs is not told truly: the
		// pure-Go driver answers nil for an UPDATE it never ran, with the
		// previous statement's rows affected. Looked at now, after the
		// hooks, and then sent with a context that does not end (see
		// store.Detach); updateCheck puts the context back.
		sctx, err := store.DetachOn(stmt.Context, db.Dialector.Name() == dialect.SQLite)
		if err != nil {
			db.AddError(err) // not sent; updateCheck puts the WHERE back
			return
		}
		st.ctx, stmt.Context = stmt.Context, sctx
	}
	c, hadSet := stmt.Clauses["SET"]
	var set, out clause.Set
	// omit: the update is from a struct of a model with unversioned
	// fields; emptied: it wrote nothing but them, and the update time.
	var omit, emptied bool
	if hadSet {
		s, ok := c.Expression.(clause.Set)
		if !ok {
			return
		}
		st.set, st.hadSet, set = c, true, s
		out = make(clause.Set, 0, len(s)+1)
	} else {
		// ConvertToAssignments copies the values of a map (or of another
		// struct) into the model: the version the entity holds stays what
		// it was (see Plugin). An update from a struct leaves out the
		// unversioned fields it does not name, and the entity keeps its
		// values of them (and of the update time, when nothing else is
		// written).
		omit = fromStruct(stmt) && w.hasUnversioned(stmt.Schema)
		var kept []fieldCopy
		if rv := stmt.ReflectValue; rv.Kind() == reflect.Struct && rv.CanAddr() && rv.Type() == stmt.Schema.ModelType {
			kept = keepFields(rv, stmt.Schema.Fields, func(f *schema.Field) bool {
				return f == st.version && stmt.Dest != stmt.Model && isIntKind(f.StructField.Type.Kind()) ||
					omit && (isUnversioned(f) || f.AutoUpdateTime != 0)
			})
		}
		set = callbacks.ConvertToAssignments(stmt)
		defer func() {
			restoreFields(kept, func(f *schema.Field) bool {
				return f == st.version || isUnversioned(f) && !selectsByName(stmt, f) || f.AutoUpdateTime != 0 && emptied
			})
		}()
		if db.Error != nil || len(set) == 0 {
			return // GORM's update does nothing either
		}
		out = set[:0] // GORM's own slice, built for this statement
		c = clause.Clause{Name: "SET"}
	}
	unversioned, versioned, omitted := false, false, false
	for _, a := range set {
		if isVersionColumn(a.Column.Name, st.version) {
			continue
		}
		if omit && omittedUnversioned(stmt, a) {
			omitted = true
			continue
		}
		out = append(out, a)
		switch f := stmt.Schema.LookUpField(a.Column.Name); {
		case f != nil && isUnversioned(f):
			unversioned = true
		case f != nil && f.AutoUpdateTime != 0:
		default:
			versioned = true
		}
	}
	if omitted && !versioned {
		// An update from a struct of nothing but unversioned fields (and
		// the update time): it writes nothing (SET id = id), and the
		// version stays.
		out, emptied = out[:0], true
	}
	if unversioned && !versioned || emptied {
		// A change of fields outside the version (UnversionedTag) only:
		// the version stays, as for Apply.
		c.Expression = out
		stmt.Clauses["SET"] = c
		st.setAdded, st.kept = true, true
		return
	}
	floor := st.next
	if !st.guarded {
		floor, _ = nextVersion(0)
	}
	col := clause.Column{Name: st.version.DBName}
	st.expr = versionExpr{greatest: w.greatest, column: col, floor: floor}
	c.Expression = append(out, clause.Assignment{Column: col, Value: &st.expr})
	stmt.Clauses["SET"] = c
	st.setAdded = true
}

// versionExpr is what the plugin sets the version column to:
// GREATEST(COALESCE(column, 0) + 1, floor), MAX on SQLite.
type versionExpr struct {
	greatest string
	column   clause.Column // the version column, of the row written
	floor    any           // the least new version: a number, or an expression
}

// Build implements clause.Expression.
func (e *versionExpr) Build(b clause.Builder) {
	b.WriteString(e.greatest)
	b.WriteString("(COALESCE(")
	b.WriteQuoted(e.column)
	b.WriteString(", 0) + 1, ")
	b.AddVar(b, e.floor)
	b.WriteByte(')')
}

// updateCheck runs right after GORM's update: a guarded update that
// matched no row is reported as stale, one that matched gives the entity
// its new version; then the statement's SET and WHERE are put back as they
// were, so that a *gorm.DB used again builds its next statement afresh.
func (w *pluginWrites) updateCheck(db *gorm.DB) {
	stmt := db.Statement
	st := updateStateOf(stmt)
	if st == nil {
		return
	}
	stmt.Settings.Delete(updateKey{})
	if st.ctx != nil {
		stmt.Context = st.ctx
	}
	if st.guarded && st.setAdded && db.Error == nil && !db.DryRun {
		if db.RowsAffected == 0 {
			if err := w.stale(db, st); err != nil {
				db.AddError(err)
			}
		} else if st.record.IsValid() && !st.kept {
			if err := st.version.Set(stmt.Context, st.record, st.next); err != nil {
				db.AddError(err)
			} else {
				logOf(stmt).note(st.version, st.record, st.expected)
			}
		}
	}
	if st.setAdded {
		if st.hadSet {
			stmt.Clauses["SET"] = st.set
		} else {
			delete(stmt.Clauses, "SET")
		}
	}
	if st.guarded {
		st.restoreWhere(stmt)
	}
}

// logKey is the Statement.Settings key of the versionLog of a write and
// of the writes of its associations (GORM copies a statement's Settings
// into its associations' statements).
type logKey struct{}

// versionLog is what a write gave records, for versionUndo to take back:
// the versions the plugin set (on the record of an update, on the records
// a create writes), with the ones they had.
type versionLog struct{ entries []versionEntry }

type versionEntry struct {
	version *schema.Field
	record  reflect.Value
	old     int64
}

// note records that the plugin gives record a new version in place of old.
func (l *versionLog) note(version *schema.Field, record reflect.Value, old int64) {
	if l != nil {
		l.entries = append(l.entries, versionEntry{version, record, old})
	}
}

// logOf returns the versionLog of stmt's write, or nil.
func logOf(stmt *gorm.Statement) *versionLog {
	if v, ok := stmt.Settings.Load(logKey{}); ok {
		return v.(*versionLog)
	}
	return nil
}

// gormTx reports whether GORM began its default transaction for the
// statement of db (which its commit_or_rollback_transaction ends).
func gormTx(db *gorm.DB) bool {
	_, began := db.InstanceGet("gorm:started_transaction")
	return began && !db.Config.SkipDefaultTransaction
}

// versionLogStart runs before a create's or an update's associations: the
// write GORM began a transaction for starts a log of its own (a reused
// statement may hold an old one); the write of an association joins its
// parent's.
func (w *pluginWrites) versionLogStart(db *gorm.DB) {
	if gormTx(db) {
		db.Statement.Settings.Store(logKey{}, &versionLog{})
		return
	}
	db.Statement.Settings.LoadOrStore(logKey{}, &versionLog{})
}

// versionUndo runs after GORM's own transaction around a write (its
// default transaction) ended. When it rolled back — a hook after the
// write failed, an association's write, or COMMIT — every record the
// write and its associations gave a version gets the one it had back,
// which its row still holds (or none, for a record not created): the
// record then says what the database does, and writing it again is
// guarded by the version the row has, where the new one would be refused
// as stale. A write without a transaction of GORM's committed by itself
// and keeps the new versions; one inside the application's transaction
// keeps them too (that transaction may yet commit).
func (w *pluginWrites) versionUndo(db *gorm.DB) {
	v, ok := db.Statement.Settings.LoadAndDelete(logKey{})
	if !ok || db.Error == nil || !gormTx(db) {
		return
	}
	l := v.(*versionLog)
	for i := len(l.entries) - 1; i >= 0; i-- {
		e := l.entries[i]
		// It cannot fail: the same field took an int64 on the same
		// record when the version was given.
		_ = e.version.Set(db.Statement.Context, e.record, e.old)
	}
}

// hasConditions reports whether c, a WHERE clause, has conditions.
func hasConditions(c clause.Clause) bool {
	where, ok := c.Expression.(clause.Where)
	return ok && len(where.Exprs) > 0 || !ok && c.Expression != nil
}

// restoreWhere puts back the WHERE clause the statement had before the
// guard was added.
func (st *updateState) restoreWhere(stmt *gorm.Statement) {
	if st.hadWhere {
		stmt.Clauses["WHERE"] = st.where
	} else {
		delete(stmt.Clauses, "WHERE")
	}
}

// grouped is a WHERE's conditions in parentheses, whatever they hold.
type grouped []clause.Expression

// Build implements clause.Expression.
func (g grouped) Build(b clause.Builder) {
	b.WriteByte('(')
	clause.Where{Exprs: g}.Build(b)
	b.WriteByte(')')
}

func updateStateOf(stmt *gorm.Statement) *updateState {
	if v, ok := stmt.Settings.Load(updateKey{}); ok {
		st, _ := v.(*updateState)
		return st
	}
	return nil
}

// stale returns the error of a guarded update that matched no row: a
// *locking.StaleDataError when the record is at another version, an error
// matching locking.ErrStaleData and locking.ErrNotFound when it is gone,
// and nil when it is at the expected version (the call's other conditions
// left it out: GORM's usual zero rows).
func (w *pluginWrites) stale(db *gorm.DB, st *updateState) error {
	stmt := db.Statement
	id := keyValue(st.keys)
	actual, found, err := currentVersion(stmt, st)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %s: update id=%v at version %d matched no row; reading its version: %w", locking.ErrStaleData, stmt.Table, id, st.expected, err)
	case !found:
		return fmt.Errorf("%w: %s: update id=%v at version %d: %w", locking.ErrStaleData, stmt.Table, id, st.expected, &locking.NotFoundError{Table: stmt.Table, ID: id})
	case actual == st.expected:
		return nil
	}
	return &locking.StaleDataError{Table: stmt.Table, ID: id, Expected: st.expected, Actual: actual, Op: "update"}
}

// currentVersion reads the version of the guarded record on the update's
// own connection (its transaction), leaving out a soft-deleted record
// unless the update was Unscoped.
func currentVersion(stmt *gorm.Statement, st *updateState) (int64, bool, error) {
	q := &gorm.Statement{
		DB: stmt.DB, Context: stmt.Context, Table: stmt.Table, TableExpr: stmt.TableExpr,
		Schema: stmt.Schema, Clauses: map[string]clause.Clause{},
	}
	exprs := make([]clause.Expression, 0, len(st.keys)+1)
	for i, f := range stmt.Schema.PrimaryFields {
		exprs = append(exprs, clause.Eq{Column: clause.Column{Table: clause.CurrentTable, Name: f.DBName}, Value: st.keys[i]})
	}
	if !stmt.Unscoped {
		for _, f := range stmt.Schema.Fields {
			if f.DBName != "" && f.FieldType == reflect.TypeOf(gorm.DeletedAt{}) {
				exprs = append(exprs, clause.Eq{Column: clause.Column{Table: clause.CurrentTable, Name: f.DBName}, Value: nil})
			}
		}
	}
	q.AddClause(clause.Select{Columns: []clause.Column{{Table: clause.CurrentTable, Name: st.version.DBName}}})
	q.AddClause(clause.From{})
	q.AddClause(clause.Where{Exprs: exprs})
	q.Build("SELECT", "FROM", "WHERE")
	var v sql.NullInt64
	err := stmt.ConnPool.QueryRowContext(stmt.Context, q.SQL.String(), q.Vars...).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, locking.Classify(err)
	}
	return v.Int64, true, nil
}

// deleteCheck reports or refuses a delete of a versioned model that no
// version condition guards (StrictGORMWrites).
func (w *pluginWrites) deleteCheck(db *gorm.DB) {
	stmt := db.Statement
	if db.Error != nil || stmt.SQL.Len() > 0 {
		return
	}
	ver := w.versionOf(stmt.Schema)
	if ver == nil {
		return
	}
	if ok, why := whereGuards(stmt, ver); !ok {
		w.unguarded(db, "delete", why)
	}
}

// unguarded reports an unguarded write (StrictGORMWrites): refused, with
// an error matching locking.ErrUnguardedWrite (it returns false), or logged
// as a warning (it returns true: the write goes on).
func (w *pluginWrites) unguarded(db *gorm.DB, op, why string) bool {
	stmt := db.Statement
	caller := pluginCaller()
	if *w.cfg.strict {
		db.AddError(fmt.Errorf("%w: %s of %s at %s: no version guards it (%s), so it could erase a concurrent change: write it with a gormlock repository, add a condition %s = ? joined by AND, or guard it with GuardGORMUpdates; nothing was written",
			locking.ErrUnguardedWrite, op, stmt.Table, caller, why, stmt.Quote(w.versionOf(stmt.Schema).DBName)))
		return false
	}
	if db.Logger != nil {
		db.Logger.Warn(stmt.Context, "gormlock: unguarded %s of %s at %s: no version guards it (%s), so it could erase a concurrent change", op, stmt.Table, caller, why)
	}
	return true
}

// whereGuards reports whether the statement's WHERE guards it by the
// version column, deciding from the condition's structure (package
// internal/sqlguard) on the SQL GORM builds from it, placeholders and all:
// an equality on the model's version column, joined by AND at the top
// level. Whatever GORM's expressions are (Where's text and values, a map,
// a struct, clause.Eq, Or, Not, named arguments, a subquery), what is
// checked is what the database would be sent. why says, when it does not,
// why not.
func whereGuards(stmt *gorm.Statement, ver *schema.Field) (ok bool, why string) {
	c, had := stmt.Clauses["WHERE"]
	if !had {
		return false, "no WHERE"
	}
	where, isWhere := c.Expression.(clause.Where)
	if !isWhere || len(where.Exprs) == 0 {
		return false, "no WHERE"
	}
	text, built := buildWhere(stmt, where)
	if !built {
		return false, "its WHERE could not be built"
	}
	d, _ := sqlguard.DialectOf(stmt.DB.Dialector.Name())
	if ok, why = d.Check(text, ver.DBName, stmt.Table); !ok {
		return false, why
	}
	return true, ""
}

// buildWhere builds where's SQL as GORM would for stmt, on a statement of
// its own, and without sending anything; ok is false when it panicked.
func buildWhere(stmt *gorm.Statement, where clause.Where) (text string, ok bool) {
	defer func() {
		if recover() != nil {
			text, ok = "", false
		}
	}()
	q := &gorm.Statement{
		DB: stmt.DB, Context: stmt.Context, Table: stmt.Table, TableExpr: stmt.TableExpr,
		Schema: stmt.Schema, Clauses: map[string]clause.Clause{},
	}
	where.Build(q)
	return q.SQL.String(), true
}

// isVersionColumn reports whether name ("version", "Version",
// "tokens.version") names the version field's column.
func isVersionColumn(name string, ver *schema.Field) bool {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		name = name[i+1:]
	}
	name = strings.Trim(name, "`\"")
	return strings.EqualFold(name, ver.DBName) || name == ver.Name
}

// intOf returns the value of the integer field f of the struct rv.
func intOf(f *schema.Field, rv reflect.Value) (int64, bool) {
	if f.Serializer != nil {
		return 0, false
	}
	v, ok := fieldOf(f, rv)
	if !ok || !isIntKind(v.Kind()) {
		return 0, false
	}
	return v.Int(), true
}

// fieldOf returns the field f of the struct rv, without allocating a nil
// embedded pointer on the way as GORM's ReflectValueOf does (ok is false
// then).
func fieldOf(f *schema.Field, rv reflect.Value) (v reflect.Value, ok bool) {
	for _, i := range f.StructField.Index {
		if i >= 0 {
			rv = rv.Field(i)
			continue
		}
		rv = rv.Field(-i - 1) // GORM's mark of an embedded pointer
		if rv.IsNil() {
			return reflect.Value{}, false
		}
		rv = rv.Elem()
	}
	return rv, true
}

func isIntKind(k reflect.Kind) bool { return k == reflect.Int || k == reflect.Int64 }

// keyValue is a record's key for an error: the value of a one-column key,
// a Key for a composite one.
func keyValue(keys []any) any {
	if len(keys) == 1 {
		return keys[0]
	}
	return Key(keys)
}

// pluginLibraries are the packages whose frames pluginCaller passes over.
var pluginLibraries = []string{
	"gorm.io/",
	"github.com/gormlock/gormlock/repository.",
	"github.com/gormlock/gormlock/internal/store.",
	"runtime.",
	"database/sql.",
}

// pluginCaller returns "file:line" of the first frame of the calling
// goroutine outside GORM and gormlock (a test file counts as the caller).
func pluginCaller() string {
	pcs := make([]uintptr, 48)
	n := runtime.Callers(3, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if f.File != "" && (strings.HasSuffix(f.File, "_test.go") || !hasAnyPrefix(f.Function, pluginLibraries)) {
			return f.File + ":" + strconv.Itoa(f.Line)
		}
		if !more {
			return "an unknown caller"
		}
	}
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
