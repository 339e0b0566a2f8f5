package repository

import (
	"math"
	"reflect"

	"gorm.io/gorm"
	"gorm.io/gorm/callbacks"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"
)

// upsertKey is the Statement.Settings key of the ON CONFLICT clause a
// create had before the plugin rewrote it.
type upsertKey struct{}

// columnsKey is the Statement.Settings key of the Select and Omit lists a
// create had before the plugin made them write the version.
type columnsKey struct{}

// createColumns is what columnsKey holds.
type createColumns struct{ selects, omits []string }

// create runs right before GORM's create: every record gets a first
// version never used before, written even where Select or Omit would leave
// the column to its default, and an upsert (ON CONFLICT ... DO UPDATE)
// advances the version of the rows it updates.
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
	w.versionRows(db, ver)
	if db.Error != nil {
		return
	}
	if stmt.SQL.Len() == 0 {
		writeVersionColumn(stmt, ver)
	}
	if !upsert {
		return
	}
	orig := c
	updateAll := oc.UpdateAll
	if updateAll {
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
		if isVersionColumn(a.Column.Name, ver) {
			continue
		}
		if updateAll {
			// Every column, as Save of a slice asks: a field outside
			// the version is left as the row has it, as Save of a
			// struct leaves it (see Plugin); DoUpdates naming it
			// writes it.
			if f := stmt.Schema.LookUpField(a.Column.Name); f != nil && isUnversioned(f) {
				continue
			}
		}
		set = append(set, a)
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

// writeVersionColumn makes the create write the version column: a Select
// that leaves it out gets it, an Omit that names it loses it. Without that
// the row would get the column's default (1, the same for every
// incarnation of a key), whatever version the plugin gave the record.
func writeVersionColumn(stmt *gorm.Statement, ver *schema.Field) {
	if !ver.Creatable {
		return // GORM never writes it; a version trigger can (package migrations)
	}
	names := func(column string) bool {
		if f := stmt.Schema.LookUpField(column); f != nil {
			return f == ver
		}
		return isVersionColumn(column, ver)
	}
	omits := make([]string, 0, len(stmt.Omits))
	for _, o := range stmt.Omits {
		if !names(o) {
			omits = append(omits, o)
		}
	}
	selects := stmt.Selects
	if len(omits) != len(stmt.Omits) || len(selects) > 0 {
		orig := createColumns{selects: stmt.Selects, omits: stmt.Omits}
		stmt.Omits = omits
		if cols, restricted := stmt.SelectAndOmitColumns(true, false); restricted && !cols[ver.DBName] {
			stmt.Selects = append(append(make([]string, 0, len(selects)+1), selects...), ver.DBName)
		}
		stmt.Settings.Store(columnsKey{}, orig)
	}
}

// afterCreate puts back the ON CONFLICT clause, and the Select and Omit
// lists, create rewrote, so that a *gorm.DB used again builds its next
// statement afresh.
func (w *pluginWrites) afterCreate(db *gorm.DB) {
	stmt := db.Statement
	if v, ok := stmt.Settings.LoadAndDelete(columnsKey{}); ok {
		if cols, ok := v.(createColumns); ok {
			stmt.Selects, stmt.Omits = cols.selects, cols.omits
		}
	}
	if v, ok := stmt.Settings.LoadAndDelete(upsertKey{}); ok {
		if c, ok := v.(clause.Clause); ok {
			stmt.Clauses["ON CONFLICT"] = c
		}
	}
}

// versionRows gives every record a create writes a first version never
// used before: a clock reading above the version the record holds. A
// version the record holds may be one an earlier record with its key had
// (a copy read before a delete, a condition FirstOrCreate copied): kept,
// it would let a copy of that record pass the new one's guard. In an
// upsert, which may overwrite a row, it is also the floor of the version
// the row already there gets.
func (w *pluginWrites) versionRows(db *gorm.DB, ver *schema.Field) {
	stmt := db.Statement
	switch dest := stmt.Dest.(type) {
	case map[string]any:
		versionMap(dest, ver)
	case *map[string]any:
		if dest != nil {
			versionMap(*dest, ver)
		}
	case []map[string]any:
		for _, m := range dest {
			versionMap(m, ver)
		}
	case *[]map[string]any:
		if dest != nil {
			for _, m := range *dest {
				versionMap(m, ver)
			}
		}
	default:
		rv := stmt.ReflectValue
		switch rv.Kind() {
		case reflect.Struct:
			versionRecord(db, ver, rv)
		case reflect.Slice, reflect.Array:
			for i := 0; i < rv.Len(); i++ {
				versionRecord(db, ver, reflect.Indirect(rv.Index(i)))
			}
		}
	}
}

// versionRecord sets the version of one record a create writes (see
// versionRows).
func versionRecord(db *gorm.DB, ver *schema.Field, rv reflect.Value) {
	if rv.Kind() != reflect.Struct || !rv.CanAddr() || rv.Type() != db.Statement.Schema.ModelType {
		return
	}
	v, ok := intOf(ver, rv)
	if !ok {
		return
	}
	next, ok := nextVersion(max(v, 0))
	if !ok {
		return // the database's GREATEST keeps the row's own version
	}
	if err := ver.Set(db.Statement.Context, rv, next); err != nil {
		db.AddError(err)
		return
	}
	logOf(db.Statement).note(ver, rv, v)
}

// versionMap sets the version of a record a create writes from a map (see
// versionRows), under the key the map has for it, or the column's name. An
// integer there is a version the record holds; anything else (an
// expression, a string, nil) is none, and is replaced as well: a row must
// not get a version the plugin did not choose.
func versionMap(m map[string]any, ver *schema.Field) {
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
	switch x := reflect.ValueOf(m[key]); {
	case x.Kind() >= reflect.Int && x.Kind() <= reflect.Int64:
		v = x.Int()
	case x.Kind() >= reflect.Uint && x.Kind() <= reflect.Uintptr:
		v = int64(min(x.Uint(), math.MaxInt64))
	}
	if next, ok := nextVersion(max(v, 0)); ok {
		m[key] = next
	}
}
