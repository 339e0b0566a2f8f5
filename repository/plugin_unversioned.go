package repository

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"

	"github.com/gormlock/gormlock/locking"
)

// Fields outside the version (UnversionedTag) in plain GORM updates.
//
// The version does not move when an Apply changes such a field, so the
// guard of GuardGORMUpdates passes for a struct read before it: were the
// struct's copy of the field written, it would put back the value it read
// and erase the changes in between. So an update that writes from a struct
// (Save, Updates and UpdateColumns of a struct, Select("*") included)
// leaves the field out of its SET (omittedUnversioned), and the struct
// keeps the value it held. A field named in the update — a map's key,
// Update's column, a Select of a struct — is written as named: an
// expression the database computes (gorm.Expr("stock - ?", 1)) is safe, a
// value from the application is a blind write, which StrictGORMWrites
// refuses and GuardGORMUpdates reports (blindUnversioned).

// blindUnversioned returns the names of the fields tagged
// gormlock:"unversioned" that the update statement writes by name with a
// value from the application rather than an expression the database
// computes: a key of the map given to Update, Updates, UpdateColumn or
// UpdateColumns, an assignment of the caller's own SET clause, or a field
// a Select names (not "*") beside a struct.
func blindUnversioned(stmt *gorm.Statement) []string {
	s := stmt.Schema
	var names []string
	add := func(f *schema.Field) {
		for _, n := range names {
			if n == f.Name {
				return
			}
		}
		names = append(names, f.Name)
	}
	if c, ok := stmt.Clauses["SET"]; ok {
		if set, ok := c.Expression.(clause.Set); ok {
			for _, a := range set {
				if f := s.LookUpField(unqualified(a.Column.Name)); f != nil && isUnversioned(f) && !computed(a.Value) {
					add(f)
				}
			}
		}
		return names
	}
	dest := reflect.ValueOf(stmt.Dest)
	for dest.Kind() == reflect.Pointer && !dest.IsNil() {
		dest = dest.Elem()
	}
	if !dest.IsValid() {
		return nil
	}
	selected, _ := stmt.SelectAndOmitColumns(false, true)
	written := func(f *schema.Field) bool {
		v, ok := selected[f.DBName]
		return !ok || v
	}
	switch dest.Kind() {
	case reflect.Map:
		m, ok := dest.Interface().(map[string]any)
		if !ok {
			return nil
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if f := s.LookUpField(k); f != nil && isUnversioned(f) && written(f) && !computed(m[k]) {
				add(f)
			}
		}
	case reflect.Struct:
		for _, f := range s.Fields {
			if isUnversioned(f) && selectsByName(stmt, f) && written(f) {
				add(f)
			}
		}
	}
	return names
}

// computed reports whether v, a value an update assigns, is an expression
// the database computes (gorm.Expr, a clause expression, a subquery)
// rather than a value from the application.
func computed(v any) bool {
	switch v.(type) {
	case clause.Expression, *gorm.DB:
		return true
	}
	return false
}

// selectsByName reports whether the statement's Select names the field f
// itself (by its column or field name, qualified or not), "*" aside.
func selectsByName(stmt *gorm.Statement, f *schema.Field) bool {
	for _, name := range stmt.Selects {
		name = unqualified(name)
		if name != "*" && (name == f.DBName || name == f.Name) {
			return true
		}
	}
	return false
}

// unqualified is a column name without its table and quotes.
func unqualified(name string) string {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		name = name[i+1:]
	}
	return strings.Trim(name, "`\"")
}

// fromStruct reports whether the update writes the values of a struct
// (Save, Updates or UpdateColumns of a struct), rather than a map or the
// caller's own SET clause.
func fromStruct(stmt *gorm.Statement) bool {
	dest := reflect.ValueOf(stmt.Dest)
	for dest.Kind() == reflect.Pointer && !dest.IsNil() {
		dest = dest.Elem()
	}
	return dest.Kind() == reflect.Struct
}

// omittedUnversioned reports whether the assignment a of an update from a
// struct is to a field tagged gormlock:"unversioned" that the statement
// does not name (see blindUnversioned): it is left out of the SET.
func omittedUnversioned(stmt *gorm.Statement, a clause.Assignment) bool {
	f := stmt.Schema.LookUpField(a.Column.Name)
	return f != nil && isUnversioned(f) && !selectsByName(stmt, f)
}

// blindWrite reports an update that writes fields tagged
// gormlock:"unversioned" by name with values from the application:
// refused under StrictGORMWrites(true) with an error matching
// locking.ErrUnguardedWrite (it returns false), else logged as a warning
// (it returns true: the write goes on).
func (w *pluginWrites) blindWrite(db *gorm.DB, names []string) bool {
	stmt := db.Statement
	caller := pluginCaller()
	fields := strings.Join(names, ", ")
	if w.cfg.strict != nil && *w.cfg.strict {
		db.AddError(fmt.Errorf("%w: update of %s at %s writes %s, tagged gormlock:%q, with a value from the application: the version does not guard it, so it could erase a concurrent change of it (an Apply): write it as an expression the database computes (gorm.Expr), or with Apply; nothing was written",
			locking.ErrUnguardedWrite, stmt.Table, caller, fields, UnversionedTag))
		return false
	}
	if db.Logger != nil {
		db.Logger.Warn(stmt.Context, "gormlock: blind write of %s of %s at %s: tagged gormlock:%q, written with a value from the application, which the version does not guard, so it could erase a concurrent change of it", fields, stmt.Table, caller, UnversionedTag)
	}
	return true
}

// fieldCopy is a struct field's value before an update, to put back.
type fieldCopy struct {
	field *schema.Field
	to    reflect.Value // the field in the struct
	was   reflect.Value // a copy of its value
}

// keepFields copies the values of the fields of the struct rv that
// match keep, so that restoreFields can put them back.
func keepFields(rv reflect.Value, fields []*schema.Field, keep func(*schema.Field) bool) []fieldCopy {
	var out []fieldCopy
	for _, f := range fields {
		if !keep(f) {
			continue
		}
		v, ok := fieldOf(f, rv)
		if !ok || !v.CanSet() {
			continue
		}
		was := reflect.New(v.Type()).Elem()
		was.Set(v)
		out = append(out, fieldCopy{field: f, to: v, was: was})
	}
	return out
}

// restoreFields puts back the values keepFields copied, of the fields that
// match which.
func restoreFields(copies []fieldCopy, which func(*schema.Field) bool) {
	for _, c := range copies {
		if which(c.field) {
			c.to.Set(c.was)
		}
	}
}
