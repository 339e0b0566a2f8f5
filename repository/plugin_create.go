package repository

import (
	"reflect"

	"gorm.io/gorm"
	"gorm.io/gorm/callbacks"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"
)

// upsertKey is the Statement.Settings key of the ON CONFLICT clause a
// create had before the plugin rewrote it.
type upsertKey struct{}

// create runs right before GORM's create: records at version 0 get a first
// version, and an upsert (ON CONFLICT ... DO UPDATE) advances the version
// of the rows it updates.
func (w *pluginWrites) create(db *gorm.DB) {
	stmt := db.Statement
	if db.Error != nil {
		return
	}
	ver := w.versionOf(stmt.Schema)
	if ver == nil {
		return
	}
	c, ok := stmt.Clauses["ON CONFLICT"]
	oc, _ := c.Expression.(clause.OnConflict)
	upsert := ok && !oc.DoNothing && (oc.UpdateAll || len(oc.DoUpdates) > 0) && stmt.SQL.Len() == 0
	w.versionRows(db, ver, upsert)
	if !upsert || db.Error != nil {
		return
	}
	orig := c
	if oc.UpdateAll {
		// GORM's create callback turns UpdateAll into DoUpdates, one per
		// column written, version included: let it, here, and rewrite
		// the result. Converting the values again there is harmless.
		callbacks.ConvertToCreateValues(stmt)
		if db.Error != nil {
			return
		}
		c = stmt.Clauses["ON CONFLICT"]
		if oc, ok = c.Expression.(clause.OnConflict); !ok {
			return
		}
		oc.UpdateAll = false
	}
	set := make(clause.Set, 0, len(oc.DoUpdates)+1)
	for _, a := range oc.DoUpdates {
		if !isVersionColumn(a.Column.Name, ver) {
			set = append(set, a)
		}
	}
	// The row already there gets the larger of its version + 1 and the
	// version the new row carries, set above.
	value := &versionExpr{greatest: w.greatest, column: clause.Column{Table: clause.CurrentTable, Name: ver.DBName},
		floor: clause.Column{Table: "excluded", Name: ver.DBName}}
	if w.mysql {
		value.floor = clause.Expr{SQL: "VALUES(?)", Vars: []any{clause.Column{Name: ver.DBName}}}
	}
	oc.DoUpdates = append(set, clause.Assignment{Column: clause.Column{Name: ver.DBName}, Value: value})
	c.Expression = oc
	stmt.Clauses["ON CONFLICT"] = c
	stmt.Settings.Store(upsertKey{}, orig)
}

// afterCreate puts back the ON CONFLICT clause create rewrote, so that a
// *gorm.DB used again builds its next statement afresh.
func (w *pluginWrites) afterCreate(db *gorm.DB) {
	stmt := db.Statement
	if v, ok := stmt.Settings.LoadAndDelete(upsertKey{}); ok {
		if c, ok := v.(clause.Clause); ok {
			stmt.Clauses["ON CONFLICT"] = c
		}
	}
}

// versionRows gives the records a create writes their version: a first
// version to a record at 0, and with advance (an upsert, which may
// overwrite a row) a version above the one each record holds.
func (w *pluginWrites) versionRows(db *gorm.DB, ver *schema.Field, advance bool) {
	stmt := db.Statement
	switch dest := stmt.Dest.(type) {
	case map[string]any:
		versionMap(dest, ver, advance)
	case *map[string]any:
		if dest != nil {
			versionMap(*dest, ver, advance)
		}
	case []map[string]any:
		for _, m := range dest {
			versionMap(m, ver, advance)
		}
	case *[]map[string]any:
		if dest != nil {
			for _, m := range *dest {
				versionMap(m, ver, advance)
			}
		}
	default:
		rv := stmt.ReflectValue
		switch rv.Kind() {
		case reflect.Struct:
			versionRecord(db, ver, rv, advance)
		case reflect.Slice, reflect.Array:
			for i := 0; i < rv.Len(); i++ {
				versionRecord(db, ver, reflect.Indirect(rv.Index(i)), advance)
			}
		}
	}
}

// versionRecord sets the version of one record a create writes (see
// versionRows).
func versionRecord(db *gorm.DB, ver *schema.Field, rv reflect.Value, advance bool) {
	if rv.Kind() != reflect.Struct || !rv.CanAddr() || rv.Type() != db.Statement.Schema.ModelType {
		return
	}
	v, ok := intOf(ver, rv)
	if !ok || (v != 0 && !advance) {
		return
	}
	next, ok := nextVersion(max(v, 0))
	if !ok {
		return // the database's GREATEST keeps the row's own version
	}
	db.AddError(ver.Set(db.Statement.Context, rv, next))
}

// versionMap sets the version of a record a create writes from a map (see
// versionRows), under the key the map has for it, or the column's name.
func versionMap(m map[string]any, ver *schema.Field, advance bool) {
	if m == nil {
		return
	}
	key := ver.DBName
	if _, ok := m[key]; !ok {
		if _, ok := m[ver.Name]; ok {
			key = ver.Name
		}
	}
	var v int64
	if x := reflect.ValueOf(m[key]); x.Kind() >= reflect.Int && x.Kind() <= reflect.Int64 {
		v = x.Int()
	} else if m[key] != nil {
		return // an expression, or another type: the caller's
	}
	if v != 0 && !advance {
		return
	}
	if next, ok := nextVersion(max(v, 0)); ok {
		m[key] = next
	}
}
