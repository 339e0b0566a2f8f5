package repository

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"reflect"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/schema"

	"github.com/gormlock/gormlock/internal/dialect"
	"github.com/gormlock/gormlock/locking"
)

// VersionTag marks the version field when it is not named Version:
//
//	Rev int64 `gormlock:"version"`
const VersionTag = "version"

// UnversionedTag marks a field that changes outside the record's version,
// a hot counter beside fields a form edits (stock beside name and price, a
// view count, a last-seen time):
//
//	Stock int64 `gormlock:"unversioned"`
//
// Changing it does not advance the version, so it never makes another
// writer's copy stale, and a guarded write of the other fields never writes
// it from the entity, so a stale copy never puts back the value it read:
//
//   - Apply that changes only unversioned fields leaves the version (and the
//     update time) alone; one that changes any other field advances it.
//   - Update, UpdateMany, the update half of Upsert and Columns never write
//     it; after the write the entity holds the row's current value of it.
//     Columns naming it is refused (locking.ErrInvalidArgument).
//   - Mutate and MutateRowLocked write a change fn made to it guarded by the
//     value fn read (WHERE ... AND stock = <read>): a concurrent Apply in
//     between makes the attempt stale, and it is retried from a fresh read,
//     so nothing is lost.
//   - Create writes it.
//   - Through the GORM plugin (Plugin), a plain GORM update from a struct
//     (db.Save, Updates of a struct) never writes it, and one that names it
//     with a value rather than an expression is refused or reported.
//
// A Mutate tells what fn changed by comparing the values before and after
// it: a pointer, slice or map is copied first, and a driver.Valuer kept as
// the value it writes, so that a change fn makes in place shows too. A
// field whose changes in place cannot be told that way (it holds an
// interface, or a struct with pointers, and is no driver.Valuer) makes
// every Mutate of the model that changes an unversioned field a whole
// guarded write, which advances the version.
//
// New refuses the tag, with an error matching locking.ErrInvalidArgument
// naming the field, on a key field, the version, a creation, update or
// deletion time, a field Update may not write, or a field of a type whose
// changes in place cannot be told.
const UnversionedTag = "unversioned"

// meta is everything about T that the hot path needs, computed once by New:
// the model's facts, and the statements compiled from them.
type meta struct {
	model
	statements
}

// model is what GORM's schema says about T, as gormlock's calls use it.
type model struct {
	schema *schema.Schema
	table  string
	// pks are the primary key's columns, in the model's order; pk is the
	// first, the whole key unless it is composite (see Key).
	pks       []*schema.Field
	pk        *schema.Field
	version   *schema.Field
	createdAt *schema.Field // nil when the model has none
	updatedAt *schema.Field // nil when the model has none
	// deletedAt is the gorm.DeletedAt field of a model with soft delete,
	// nil otherwise: then Delete sets it, and reads and writes skip rows
	// where it is set.
	deletedAt *schema.Field
	setCols   []*schema.Field
	// unversioned are the updatable fields tagged gormlock:"unversioned"
	// (see UnversionedTag), not in setCols.
	unversioned []*schema.Field
	// unversionedSnap and setColSnap say how a Mutate keeps the values
	// of unversioned and setCols as its read gave them (see snapKindOf);
	// onlyTellable is that every setCols value can be kept, so that a
	// Mutate can tell that fn changed unversioned fields only.
	unversionedSnap []snapKind
	setColSnap      []snapKind
	onlyTellable    bool
	caps            dialect.Caps
	// hooks are the GORM hooks the model has that gormlock's own
	// statements must run (GORM runs the create and find hooks itself).
	hooks hooks
	// assocs are the model's associations (has one, has many, belongs
	// to, many to many), by field name.
	assocs []*schema.Relationship

	// readCols are the columns Get reads, in selectSQL's order: every
	// readable column of the model.
	readCols []*schema.Field
	// direct holds, per read column, the index path of a field Get scans
	// straight into (see directIndex), or nil for one it scans GORM's way.
	direct    [][]int
	anyDirect bool
}

// buildMeta parses T with GORM's schema parser and prepares the SQL of the
// guarded statements, quoted and with the dialect's placeholders.
func buildMeta[T any](db *gorm.DB, caps dialect.Caps) (*meta, error) {
	var zero T
	typ := reflect.TypeOf(zero)
	if typ == nil || typ.Kind() != reflect.Struct {
		return nil, locking.Invalid("repository: type %v is not a struct", typ)
	}
	parse := &gorm.Statement{DB: db}
	if err := parse.Parse(&zero); err != nil {
		return nil, fmt.Errorf("repository: parse %v: %w", typ, err)
	}
	s := parse.Schema
	m := &meta{model: model{schema: s, table: s.Table, caps: caps}}

	// The columns, one field each: when an outer field shadows an embedded
	// one of the same column, only the outer (GORM's winner) is used.
	cols := make([]*schema.Field, 0, len(s.DBNames))
	var pks []*schema.Field
	for _, name := range s.DBNames {
		f := s.FieldsByDBName[name]
		cols = append(cols, f)
		if f.PrimaryKey {
			pks = append(pks, f)
		}
	}
	if len(pks) == 0 {
		return nil, locking.Invalid("repository: %v has no primary key: gormlock addresses every record by its key; tag the key field(s) `gorm:\"primaryKey\"` (or embed gorm.Model)", typ)
	}
	m.pks, m.pk = pks, pks[0]

	for _, f := range cols {
		switch {
		case f.FieldType == reflect.TypeOf(gorm.DeletedAt{}):
			if m.deletedAt != nil {
				return nil, fmt.Errorf("%w: repository: %v has two soft-delete fields (%s, %s); gormlock handles one gorm.DeletedAt field", locking.ErrNotSupported, typ, m.deletedAt.Name, f.Name)
			}
			m.deletedAt = f
		case hasDeleteClauses(f):
			return nil, fmt.Errorf("%w: repository: %v.%s (%v) brings its own delete clauses; gormlock's soft delete works with gorm.DeletedAt only: use gorm.DeletedAt for the field", locking.ErrNotSupported, typ, f.Name, f.FieldType)
		}
	}
	if m.deletedAt != nil && m.deletedAt.PrimaryKey {
		return nil, locking.Invalid("repository: %v: the soft-delete field %s cannot be part of the primary key", typ, m.deletedAt.Name)
	}
	m.hooks = hooksOf(s)
	m.assocs = associationsOf(s)
	var err error
	if m.version, err = versionField(s); err != nil {
		return nil, err
	}

	for _, f := range cols {
		if f.Readable {
			m.readCols = append(m.readCols, f)
			idx := directIndex(typ, f)
			m.direct = append(m.direct, idx)
			m.anyDirect = m.anyDirect || idx != nil
		}
		if f.PrimaryKey || f == m.version || f == m.deletedAt {
			continue
		}
		switch {
		case f.AutoCreateTime != 0 && m.createdAt == nil:
			m.createdAt = f
			continue
		case f.AutoUpdateTime != 0 && m.updatedAt == nil:
			if !isTimeField(f) {
				return nil, fmt.Errorf("%w: repository: %v.%s: gormlock sets update times itself and handles time.Time (or *time.Time) only, not %v: make the field a time.Time, or tag it `gorm:\"autoUpdateTime:false\"` and set it yourself", locking.ErrNotSupported, typ, f.Name, f.FieldType)
			}
			m.updatedAt = f
			continue
		}
		if f.Updatable && !isUnversioned(f) {
			m.setCols = append(m.setCols, f)
		}
	}
	for _, f := range cols {
		if !isUnversioned(f) {
			continue
		}
		var why string
		switch {
		case f.PrimaryKey:
			why = "part of the primary key"
		case f == m.version:
			why = "the version"
		case f == m.createdAt || f == m.updatedAt || f == m.deletedAt:
			why = "a creation, update or deletion time, which gormlock manages"
		case !f.Updatable:
			why = "a field Update may not write"
		case snapKindOf(f.FieldType) == snapOpaque:
			why = "of a type whose changes in place gormlock cannot tell (it holds an interface or a pointer gormlock cannot copy, and is no driver.Valuer)"
		}
		if why != "" {
			return nil, locking.Invalid("repository: %v.%s is tagged gormlock:%q, but it is %s; the tag marks a field that changes outside the version (a counter)", typ, f.Name, UnversionedTag, why)
		}
		m.unversioned = append(m.unversioned, f)
		m.unversionedSnap = append(m.unversionedSnap, snapKindOf(f.FieldType))
	}
	m.onlyTellable = true
	for _, f := range m.setCols {
		k := snapKindOf(f.FieldType)
		m.setColSnap = append(m.setColSnap, k)
		m.onlyTellable = m.onlyTellable && k != snapOpaque
	}

	return m, nil
}

// ownSelect reports whether Get may read with a SELECT of its own that
// names readCols. Not for a model with an AfterFind hook, which only GORM
// runs, nor for one with a read-only field (tagged "->"): such a field may
// have no column in the table (one filled only by a custom Select), and
// naming it would fail where GORM's SELECT * leaves it zero. Every other
// readable column is one that Create and Update write, so it exists.
func (m *meta) ownSelect() bool {
	if m.schema.AfterFind {
		return false
	}
	for _, f := range m.readCols {
		if !f.Creatable && !f.Updatable && !f.PrimaryKey {
			return false
		}
	}
	return true
}

var scannerType = reflect.TypeFor[sql.Scanner]()

// directIndex returns the index path of f in model when Get may scan the
// column straight into the field: a bool, number, string or time.Time held
// by value (also through embedded structs held by value), with no serializer
// and no Scan method of its own. database/sql stores such a value exactly as
// GORM's scan does, except a NULL, which GORM reads as the zero value and
// database/sql refuses: Get then scans the row again GORM's way. Any other
// field gets nil and is always scanned GORM's way.
func directIndex(model reflect.Type, f *schema.Field) []int {
	if f.Serializer != nil || reflect.PointerTo(f.FieldType).Implements(scannerType) {
		return nil
	}
	switch k := f.FieldType.Kind(); {
	case k == reflect.Bool, k == reflect.String, isInt(k), k == reflect.Float32, k == reflect.Float64:
	case f.FieldType == reflect.TypeFor[time.Time]():
	default:
		return nil
	}
	t := model
	for _, i := range f.StructField.Index {
		if i < 0 || t.Kind() != reflect.Struct || i >= t.NumField() {
			return nil // a negative index is GORM's mark of an embedded pointer
		}
		t = t.Field(i).Type
	}
	if t != f.FieldType {
		return nil
	}
	return f.StructField.Index
}

// hasDeleteClauses reports a field whose type changes GORM's DELETE (a
// soft-delete type other than gorm.DeletedAt, such as
// gorm.io/plugin/soft_delete's).
func hasDeleteClauses(f *schema.Field) bool {
	_, ok := reflect.New(f.FieldType).Interface().(schema.DeleteClausesInterface)
	if !ok {
		_, ok = reflect.New(f.FieldType).Elem().Interface().(schema.DeleteClausesInterface)
	}
	return ok
}

func isTimeField(f *schema.Field) bool {
	t := f.FieldType
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t == reflect.TypeOf(time.Time{})
}

// intFits reports whether the integer v converts to the integer type want
// without wrapping.
func intFits(v reflect.Value, want reflect.Type) bool {
	probe := reflect.New(want).Elem()
	if isUint(v.Kind()) {
		u := v.Uint()
		if isUint(want.Kind()) {
			return !probe.OverflowUint(u)
		}
		return u <= math.MaxInt64 && !probe.OverflowInt(int64(u))
	}
	i := v.Int()
	if isUint(want.Kind()) {
		return i >= 0 && !probe.OverflowUint(uint64(i))
	}
	return !probe.OverflowInt(i)
}

func isInt(k reflect.Kind) bool { return k >= reflect.Int && k <= reflect.Uint64 }

func isUint(k reflect.Kind) bool {
	return k >= reflect.Uint && k <= reflect.Uint64
}

// now returns this process's clock as a timestamp: UTC, with the
// microsecond precision every supported database stores.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// now returns the timestamp a write of ctx stores in the creation, update
// and deletion times: GORM's clock, the NowFunc of the database's config
// (or of the session the repository or the transaction was made with), in
// UTC with microseconds, so the in-memory entity equals what a later Get
// returns.
func (r *Repository[T]) now(ctx context.Context) time.Time {
	if f := r.st.Config(ctx).NowFunc; f != nil {
		return f().UTC().Truncate(time.Microsecond)
	}
	return now()
}

// timeValue converts t to the Go type of a timestamp field.
func timeValue(f *schema.Field, t time.Time) any {
	if f.FieldType.Kind() == reflect.Pointer {
		return &t
	}
	return t
}

// versionField finds the version field of the model s describes, by the
// rules New applies: the field tagged `gormlock:"version"`, or else the
// one named Version; an int64 kind, not part of the key, readable and
// writable.
func versionField(s *schema.Schema) (*schema.Field, error) {
	typ := s.ModelType
	var ver *schema.Field
	for _, name := range s.DBNames {
		f := s.FieldsByDBName[name]
		if tag, ok := f.Tag.Lookup("gormlock"); ok && tag == VersionTag {
			if ver != nil && ver.Tag.Get("gormlock") == VersionTag {
				return nil, locking.Invalid("repository: %v has two fields tagged gormlock:\"version\"", typ)
			}
			ver = f
		} else if f.Name == "Version" && (ver == nil || ver.Tag.Get("gormlock") != VersionTag) {
			ver = f
		}
	}
	if ver == nil {
		return nil, locking.Invalid("repository: %v has no version field, which gormlock's guarded writes need: embed models.Versioning (beside gorm.Model) or models.Versioned, or tag an int64 field `gormlock:\"version\"`", typ)
	}
	if k := ver.FieldType.Kind(); (k != reflect.Int64 && k != reflect.Int) || ver.FieldType.Bits() < 64 {
		return nil, locking.Invalid("repository: %v.%s must be int64, not %v: versions are 64-bit clock readings (see the package doc)", typ, ver.Name, ver.FieldType)
	}
	if ver.PrimaryKey {
		return nil, locking.Invalid("repository: %v: the version field cannot be part of the primary key", typ)
	}
	if !ver.Updatable || !ver.Readable || !ver.Creatable {
		return nil, locking.Invalid("repository: %v.%s must be readable and writable (no \"<-\"/\"->\"/\"-\" permission tags)", typ, ver.Name)
	}
	return ver, nil
}

// isUnversioned reports a field tagged gormlock:"unversioned".
func isUnversioned(f *schema.Field) bool {
	tag, ok := f.Tag.Lookup("gormlock")
	return ok && tag == UnversionedTag
}

// isUnversionedField reports whether f is one of the model's unversioned
// fields.
func (m *model) isUnversionedField(f *schema.Field) bool {
	for _, u := range m.unversioned {
		if u == f {
			return true
		}
	}
	return false
}
