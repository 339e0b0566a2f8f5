package repository

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"

	"github.com/gormlock/gormlock/internal/store"
	"github.com/gormlock/gormlock/locking"
)

// Fields outside the version (UnversionedTag).
//
// A guarded write never writes them from the entity: Update's statement
// leaves them out (setCols), and after the write refreshUnversioned reads
// them back, so the entity holds the row's values. Mutate, whose fn may
// change one, writes that change guarded by the value fn read (valueGuard):
// the version cannot tell whether an Apply changed the field since the
// read, the value can.

// valueGuard is the unversioned fields a Mutate's fn changed, and the values
// its read gave them: the write sets them, guarded by those values. only
// says fn changed no other field: the write then leaves the version alone.
type valueGuard struct {
	fields []*schema.Field
	read   []any
	only   bool
}

// readValues returns the values of e's unversioned fields, then of the
// fields Update writes, as a Mutate's read gave them (before fn ran); nil
// when the model has no unversioned field. A value that shares memory with
// the entity (a pointer, slice or map) is copied, and one of a type that
// writes itself (driver.Valuer) is kept as it would be written, so that a
// change fn makes in place still shows (see snapKindOf).
func (r *Repository[T]) readValues(ctx context.Context, rv reflect.Value) []any {
	if len(r.m.unversioned) == 0 {
		return nil
	}
	vals := make([]any, 0, len(r.m.unversioned)+len(r.m.setCols))
	for i, f := range r.m.unversioned {
		v, _ := f.ValueOf(ctx, rv)
		vals = append(vals, snapshot(r.m.unversionedSnap[i], v))
	}
	if !r.m.onlyTellable {
		return vals // changedUnversioned never compares them
	}
	for i, f := range r.m.setCols {
		v, _ := f.ValueOf(ctx, rv)
		vals = append(vals, snapshot(r.m.setColSnap[i], v))
	}
	return vals
}

// changedUnversioned returns the guard of the unversioned fields whose
// values in rv differ from read (readValues before fn ran); nil when none
// changed. only is true when no other field Update writes changed, which
// it can tell only when every such field's value can be kept as read
// (model.onlyTellable); otherwise the write is a whole guarded one.
func (r *Repository[T]) changedUnversioned(ctx context.Context, rv reflect.Value, read []any) *valueGuard {
	var g *valueGuard
	for i, f := range r.m.unversioned {
		v, _ := f.ValueOf(ctx, rv)
		if sameValue(snapshot(r.m.unversionedSnap[i], v), read[i]) {
			continue
		}
		if g == nil {
			g = &valueGuard{only: r.m.onlyTellable}
		}
		g.fields = append(g.fields, f)
		g.read = append(g.read, read[i])
	}
	if g == nil || !g.only {
		return g
	}
	for i, f := range r.m.setCols {
		v, _ := f.ValueOf(ctx, rv)
		if !sameValue(snapshot(r.m.setColSnap[i], v), read[len(r.m.unversioned)+i]) {
			g.only = false
			break
		}
	}
	return g
}

// snapKind is how a value of a field is kept as fn's read gave it.
type snapKind uint8

const (
	// snapValue: the value holds no reference to memory the entity
	// shares (numbers, strings, time.Time, structs and arrays of those):
	// kept as it is.
	snapValue snapKind = iota
	// snapCopy: a pointer, slice or map of such values: copied.
	snapCopy
	// snapValuer: a driver.Valuer: kept as the value it writes.
	snapValuer
	// snapOpaque: holds references gormlock cannot copy (an interface,
	// a struct with pointers): a change in place cannot be told.
	snapOpaque
)

var (
	timeType   = reflect.TypeOf(time.Time{})
	valuerType = reflect.TypeOf((*driver.Valuer)(nil)).Elem()
)

// snapKindOf returns how a value of type t is kept (see snapKind).
func snapKindOf(t reflect.Type) snapKind {
	if t.Implements(valuerType) {
		return snapValuer
	}
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128, reflect.String:
		return snapValue
	case reflect.Struct:
		if t == timeType {
			return snapValue
		}
		for i := range t.NumField() {
			if snapKindOf(t.Field(i).Type) != snapValue {
				return snapOpaque
			}
		}
		return snapValue
	case reflect.Array:
		if snapKindOf(t.Elem()) == snapValue {
			return snapValue
		}
	case reflect.Pointer, reflect.Slice:
		if snapKindOf(t.Elem()) == snapValue {
			return snapCopy
		}
	case reflect.Map:
		if snapKindOf(t.Key()) == snapValue && snapKindOf(t.Elem()) == snapValue {
			return snapCopy
		}
	}
	return snapOpaque
}

// snapshot returns v kept as kind says: a copy of a pointer, slice or map
// (one level: their elements hold no references), the value a
// driver.Valuer writes, or v itself.
func snapshot(kind snapKind, v any) any {
	switch kind {
	case snapCopy:
		rv := reflect.ValueOf(v)
		if !rv.IsValid() || rv.IsNil() {
			return v
		}
		switch rv.Kind() {
		case reflect.Pointer:
			c := reflect.New(rv.Type().Elem())
			c.Elem().Set(rv.Elem())
			return c.Interface()
		case reflect.Slice:
			c := reflect.MakeSlice(rv.Type(), rv.Len(), rv.Len())
			reflect.Copy(c, rv)
			return c.Interface()
		case reflect.Map:
			c := reflect.MakeMapWithSize(rv.Type(), rv.Len())
			for it := rv.MapRange(); it.Next(); {
				c.SetMapIndex(it.Key(), it.Value())
			}
			return c.Interface()
		}
	case snapValuer:
		vr, ok := v.(driver.Valuer)
		if !ok {
			return v
		}
		if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && rv.IsNil() {
			return nil
		}
		dv, err := vr.Value()
		if err != nil {
			return v
		}
		if b, ok := dv.([]byte); ok {
			dv = slices.Clone(b)
		}
		return dv
	}
	return v
}

// writeUnversioned is the write of a Mutate whose fn changed unversioned
// fields only (g): UPDATE ... SET <those fields> WHERE <key> AND <version>
// AND <each field equal to the value read>, which leaves the version and
// the update time alone, as Apply does. A miss is stale data: the version
// moved (a *StaleError with the record), or a field did (valueMoved). The
// entity then holds the row's unversioned values.
func (r *Repository[T]) writeUnversioned(ctx context.Context, e *T, g *valueGuard) error {
	rv := reflect.ValueOf(e).Elem()
	id, expected, err := r.guardOf(ctx, rv, "Mutate")
	if err != nil {
		return err
	}
	if err := r.checkIsolation(ctx, "Mutate"); err != nil {
		return err
	}
	args := make([]any, 0, 2*len(g.fields)+len(r.m.pks)+2)
	for _, f := range g.fields {
		v, _ := f.ValueOf(ctx, rv)
		args = append(args, v)
	}
	args = r.guardArgs(args, id, expected)
	st, ok := r.unversionedWrite(g)
	if ok {
		for _, v := range g.read {
			if null, _ := plainArg(v); !null { // a NULL one is IS NULL in the text
				args = append(args, v)
			}
		}
	} else {
		st, args = r.withConditions(r.unversionedBase(g), "", args, g.conds())
	}
	var n int64
	var returned []any
	// Only the statement built once per shape returns the fields; the one
	// withConditions builds returns nothing, and the fields are read back
	// after it.
	if ok && r.m.returnsUnversioned() {
		returned = make([]any, len(r.m.unversioned))
		dest := make([]any, len(returned))
		for i := range returned {
			dest[i] = &returned[i]
		}
		err = r.st.Exec(ctx, st, args, r.st.QueryRowScan(dest...))
		if n = 1; store.IsNoRows(err) {
			n, err, returned = 0, nil, nil
		}
	} else {
		n, err = r.st.ExecResult(ctx, st, args)
	}
	if err != nil {
		return fmt.Errorf("%s: Mutate id=%v: %w", r.m.table, id, err)
	}
	if err := r.checkAffected(ctx, n, id, expected, "update", liveRows, true, rv); err != nil {
		if errors.Is(err, locking.ErrConditionFailed) {
			return r.valueMoved(id, expected, g)
		}
		return err
	}
	return r.refreshAfterWrite(ctx, rv, id, returned)
}

// unversionedWrite returns writeUnversioned's statement for g, built once
// per set of fields and of read values that are NULL (the text says IS
// NULL for those), at most 3^n per model of n unversioned fields (each
// absent, read NULL or read not NULL):
//
//	UPDATE t SET f1 = ?, ... WHERE <guard> AND (f1 = ? AND f2 IS NULL ...)
//	[RETURNING <every unversioned field>]
//
// — the text withConditions builds from g.conds() — with the arguments:
// the fields' new values, the guard's, and the read values that are not
// NULL. Where the dialect returns what an Update wrote
// (meta.returnsUnversioned) the statement returns the model's unversioned
// fields, as Update's does. ok is false when a read value is one GORM's
// condition would write otherwise than as one placeholder (a slice, an
// array, a struct; see plainArg): the caller then builds the statement
// with withConditions, as for a write of its own.
func (r *Repository[T]) unversionedWrite(g *valueGuard) (st store.Stmt, ok bool) {
	var kb strings.Builder
	for i, f := range g.fields {
		null, plain := plainArg(g.read[i])
		if !plain {
			return store.Stmt{}, false
		}
		if i > 0 {
			kb.WriteByte(',')
		}
		kb.WriteString(f.DBName)
		if null {
			kb.WriteString(" null")
		}
	}
	k := kb.String()
	if c, ok := r.cols.unversioned.Load(k); ok {
		return c.(store.Stmt), true
	}
	w := &sqlWriter{db: r.st.Gorm}
	r.writeUnversionedSet(w, g).guard(r.m, liveRows).str(" AND (")
	for i, f := range g.fields {
		if i > 0 {
			w.str(" AND ")
		}
		if null, _ := plainArg(g.read[i]); null {
			w.quote(f.DBName).str(" IS NULL")
		} else {
			w.eq(f.DBName)
		}
	}
	w.str(")")
	suffix := ""
	if r.m.returnsUnversioned() {
		var b strings.Builder
		b.WriteString(" RETURNING ")
		for i, f := range r.m.unversioned {
			if i > 0 {
				b.WriteString(", ")
			}
			r.st.Gorm.Dialector.QuoteTo(&b, f.DBName)
		}
		suffix = b.String()
	}
	st = w.stmt(r.m.caps, suffix)
	actual, _ := r.cols.unversioned.LoadOrStore(k, st)
	return actual.(store.Stmt), true
}

// unversionedBase is writeUnversioned's statement for g without the
// conditions on the values read, for withConditions (whose suffix is then
// "": such a statement returns nothing, and writeUnversioned reads the
// fields back with a SELECT).
func (r *Repository[T]) unversionedBase(g *valueGuard) store.Stmt {
	w := &sqlWriter{db: r.st.Gorm}
	return r.writeUnversionedSet(w, g).guard(r.m, liveRows).stmt(r.m.caps, "")
}

// writeUnversionedSet writes UPDATE t SET f1 = ?, ... for g's fields.
func (r *Repository[T]) writeUnversionedSet(w *sqlWriter, g *valueGuard) *sqlWriter {
	w.reset("UPDATE ").quote(r.m.table).str(" SET ")
	for i, f := range g.fields {
		if i > 0 {
			w.str(", ")
		}
		w.eq(f.DBName)
	}
	return w
}

// plainArg reports how GORM's clause.Eq writes v, a value a Mutate's read
// gave an unversioned field (see snapshot): null when as IS NULL (nil, or
// a nil pointer), plain when as "= ?" with v the one argument (a bool,
// number, string, time, []byte, or a pointer to one of those). Anything
// else (a slice GORM writes as IN (...) or a list, an array, a struct) is
// neither.
func plainArg(v any) (null, plain bool) {
	if v == nil {
		return true, true
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return true, true
		}
		rv = rv.Elem()
	}
	if _, ok := v.(driver.Valuer); ok {
		return false, false // snapshot made it its value; one that failed is left to GORM
	}
	switch rv.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64, reflect.String:
		return false, true
	}
	if rv.Type() == timeType || rv.Type() == bytesType {
		return false, true
	}
	return false, false
}

// conds returns the guard's conditions: each field equal to the value
// read (IS NULL for a nil one).
func (g *valueGuard) conds() []clause.Expression {
	out := make([]clause.Expression, len(g.fields))
	for i, f := range g.fields {
		out[i] = clause.Eq{Column: clause.Column{Name: f.DBName}, Value: g.read[i]}
	}
	return out
}

// names returns the guarded fields' names.
func (g *valueGuard) names() []string {
	out := make([]string, len(g.fields))
	for i, f := range g.fields {
		out[i] = f.Name
	}
	return out
}

// guardedColumns returns the column set of a Mutate write with g: every
// field Update writes, and the unversioned fields g guards, built once per
// set.
func (r *Repository[T]) guardedColumns(g *valueGuard) *columnSet {
	fields := append(slices.Clip(r.m.setCols), g.fields...)
	key := make([]string, len(g.fields))
	for i, f := range g.fields {
		key[i] = f.DBName
	}
	k := "+" + strings.Join(key, ",") // not a Columns key: those hold no "+"
	if c, ok := r.cols.sets.Load(k); ok {
		return c.(*columnSet)
	}
	c := &columnSet{fields: fields, stmt: r.m.updateOf(r.st.Gorm, fields)}
	actual, _ := r.cols.sets.LoadOrStore(k, c)
	return actual.(*columnSet)
}

// valueMoved is the error of a Mutate write whose version matched but one
// of the unversioned fields fn changed did not hold the value fn read: an
// Apply changed it since. It is stale data, and retried like it.
func (r *Repository[T]) valueMoved(id any, expected int64, g *valueGuard) error {
	return &StaleError[T]{Stale: &locking.StaleDataError{Table: r.m.table, ID: id, Expected: expected, Actual: expected, Op: "update"}, Fields: g.names()}
}

// refreshAfterWrite is refreshUnversioned after a write that succeeded: a
// failure to read the fields fails the call only in a transaction; outside
// one the write has committed, it stands, and the fields keep the values
// they had. returned is what the write's statement returned of the
// fields (write.unversioned), nil when it returned none.
func (r *Repository[T]) refreshAfterWrite(ctx context.Context, rv reflect.Value, id any, returned []any) error {
	err := r.refreshUnversioned(ctx, rv, id, returned)
	if err == nil {
		return nil
	}
	if _, inTx := r.st.Pool(ctx); inTx {
		return err
	}
	return nil
}

// refreshUnversioned reads the unversioned fields of record id into rv,
// after a guarded write (in its transaction, if any), so that the entity
// holds the row's values, not the ones it was read with. When the write
// returned them (returned, see write.unversioned) they are set from there,
// with no statement; should one not fit its field, they are read as
// without.
func (r *Repository[T]) refreshUnversioned(ctx context.Context, rv reflect.Value, id any, returned []any) error {
	if len(r.m.unversioned) == 0 {
		return nil
	}
	if returned != nil && r.setReturned(ctx, rv, returned) {
		return nil
	}
	db, _ := r.st.Conn(ctx)
	dest := make([]any, len(r.m.unversioned))
	for i, f := range r.m.unversioned {
		dest[i] = reflect.New(f.FieldType).Interface()
	}
	if err := r.st.ScanSQL(ctx, db.Statement.ConnPool, r.m.unversionedSQL, r.m.keyArgs(nil, id), dest...); err != nil {
		return fmt.Errorf("%s: id=%v: written; reading its unversioned fields: %w", r.m.table, id, locking.Classify(err))
	}
	for i, f := range r.m.unversioned {
		if err := f.Set(ctx, rv, reflect.ValueOf(dest[i]).Elem().Interface()); err != nil {
			return fmt.Errorf("%s: id=%v: written; setting %s in memory: %w", r.m.table, id, f.Name, err)
		}
	}
	return nil
}

// setReturned sets rv's unversioned fields to the values a write
// returned, as the driver gave them, and reports whether it did. Each value
// is converted as database/sql's Scan converts it into a value of the
// field's type (see convertReturned) and set as refreshUnversioned sets
// the values it reads; when one is of a kind convertReturned leaves to
// database/sql, no field is set and the caller reads them with a SELECT.
func (r *Repository[T]) setReturned(ctx context.Context, rv reflect.Value, returned []any) bool {
	if len(returned) != len(r.m.unversioned) {
		return false
	}
	var buf [4]reflect.Value
	vals := buf[:0]
	for i, f := range r.m.unversioned {
		v := reflect.New(f.FieldType).Elem()
		if !convertReturned(v, returned[i]) {
			return false
		}
		vals = append(vals, v)
	}
	for i, f := range r.m.unversioned {
		if err := f.Set(ctx, rv, vals[i].Interface()); err != nil {
			return false
		}
	}
	return true
}

// convertReturned stores src, a value a driver returned (int64, float64,
// bool, []byte, string, time.Time or nil), in dst, a settable value of a
// field's type, as database/sql's Scan into a pointer to that type would,
// and reports whether it did. It converts the common cases only: the same
// type, a number into an integer or float kind it fits, text into a string
// kind, a NULL into a pointer, and any value into a sql.Scanner. For the
// rest, and for a value database/sql would refuse, it returns false and
// leaves the conversion, and its error, to database/sql.
func convertReturned(dst reflect.Value, src any) bool {
	t := dst.Type()
	if reflect.PointerTo(t).Implements(scannerType) {
		return dst.Addr().Interface().(sql.Scanner).Scan(src) == nil
	}
	if src == nil {
		if t.Kind() == reflect.Pointer {
			dst.SetZero()
			return true
		}
		return false
	}
	sv := reflect.ValueOf(src)
	switch t.Kind() {
	case reflect.Pointer:
		e := reflect.New(t.Elem())
		if !convertReturned(e.Elem(), src) {
			return false
		}
		dst.Set(e)
		return true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if n, ok := src.(int64); ok && !dst.OverflowInt(n) {
			dst.SetInt(n)
			return true
		}
		return false
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if n, ok := src.(int64); ok && n >= 0 && !dst.OverflowUint(uint64(n)) {
			dst.SetUint(uint64(n))
			return true
		}
		return false
	case reflect.Float64:
		if x, ok := src.(float64); ok {
			dst.SetFloat(x)
			return true
		}
		return false
	case reflect.String:
		switch x := src.(type) {
		case string:
			dst.SetString(x)
			return true
		case []byte:
			dst.SetString(string(x))
			return true
		}
		return false
	}
	if sv.Type() == t && (t == timeType || t.Kind() == reflect.Bool || t == bytesType) {
		if b, ok := src.([]byte); ok {
			src = slices.Clone(b)
		}
		dst.Set(reflect.ValueOf(src))
		return true
	}
	return false
}

var bytesType = reflect.TypeOf([]byte(nil))

// sameValue reports whether two values of one field are equal: times by
// instant, the rest deeply.
func sameValue(a, b any) bool {
	switch x := a.(type) {
	case time.Time:
		y, ok := b.(time.Time)
		return ok && x.Equal(y)
	case *time.Time:
		y, ok := b.(*time.Time)
		return ok && (x == nil) == (y == nil) && (x == nil || x.Equal(*y))
	}
	return reflect.DeepEqual(a, b)
}
