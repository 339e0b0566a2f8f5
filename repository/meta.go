package repository

import (
	"database/sql"
	"fmt"
	"math"
	"reflect"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"

	"github.com/gormlock/gormlock/internal/dialect"
	"github.com/gormlock/gormlock/locking"
)

// VersionTag marks the version field when it is not named Version:
//
//	Rev int64 `gormlock:"version"`
const VersionTag = "version"

// meta is everything about T that the hot path needs, computed once by New.
type meta struct {
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
	caps      dialect.Caps
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
	// selectSQL is SELECT readCols FROM table WHERE pk = ? [AND deleted_at
	// IS NULL]. Empty when Get must read through GORM instead (see
	// ownSelect). selectAnySQL is the same without the soft-delete
	// condition (IncludeDeleted).
	selectSQL    string
	selectAnySQL string
	// selectFor is selectSQL + " FOR UPDATE" / " FOR SHARE" [" NOWAIT"],
	// indexed [shared][nowait], for LockRow where rows lock natively.
	selectFor [2][2]string

	update stmt // SET setCols..., version, [updated_at] WHERE pk AND version [AND deleted_at IS NULL]
	bump   stmt // SET version, [updated_at] WHERE pk AND version [AND deleted_at IS NULL]
	delete stmt // DELETE WHERE pk AND version (for soft delete: Permanently)
	// softDelete sets deleted_at and the next version WHERE pk AND version
	// AND deleted_at IS NULL; restore clears deleted_at WHERE pk AND
	// version AND deleted_at IS NOT NULL. Soft-delete models only.
	softDelete, restore stmt
	versionSQL          string // SELECT version, deleted WHERE pk
	// versionSQLInTx is versionSQL as a locking read, for use inside a
	// transaction on MySQL: InnoDB's UPDATE reads the latest committed
	// row, but a plain SELECT in a REPEATABLE READ transaction reads the
	// transaction's snapshot, which may still show the version the
	// UPDATE did not find. Equal to versionSQL elsewhere.
	versionSQLInTx string
	// firstVersionSQL sets a record just inserted to its first version,
	// read from the database's clock (dialects with NextVersion only).
	firstVersionSQL string
	// writeLockSQL is a write that changes nothing, run to take SQLite's
	// write lock in a transaction that may not hold it yet.
	writeLockSQL string
	// rowLockSQL locks the record's row, SELECT 1 ... FOR UPDATE, for a
	// lease write on MySQL (see writeWithLease).
	rowLockSQL string

	// leases is set when the repository was built WithLeases: then every
	// guarded write also requires that no one else holds a lease on the
	// record.
	leases *leaseSQL
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
	m := &meta{schema: s, table: s.Table, caps: caps}

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
	for _, f := range cols {
		if tag, ok := f.Tag.Lookup("gormlock"); ok && tag == VersionTag {
			if m.version != nil && m.version.Tag.Get("gormlock") == VersionTag {
				return nil, locking.Invalid("repository: %v has two fields tagged gormlock:\"version\"", typ)
			}
			m.version = f
		} else if f.Name == "Version" && (m.version == nil || m.version.Tag.Get("gormlock") != VersionTag) {
			m.version = f
		}
	}
	if m.version == nil {
		return nil, locking.Invalid("repository: %v has no version field, which gormlock's guarded writes need: embed models.Versioning (beside gorm.Model) or models.Versioned, or tag an int64 field `gormlock:\"version\"`", typ)
	}
	if k := m.version.FieldType.Kind(); (k != reflect.Int64 && k != reflect.Int) || m.version.FieldType.Bits() < 64 {
		return nil, locking.Invalid("repository: %v.%s must be int64, not %v: versions are 64-bit clock readings (see the package doc)", typ, m.version.Name, m.version.FieldType)
	}
	if m.version.PrimaryKey {
		return nil, locking.Invalid("repository: %v: the version field cannot be part of the primary key", typ)
	}
	if !m.version.Updatable || !m.version.Readable || !m.version.Creatable {
		return nil, locking.Invalid("repository: %v.%s must be readable and writable (no \"<-\"/\"->\"/\"-\" permission tags)", typ, m.version.Name)
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
		if f.Updatable {
			m.setCols = append(m.setCols, f)
		}
	}

	return m, nil
}

// buildSQL prepares the guarded statements, quoting every identifier and
// using the dialect's placeholders, so the hot path only binds values.
func (m *meta) buildSQL(db *gorm.DB, leases bool) {
	if leases {
		m.leases = buildLeaseSQL(db, m)
	}
	w := &sqlWriter{db: db}
	returning := ""
	if m.caps.VersionBack == dialect.Returning {
		var b strings.Builder
		b.WriteString(" RETURNING ")
		db.Dialector.QuoteTo(&b, m.version.DBName)
		returning = b.String()
	}
	w.reset("UPDATE ").quote(m.table).str(" SET ")
	for _, f := range m.setCols {
		w.eq(f.DBName).str(", ")
	}
	m.update = w.setVersion(m, true).guard(m, liveRows).stmt(m.caps, returning)
	m.bump = w.reset("UPDATE ").quote(m.table).str(" SET ").setVersion(m, true).guard(m, liveRows).stmt(m.caps, returning)
	m.delete = w.reset("DELETE FROM ").quote(m.table).guard(m, anyRows).stmt(m.caps, "")
	if m.deletedAt != nil {
		m.softDelete = w.reset("UPDATE ").quote(m.table).str(" SET ").eq(m.deletedAt.DBName).str(", ").
			setVersion(m, false).guard(m, liveRows).stmt(m.caps, returning)
		m.restore = w.reset("UPDATE ").quote(m.table).str(" SET ").quote(m.deletedAt.DBName).str(" = NULL, ").
			setVersion(m, false).guard(m, deletedRows).stmt(m.caps, returning)
	}
	if m.ownSelect() {
		w.reset("SELECT ")
		for i, f := range m.readCols {
			if i > 0 {
				w.str(", ")
			}
			w.quote(f.DBName)
		}
		w.str(" FROM ").quote(m.table).str(" WHERE ").keyEq(m)
		m.selectAnySQL = w.String()
		m.selectSQL = w.live(m, liveRows).String()
		for shared, lock := range []string{"FOR " + clause.LockingStrengthUpdate, m.caps.ShareClause} {
			m.selectFor[shared][0] = m.selectSQL + " " + lock
			m.selectFor[shared][1] = m.selectFor[shared][0] + " " + clause.LockingOptionsNoWait
		}
	}
	if expr := m.caps.NextVersion; expr != "" {
		var col strings.Builder
		db.Dialector.QuoteTo(&col, m.version.DBName)
		before, after, _ := strings.Cut(expr, "?")
		w.reset("UPDATE ").quote(m.table).str(" SET ").str(col.String()).str(" = ").
			str(before + col.String() + " + 1" + after).str(" WHERE ").keyEq(m)
		if m.caps.VersionBack == dialect.Returning {
			w.str(" RETURNING ").str(col.String())
		}
		m.firstVersionSQL = w.String()
	}
	w.reset("SELECT ").quote(m.version.DBName).str(", ")
	if m.deletedAt != nil {
		w.quote(m.deletedAt.DBName).str(" IS NOT NULL")
	} else {
		w.str("FALSE")
	}
	m.versionSQL = w.str(" FROM ").quote(m.table).str(" WHERE ").keyEq(m).String()
	m.versionSQLInTx = m.versionSQL
	if m.caps.Dialector() == dialect.MySQL {
		m.versionSQLInTx += " " + m.caps.ShareClause
	}
	m.writeLockSQL = w.reset("UPDATE ").quote(m.table).str(" SET ").quote(m.version.DBName).str(" = ").
		quote(m.version.DBName).str(" WHERE 0 = 1").String()
	m.rowLockSQL = w.reset("SELECT 1 FROM ").quote(m.table).str(" WHERE ").keyEq(m).str(" FOR UPDATE").String()
}

// rowState says which rows of a soft-delete model a statement may match.
type rowState int

const (
	anyRows     rowState = iota // deleted or not (a permanent delete)
	liveRows                    // deleted_at IS NULL
	deletedRows                 // deleted_at IS NOT NULL (restore)
)

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

// lockedSelect returns the SELECT of LockRow with the row lock lc asks for.
func (m *meta) lockedSelect(lc lockConfig) string {
	return m.selectFor[b2i(lc.shared)][b2i(lc.nowait)]
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// sqlWriter writes one statement with the dialect's quoting and numbered
// placeholders.
type sqlWriter struct {
	strings.Builder
	db   *gorm.DB
	vars gorm.Statement // counts placeholders for BindVarTo ($1, $2, ...)
}

func (w *sqlWriter) reset(s string) *sqlWriter {
	w.Reset()
	w.vars = gorm.Statement{DB: w.db}
	return w.str(s)
}

func (w *sqlWriter) str(s string) *sqlWriter { w.WriteString(s); return w }

func (w *sqlWriter) quote(name string) *sqlWriter { w.db.Dialector.QuoteTo(w, name); return w }

// eq writes "col" = <placeholder>.
func (w *sqlWriter) eq(col string) *sqlWriter {
	w.quote(col).str(" = ")
	w.vars.Vars = append(w.vars.Vars, nil)
	w.db.Dialector.BindVarTo(w, &w.vars, nil)
	return w
}

// setVersion writes "version" = ?[, "updated_at" = ?], or with the
// dialect's NextVersion, "version" = <NextVersion of ?>. The update time
// is written only when updated is true and the model has one.
func (w *sqlWriter) setVersion(m *meta, updated bool) *sqlWriter {
	if expr := m.caps.NextVersion; expr != "" {
		before, after, _ := strings.Cut(expr, "?")
		w.quote(m.version.DBName).str(" = ").str(before)
		w.vars.Vars = append(w.vars.Vars, nil)
		w.db.Dialector.BindVarTo(w, &w.vars, nil)
		w.str(after)
	} else {
		w.eq(m.version.DBName)
	}
	if updated && m.updatedAt != nil {
		w.str(", ").eq(m.updatedAt.DBName)
	}
	return w
}

// stmt ends the statement written so far, a write whose WHERE clause is
// last, with suffix, and returns it with its bounded form (see stmt) where
// the dialect has one.
func (w *sqlWriter) stmt(caps dialect.Caps, suffix string) stmt {
	s := stmt{text: w.String() + suffix}
	if caps.StatementTimeout != "" {
		s.bounded = s.text // bounded by a prefix, see stmt
		return s
	}
	if cond := caps.SelfLockTimeout; cond != "" {
		before, after, _ := strings.Cut(cond, "?")
		w.str(" AND ").str(before)
		w.vars.Vars = append(w.vars.Vars, nil)
		w.db.Dialector.BindVarTo(w, &w.vars, nil)
		s.bounded = w.str(after).String() + suffix
	}
	return s
}

// guard writes WHERE "pk" = ? AND "version" = ?, for a soft-delete model
// the condition rows puts on deleted_at, and with leases AND NOT EXISTS (an
// active lease on the record).
func (w *sqlWriter) guard(m *meta, rows rowState) *sqlWriter {
	w.str(" WHERE ").keyEq(m).str(" AND ").eq(m.version.DBName).live(m, rows)
	if m.leases != nil {
		w.str(" AND ").str(m.leases.guard)
	}
	return w
}

// keyEq writes "pk" = ?, or for a composite key "a" = ? AND "b" = ?.
func (w *sqlWriter) keyEq(m *meta) *sqlWriter {
	for i, f := range m.pks {
		if i > 0 {
			w.str(" AND ")
		}
		w.eq(f.DBName)
	}
	return w
}

// live writes the condition rows puts on a soft-delete model's deleted_at:
// AND "deleted_at" IS NULL, or IS NOT NULL; nothing for anyRows or a model
// without soft delete.
func (w *sqlWriter) live(m *meta, rows rowState) *sqlWriter {
	if m.deletedAt == nil || rows == anyRows {
		return w
	}
	w.str(" AND ").quote(m.deletedAt.DBName)
	if rows == liveRows {
		return w.str(" IS NULL")
	}
	return w.str(" IS NOT NULL")
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

// now returns the timestamp written by a write: UTC, with the microsecond
// precision every supported database stores, so the in-memory entity equals
// what a later Get returns.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// timeValue converts t to the Go type of a timestamp field.
func timeValue(f *schema.Field, t time.Time) any {
	if f.FieldType.Kind() == reflect.Pointer {
		return &t
	}
	return t
}
