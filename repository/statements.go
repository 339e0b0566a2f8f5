package repository

import (
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"

	"github.com/gormlock/gormlock/internal/dialect"
	"github.com/gormlock/gormlock/internal/store"
)

// statements are the SQL texts of T's calls, built once by New with the
// dialect's quoting and placeholders, so that a call only binds values.
type statements struct {
	// selectSQL is SELECT readCols FROM table WHERE pk = ? [AND deleted_at
	// IS NULL]. Empty when Get must read through GORM instead (see
	// ownSelect). selectAnySQL is the same without the soft-delete
	// condition (IncludeDeleted).
	selectSQL    string
	selectAnySQL string
	// selectFor is selectSQL + " FOR UPDATE" / " FOR SHARE" [" NOWAIT"],
	// indexed [shared][nowait], for LockRow where rows lock natively.
	selectFor [2][2]string
	// selectNoKey is selectSQL + " FOR NO KEY UPDATE" on PostgreSQL, for
	// adaptive Mutate's locked read (see lockConfig.noKey); "" elsewhere.
	selectNoKey string

	update store.Stmt // SET setCols..., version, [updated_at] WHERE pk AND version [AND deleted_at IS NULL]
	bump   store.Stmt // SET version, [updated_at] WHERE pk AND version [AND deleted_at IS NULL]
	delete store.Stmt // DELETE WHERE pk AND version (for soft delete: Permanently)
	// softDelete sets deleted_at and the next version WHERE pk AND version
	// AND deleted_at IS NULL; restore clears deleted_at WHERE pk AND
	// version AND deleted_at IS NOT NULL. Soft-delete models only.
	softDelete, restore store.Stmt
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
	// unversionedSQL reads the unversioned fields of a record by its key
	// (see refreshUnversioned); "" when the model has none.
	unversionedSQL string

	// leases is set when the repository was built WithLeases: then every
	// guarded write also requires that no one else holds a lease on the
	// record.
	leases *leaseSQL
	// leaseInRow says the leases live in the record's row
	// (WithLeasesInRow).
	leaseInRow bool
	// returningSQL is returning's text, built once.
	returningSQL string
	// updateReturningSQL is the RETURNING of Update's statements (update
	// and the Columns sets'): returningSQL, and where the dialect reads
	// the version back with RETURNING, the unversioned fields after it
	// (see returnsUnversioned), so that the write itself brings back what
	// refreshUnversioned would read with a SELECT of its own.
	updateReturningSQL string
}

// returnsUnversioned reports whether Update's statement returns the
// unversioned fields after the version (updateReturningSQL).
func (m *meta) returnsUnversioned() bool {
	return len(m.unversioned) > 0 && m.caps.VersionBack == dialect.Returning
}

// buildSQL prepares the guarded statements, quoting every identifier and
// using the dialect's placeholders, so the hot path only binds values.
func (m *meta) buildSQL(db *gorm.DB, leases bool) {
	if leases {
		m.leases = buildLeaseSQL(db, m)
	}
	w := &sqlWriter{db: db}
	returning := m.returning(db)
	m.returningSQL = returning
	m.updateReturningSQL = returning
	if m.returnsUnversioned() {
		w.reset(returning)
		for _, f := range m.unversioned {
			w.str(", ").quote(f.DBName)
		}
		m.updateReturningSQL = w.String()
	}
	m.update = m.updateOf(db, m.setCols)
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
		if m.caps.Dialector() == dialect.Postgres {
			m.selectNoKey = m.selectSQL + " FOR NO KEY UPDATE"
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
	w.reset("SELECT COALESCE(").quote(m.version.DBName).str(", 0), ")
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
	if len(m.unversioned) > 0 {
		w.reset("SELECT ")
		for i, f := range m.unversioned {
			if i > 0 {
				w.str(", ")
			}
			w.quote(f.DBName)
		}
		m.unversionedSQL = w.str(" FROM ").quote(m.table).str(" WHERE ").keyEq(m).String()
	}
	m.rowLockSQL = w.reset("SELECT 1 FROM ").quote(m.table).str(" WHERE ").keyEq(m).str(" FOR UPDATE").String()
}

// updateOf returns the guarded UPDATE that writes fields, the version and
// the update time: Update's statement for every field it writes, or one
// limited by Columns.
func (m *meta) updateOf(db *gorm.DB, fields []*schema.Field) store.Stmt {
	w := &sqlWriter{db: db}
	w.reset("UPDATE ").quote(m.table).str(" SET ")
	for _, f := range fields {
		w.eq(f.DBName).str(", ")
	}
	return w.setVersion(m, true).guard(m, liveRows).stmt(m.caps, m.updateReturningSQL)
}

// returning is " RETURNING version" where the dialect reads the version
// back that way, "" elsewhere.
func (m *meta) returning(db *gorm.DB) string {
	if m.caps.VersionBack != dialect.Returning {
		return ""
	}
	var b strings.Builder
	b.WriteString(" RETURNING ")
	db.Dialector.QuoteTo(&b, m.version.DBName)
	return b.String()
}

// rowState says which rows of a soft-delete model a statement may match.
type rowState int

const (
	anyRows     rowState = iota // deleted or not (a permanent delete)
	liveRows                    // deleted_at IS NULL
	deletedRows                 // deleted_at IS NOT NULL (restore)
)

// lockedSelect returns the SELECT of LockRow with the row lock lc asks for.
func (m *meta) lockedSelect(lc lockConfig) string {
	if lc.noKey && !lc.shared && !lc.nowait && m.selectNoKey != "" {
		return m.selectNoKey
	}
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
// last, with suffix, and returns it with its bounded form (see store.Stmt) where
// the dialect has one.
func (w *sqlWriter) stmt(caps dialect.Caps, suffix string) store.Stmt {
	s := store.Stmt{Text: w.String() + suffix}
	if caps.StatementTimeout != "" {
		s.Bounded = s.Text // bounded by a prefix, see store.Stmt
		return s
	}
	if cond := caps.SelfLockTimeout; cond != "" {
		before, after, _ := strings.Cut(cond, "?")
		w.str(" AND ").str(before)
		w.vars.Vars = append(w.vars.Vars, nil)
		w.db.Dialector.BindVarTo(w, &w.vars, nil)
		s.Bounded = w.str(after).String() + suffix
	}
	return s
}

// guard writes WHERE "pk" = ? AND "version" = ?, for a soft-delete model
// the condition rows puts on deleted_at, and with leases AND NOT EXISTS (an
// active lease on the record).
func (w *sqlWriter) guard(m *meta, rows rowState) *sqlWriter {
	w.str(" WHERE ").keyEq(m).str(" AND ").versionEq(m).live(m, rows)
	if m.leases != nil {
		w.str(" AND ").str(m.leases.guard)
	}
	return w
}

// versionEq writes the guard's version condition, COALESCE("version", 0)
// = ?: a record a legacy writer left at version 0 or NULL matches an
// entity at version 0 (read from it), and the write gives it a real
// version; every other record matches only its own version.
func (w *sqlWriter) versionEq(m *meta) *sqlWriter {
	w.str("COALESCE(").quote(m.version.DBName).str(", 0) = ")
	w.vars.Vars = append(w.vars.Vars, nil)
	w.db.Dialector.BindVarTo(w, &w.vars, nil)
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
