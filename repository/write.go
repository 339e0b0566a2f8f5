package repository

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/gormlock/gormlock/internal/dialect"
	"github.com/gormlock/gormlock/internal/sqlitegate"
	"github.com/gormlock/gormlock/internal/store"
	"github.com/gormlock/gormlock/locking"
)

// Update writes every column of e (zero values included) in one guarded
// statement, UPDATE ... WHERE pk = ? AND version = ?, and on success sets e's
// version to the record's next version (larger than the one it had, see
// "Versions" in the package doc) and its update time. The columns it never
// writes are the primary key, the creation time, the soft-delete time,
// fields GORM may not update (tagged "<-:create", "->" or "-") and fields
// tagged gormlock:"unversioned" (see UnversionedTag), which after the write
// hold the row's values.
//
// When no row matches, it returns a *locking.StaleDataError (errors.Is(err,
// locking.ErrStaleData) is true) if the record exists at another version —
// wrapped in a *StaleError[T] with the record as it is now and the fields
// that differ, and matching locking.ErrVersionMissing too when e carries
// version 0 — or an error matching locking.ErrNotFound if it does not exist
// or is soft-deleted. An entity with an empty key, or a negative version, is
// refused with an error matching locking.ErrInvalidArgument: the guard is
// never turned off. Version 0 is what Get reads from a record a legacy
// writer left at version 0 or NULL: the guard matches only such a record
// (COALESCE(version, 0) = 0), and the write gives it a real version. On
// error e is left as it was.
//
// The model's BeforeSave, BeforeUpdate, AfterUpdate and AfterSave hooks run
// around the statement, as GORM runs them, in one transaction with it (see
// "Hooks" in the package doc): an error from a hook (a *HookError) means
// nothing was written. An entity whose association fields hold records is
// refused, naming them, unless SkipAssociations is given: Update writes the
// record's own row only.
//
// Outside a transaction the statement commits by itself, and its outcome is
// told truthfully: nil means applied; an error matching
// locking.ErrCommitUnknown (and its cause, such as
// context.DeadlineExceeded) means the statement was sent and may have been
// applied — the connection broke or ctx ended before the answer; any other
// error means not applied. When ctx has a deadline, the wait for a row lock
// is bounded on the database a little before it (PostgreSQL's lock_timeout;
// SQLite's write lock is waited for in Go), so a write stuck behind a lock
// fails definitely — an error matching locking.ErrLockTimeout and
// context.DeadlineExceeded — instead of with an unknown outcome.
//
// With OpKey the write and the key's record commit together: repeating the
// call with the same key (after an unknown outcome, say) applies it at most
// once — a repeat of an applied write returns nil and stores in e the
// record as it is now (the first call's write, and any later ones; one
// deleted since gives a *locking.RecordGoneError). See OpKey and
// LookupOperation.
func (r *Repository[T]) Update(ctx context.Context, e *T, opts ...UpdateOption) error {
	wc, err := updateConfigOf(opts)
	if err != nil {
		return err
	}
	return r.guardedWrite(ctx, e, kindUpdate, wc)
}

// ForceIncrement advances e's version (and sets its update time) without
// writing any other column, guarded like Update: UPDATE ... SET version = ?
// WHERE pk = ? AND version = ?. Use it for an aggregate root whose children
// changed, so that a concurrent writer of the root, or an HTTP client
// holding the root's ETag, sees the change. Errors are those of Update; on
// error e is left as it was. Other fields of e are not written, even if they
// were changed in memory. Like GORM's UpdateColumn it runs no hooks. It
// takes OpKey as Update does.
func (r *Repository[T]) ForceIncrement(ctx context.Context, e *T, opts ...WriteOption) error {
	wc, err := writeConfigOf(opts)
	if err != nil {
		return err
	}
	return r.guardedWrite(ctx, e, kindBump, wc)
}

// Restore brings back the soft-deleted record of e (read with
// IncludeDeleted, or the entity Delete soft-deleted), guarded like Update:
// UPDATE ... SET deleted_at = NULL WHERE pk = ? AND version = ? AND
// deleted_at IS NOT NULL. On success e's DeletedAt is cleared and its
// version is the record's next one. A record at another version gives a
// *locking.StaleDataError, one that is gone an error matching
// locking.ErrNotFound, and one that is not deleted an error matching
// locking.ErrInvalidArgument. Like ForceIncrement it writes no other column
// and runs no hooks. The model must have a gorm.DeletedAt field. It takes
// OpKey as Update does.
func (r *Repository[T]) Restore(ctx context.Context, e *T, opts ...WriteOption) error {
	if r.m.deletedAt == nil {
		return fmt.Errorf("%w: %s: Restore: the model has no soft delete (gorm.DeletedAt field); its deletes are permanent", locking.ErrInvalidArgument, r.m.table)
	}
	wc, err := writeConfigOf(opts)
	if err != nil {
		return err
	}
	return r.guardedWrite(ctx, e, kindRestore, wc)
}

// writeKind is one of the guarded writes built on execWrite.
type writeKind int

const (
	kindUpdate writeKind = iota
	kindBump
	kindSoftDelete
	kindRestore
)

// writeKinds describes each writeKind: its method name, its kind of
// operation (for operation keys), its name in errors and which rows it may
// match.
var writeKinds = [...]struct {
	method, opKind, op string
	rows               rowState
}{
	kindUpdate:     {"Update", "update", "update", liveRows},
	kindBump:       {"ForceIncrement", "force-increment", "force increment", liveRows},
	kindSoftDelete: {"Delete", "delete", "delete", liveRows},
	kindRestore:    {"Restore", "restore", "restore", deletedRows},
}

func (m *meta) stmtOf(k writeKind) store.Stmt {
	switch k {
	case kindBump:
		return m.bump
	case kindSoftDelete:
		return m.softDelete
	case kindRestore:
		return m.restore
	}
	return m.update
}

// guardedWrite runs Update's, ForceIncrement's or Restore's statement for
// e, with Update's hooks, and records the write in e.
func (r *Repository[T]) guardedWrite(ctx context.Context, e *T, kind writeKind, wc writeConfig) error {
	method := writeKinds[kind].method
	rv, err := r.entityValue(e)
	if err != nil {
		return err
	}
	id, expected, err := r.guardOf(ctx, rv, method)
	if err != nil {
		return err
	}
	cols, err := r.columnSet(wc.columns, method)
	if err != nil {
		return err
	}
	if wc.guard != nil {
		cols = r.guardedColumns(wc.guard)
	}
	if kind == kindUpdate && !wc.skipAssoc {
		if err := r.refuseAssociations(ctx, rv, method, id); err != nil {
			return err
		}
	}
	h := hookRun{}
	if kind == kindUpdate {
		h = r.hooksFor(true)
	}
	saved := *e
	prior, err := r.runWrite(ctx, wc, h.on, kind, id, func(ctx context.Context) (int64, error) {
		conds, err := r.before(ctx, h, e, rv)
		if err != nil {
			return 0, err
		}
		if wc.guard != nil {
			conds = append(conds, wc.guard.conds()...)
		}
		w, err := r.execWrite(ctx, kind, rv, id, expected, cols, conds)
		if wc.guard != nil && errors.Is(err, locking.ErrConditionFailed) {
			// The version matched, the value fn read did not: an Apply
			// changed the field since the read.
			err = r.valueMoved(id, expected, wc.guard)
		}
		if err != nil {
			return 0, err
		}
		if err := r.written(ctx, rv, id, w); err != nil {
			return 0, err
		}
		if kind == kindUpdate {
			if err := r.refreshAfterWrite(ctx, rv, id, w.unversioned); err != nil {
				return 0, err
			}
		}
		return w.version, r.after(ctx, h, e, rv)
	})
	if err != nil {
		*e = saved
		return err
	}
	if prior != nil {
		*e = saved
		return r.repeated(ctx, rv, prior)
	}
	return nil
}

// runWrite runs write, a guarded write of record id of the given kind:
// with an operation key as an operation (runOp; a repeat of an applied one
// returns its record), otherwise by itself — in a transaction of its own
// when it runs hooks and ctx carries none, so that the hooks' writes and
// the write commit together.
func (r *Repository[T]) runWrite(ctx context.Context, wc writeConfig, hooked bool, kind writeKind, id any, write func(context.Context) (int64, error)) (*Operation, error) {
	if wc.op != nil {
		return r.runOp(ctx, *wc.op, writeKinds[kind].opKind, keyString(id), func(ctx context.Context) (string, int64, error) {
			v, err := write(ctx)
			return keyString(id), v, err
		})
	}
	if _, inTx := r.st.Pool(ctx); hooked && !inTx {
		return nil, r.st.RunTx(ctx, r.st.Gorm, nil, sqlitegate.Wait{}, r.m.table+": "+writeKinds[kind].method, func(ctx context.Context) error {
			_, err := write(ctx)
			return err
		})
	}
	_, err := write(ctx)
	return nil, err
}

// write is what a successful guarded UPDATE wrote: the record's new version
// and update time, or deletion time.
type write struct {
	version int64
	updated any // the update time's value, nil when not written
	// deleted is the soft-delete field's new value, nil when not written.
	deleted *gorm.DeletedAt
	// unversioned is the row's unversioned fields as the write left them,
	// as the driver gave them, when its statement returned them
	// (meta.returnsUnversioned); nil otherwise.
	unversioned []any
}

// execWrite runs one guarded UPDATE of the record in rv (of the kind given)
// and returns what it wrote, without changing the entity. No matching row
// gives a *locking.StaleDataError or a *locking.NotFoundError, unwrapped
// (wrapped when the record is soft-deleted).
//
// cols limits an Update to some fields (Columns); conds are conditions the
// model's Before hooks added (see hookDB), ANDed to the guard.
func (r *Repository[T]) execWrite(ctx context.Context, kind writeKind, rv reflect.Value, id any, expected int64, cols *columnSet, conds []clause.Expression) (write, error) {
	k := writeKinds[kind]
	if err := r.checkIsolation(ctx, k.method); err != nil {
		return write{}, err
	}
	if expected >= math.MaxInt64-1 {
		return write{}, locking.Invalid("%s: %s id=%v: version %d has no successor", r.m.table, k.method, id, expected)
	}
	args := make([]any, 0, len(r.m.setCols)+len(r.m.pks)+5)
	var w write
	switch kind {
	case kindUpdate:
		fields := r.m.setCols
		if cols != nil {
			fields = cols.fields
		}
		for _, f := range fields {
			v, _ := f.ValueOf(ctx, rv)
			args = append(args, v)
		}
	case kindSoftDelete:
		w.deleted = &gorm.DeletedAt{Time: r.now(ctx), Valid: true}
		args = append(args, w.deleted.Time)
	case kindRestore:
		w.deleted = &gorm.DeletedAt{}
	}
	var va *versionArg // the version the process computes, when it does
	if r.m.caps.NextVersion != "" {
		args = append(args, expected+1) // the floor; the database reads its clock
	} else {
		va = &versionArg{prev: expected}
		args = append(args, va)
	}
	if r.m.updatedAt != nil && (kind == kindUpdate || kind == kindBump) {
		w.updated = timeValue(r.m.updatedAt, r.now(ctx))
		args = append(args, w.updated)
	}
	args = r.guardArgs(args, id, expected)
	s := r.m.stmtOf(kind)
	if cols != nil {
		s = cols.stmt
	}
	suffix := r.m.returningSQL
	if kind == kindUpdate {
		suffix = r.m.updateReturningSQL
	}
	s, args = r.withConditions(s, suffix, args, conds)
	var n int64
	var err error
	switch r.m.caps.VersionBack {
	case dialect.Returning:
		var version int64 // its own variable: w stays on the stack
		if kind == kindUpdate && r.m.returnsUnversioned() {
			w.unversioned, err = r.execReturningUnversioned(ctx, s, args, &version)
		} else {
			err = r.st.Exec(ctx, s, args, r.st.QueryRowScan(&version))
		}
		if n, w.version = 1, version; store.IsNoRows(err) {
			n, err = 0, nil
		}
	case dialect.LastInsertID:
		n, w.version, err = r.st.ExecResultID(ctx, s, args)
	default:
		n, err = r.st.ExecResult(ctx, s, args)
		w.version = va.v
	}
	if err != nil {
		return write{}, fmt.Errorf("%s: %s id=%v: %w", r.m.table, k.method, id, err)
	}
	return w, r.checkAffected(ctx, n, id, expected, k.op, k.rows, conds != nil, rv)
}

// execReturningUnversioned runs st, an Update whose RETURNING gives the
// version and then the unversioned fields (meta.returnsUnversioned), and
// returns those fields' values as the driver gave them. They are scanned
// into interfaces, which never fails: a value the entity's field cannot
// take is found when it is set (see refreshAfterWrite), not as a failure
// of a write that happened.
func (r *Repository[T]) execReturningUnversioned(ctx context.Context, st store.Stmt, args []any, version *int64) ([]any, error) {
	vals := make([]any, len(r.m.unversioned))
	dest := make([]any, 1+len(vals))
	dest[0] = version
	for i := range vals {
		dest[1+i] = &vals[i]
	}
	if err := r.st.Exec(ctx, st, args, r.st.QueryRowScan(dest...)); err != nil {
		return nil, err
	}
	return vals, nil
}

// withConditions returns st, a guarded write whose text ends with suffix,
// with conds ANDed to its WHERE clause, and args with their arguments
// (placeholders numbered after args'). Without conds it returns st and args
// as they are. The statement keeps a bounded form where the dialect bounds
// a statement with a prefix; where a write sets its own lock timeout, the
// condition is written again after conds.
func (r *Repository[T]) withConditions(st store.Stmt, suffix string, args []any, conds []clause.Expression) (store.Stmt, []any) {
	if len(conds) == 0 {
		return st, args
	}
	stmt := &gorm.Statement{DB: r.st.Gorm, Clauses: map[string]clause.Clause{}, Vars: append([]any(nil), args...)}
	stmt.SQL.WriteString(strings.TrimSuffix(st.Text, suffix))
	stmt.SQL.WriteString(" AND (")
	clause.Where{Exprs: conds}.Build(stmt)
	stmt.SQL.WriteString(")")
	base := stmt.SQL.String()
	out := store.Stmt{Text: base + suffix}
	switch {
	case r.m.caps.StatementTimeout != "":
		out.Bounded = out.Text
	case r.m.caps.SelfLockTimeout != "" && st.Bounded != "":
		before, after, _ := strings.Cut(r.m.caps.SelfLockTimeout, "?")
		stmt.SQL.WriteString(" AND " + before)
		stmt.Vars = append(stmt.Vars, nil)
		r.st.Gorm.Dialector.BindVarTo(&stmt.SQL, stmt, nil)
		stmt.Vars = stmt.Vars[:len(stmt.Vars)-1]
		stmt.SQL.WriteString(after)
		out.Bounded = stmt.SQL.String() + suffix
	}
	return out, stmt.Vars
}

// versionArg is the version a write gives a record, computed by the
// process (where the dialect has no NextVersion) when the driver sends the
// statement: database/sql converts arguments once it holds the connection,
// and SQLite's write-lock loop sends again on every attempt. So the clock is
// read as late as possible — after the write lock was free — and a record
// created again after a delete gets a version above the deleted one's. v
// is the value last sent.
//
// Each send reads the clock once (Sending marks it pending); any other
// call of Value — GORM's logger explaining the statement — returns the
// value sent.
type versionArg struct {
	prev    int64
	v       int64
	pending bool
}

var _ store.LateArg = (*versionArg)(nil)

// Sending implements store.LateArg: the next Value reads the clock.
func (a *versionArg) Sending() { a.pending = true }

// Sent implements store.LateArg: the version last sent.
func (a *versionArg) Sent() any { return a.v }

// Value implements driver.Valuer.
func (a *versionArg) Value() (driver.Value, error) {
	if !a.pending && a.v != 0 {
		return a.v, nil
	}
	a.pending = false
	v, ok := nextVersion(a.prev)
	if !ok {
		return nil, locking.Invalid("version %d has no successor", a.prev)
	}
	a.v = v
	return v, nil
}

// written records a successful guarded write in the entity: its new version
// and update time, or deletion time.
func (r *Repository[T]) written(ctx context.Context, rv reflect.Value, id any, w write) error {
	r.setVersion(ctx, rv, w.version)
	if w.updated != nil {
		if err := r.m.updatedAt.Set(ctx, rv, w.updated); err != nil {
			return fmt.Errorf("%s: id=%v: written, but setting %s in memory failed: %w", r.m.table, id, r.m.updatedAt.Name, err)
		}
	}
	if w.deleted != nil {
		r.m.deletedAt.ReflectValueOf(ctx, rv).Set(reflect.ValueOf(*w.deleted))
	}
	return nil
}

// Delete removes the record of e with one guarded statement, DELETE ...
// WHERE pk = ? AND version = ?, and reports a mismatch exactly as Update
// does: a *locking.StaleDataError when the record is at another version, an
// error matching locking.ErrNotFound when it does not exist, and
// locking.ErrInvalidArgument for an entity without a key.
// Its outcome outside a transaction is told as Update's is, and it takes
// OpKey as Update does (a repeat of an applied delete returns nil).
//
// For a model with soft delete (a gorm.DeletedAt field) Delete is GORM's
// soft delete, guarded: UPDATE ... SET deleted_at = now, version = next
// WHERE pk = ? AND version = ? AND deleted_at IS NULL. The row stays; Get,
// Find, Mutate, locked reads and leases no longer see it (IncludeDeleted
// does), a write from an old copy fails, and e gets the deletion time and
// the new version, so that Restore(e) can bring it back. Permanently
// removes the row instead (GORM's Unscoped().Delete).
//
// The model's BeforeDelete and AfterDelete hooks run around the statement,
// in one transaction with it, as for Update.
func (r *Repository[T]) Delete(ctx context.Context, e *T, opts ...DeleteOption) error {
	wc, err := deleteConfigOf(opts)
	if err != nil {
		return err
	}
	rv, err := r.entityValue(e)
	if err != nil {
		return err
	}
	id, expected, err := r.guardOf(ctx, rv, "Delete")
	if err != nil {
		return err
	}
	if err := r.checkIsolation(ctx, "Delete"); err != nil {
		return err
	}
	soft := r.m.deletedAt != nil && !wc.permanently
	h := r.hooksFor(false)
	h.unscoped = wc.permanently
	saved := *e
	prior, err := r.runWrite(ctx, wc, h.on, kindSoftDelete, id, func(ctx context.Context) (int64, error) {
		conds, err := r.before(ctx, h, e, rv)
		if err != nil {
			return 0, err
		}
		var version int64
		if soft {
			w, err := r.execWrite(ctx, kindSoftDelete, rv, id, expected, nil, conds)
			if err != nil {
				return 0, err
			}
			if err := r.written(ctx, rv, id, w); err != nil {
				return 0, err
			}
			version = w.version
		} else {
			st, args := r.withConditions(r.m.delete, "", r.guardArgs(make([]any, 0, len(r.m.pks)+2), id, expected), conds)
			n, err := r.st.ExecResult(ctx, st, args)
			if err != nil {
				return 0, fmt.Errorf("%s: Delete id=%v: %w", r.m.table, id, err)
			}
			if err := r.checkAffected(ctx, n, id, expected, "delete", anyRows, conds != nil, rv); err != nil {
				return 0, err
			}
		}
		return version, r.after(ctx, h, e, rv)
	})
	if err != nil {
		*e = saved
		return err
	}
	if prior != nil && soft {
		*e = saved
		return r.repeated(ctx, rv, prior)
	}
	return nil
}

// guardOf returns the key and version a guarded write needs, refusing an
// empty key or a version that is not positive.
func (r *Repository[T]) guardOf(ctx context.Context, rv reflect.Value, op string) (any, int64, error) {
	id, zero := r.idOf(ctx, rv)
	if zero {
		return nil, 0, locking.Invalid("%s: %s: primary key %s is empty", r.m.table, op, r.m.keyNames())
	}
	v := r.versionOf(ctx, rv)
	if v < 0 {
		return nil, 0, locking.Invalid("%s: %s id=%v: version is %d; a guarded write needs the version the record was read at (load it with Get or create it with Create)", r.m.table, op, id, v)
	}
	// Version 0 is a record a legacy writer left at 0 or NULL, as Get
	// reads it: the guard matches only such a record, and the write
	// gives it a real version.
	return id, v, nil
}

// currentVersion reads the version of record id, in the transaction of ctx
// if there is one; found is false when it does not exist, deleted true when
// it is soft-deleted.
func (r *Repository[T]) currentVersion(ctx context.Context, id any) (version int64, found, deleted bool, err error) {
	pool, inTx := r.pool(ctx)
	query := r.m.versionSQL
	if inTx {
		query = r.m.versionSQLInTx
	}
	err = r.st.ScanSQL(ctx, pool, query, r.m.keyArgs(nil, id), &version, &deleted)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, false, false, nil
	case err != nil:
		return 0, false, false, fmt.Errorf("%s: id=%v: reading its version: %w", r.m.table, id, locking.Classify(err))
	}
	return version, true, deleted, nil
}

// checkAffected turns "no row matched" (n, the rows a guarded write
// affected; rows, which rows it could match) into StaleDataError or
// NotFoundError by reading the record's current version.
//
// hooked says the write carried conditions a Before hook added: a record at
// the expected version then failed them. have is the caller's entity
// (invalid when there is none): then the one read is of the whole record,
// so that a stale write's error carries it and the fields that differ
// (StaleDataError's Current and Fields).
func (r *Repository[T]) checkAffected(ctx context.Context, n int64, id any, expected int64, op string, rows rowState, hooked bool, have reflect.Value) error {
	if n == 1 {
		return nil
	}
	if n > 1 {
		// Only possible when the table lacks the primary key constraint the
		// model declares; the statement is already applied.
		return fmt.Errorf("%s: %s id=%v matched %d rows: the table's primary key %s is not unique", r.m.table, op, id, n, r.m.keyNames())
	}
	var current *T
	var actual int64
	var found, deleted bool
	var err error
	if have.IsValid() && r.m.ownSelect() {
		current, actual, found, deleted, err = r.currentRecord(ctx, id)
	} else {
		actual, found, deleted, err = r.currentVersion(ctx, id)
	}
	switch {
	case err != nil:
		return fmt.Errorf("%s: %s matched no row (not applied): %w", r.m.table, op, err)
	case !found:
		return &locking.NotFoundError{Table: r.m.table, ID: id}
	case deleted && rows == liveRows:
		return fmt.Errorf("%s: %s id=%v: the record is soft-deleted (read it with IncludeDeleted, Restore brings it back): %w",
			r.m.table, op, id, &locking.NotFoundError{Table: r.m.table, ID: id})
	case actual != expected:
		stale := &locking.StaleDataError{Table: r.m.table, ID: id, Expected: expected, Actual: actual, Op: op}
		if current == nil {
			return stale
		}
		return &StaleError[T]{Stale: stale, Current: current, Fields: r.differing(ctx, have, reflect.ValueOf(current).Elem())}
	case !deleted && rows == deletedRows:
		return locking.Invalid("%s: %s id=%v: the record is not deleted", r.m.table, op, id)
	case hooked:
		// The version matched: a lease someone holds refused the write,
		// or the condition a Before hook added did not hold. GORM would
		// update no row and say nothing; gormlock says so.
		if r.m.leases != nil {
			if held, err := r.leaseState(ctx, id); err != nil || held != nil {
				return errors.Join(err, r.leaseRefused(ctx, id, 0, op))
			}
		}
		return fmt.Errorf("%s: %s id=%v: the condition a Before hook added to the write does not hold: %w", r.m.table, op, id, locking.ErrConditionFailed)
	case r.m.leases != nil:
		// The version matched, so the lease condition did not: someone
		// else holds a lease on the record.
		return r.leaseRefused(ctx, id, 0, op)
	}
	// The record is at the expected version now, yet the write matched no
	// row: when it ran, no record had that key (versions are never reused,
	// so the one there now was written after the read, by a writer that
	// does not use gormlock's versions). Not stale: not found.
	return &locking.NotFoundError{Table: r.m.table, ID: id}
}

// currentRecord reads record id whole, deleted or not, in the transaction
// of ctx if there is one (on MySQL as a locking read, which sees the
// latest committed row, as currentVersion does): the record, its version
// (a legacy NULL as 0), whether it exists and whether it is soft-deleted.
func (r *Repository[T]) currentRecord(ctx context.Context, id any) (cur *T, version int64, found, deleted bool, err error) {
	pool, inTx := r.pool(ctx)
	query := r.m.selectAnySQL
	if inTx && r.m.caps.Dialector() == dialect.MySQL {
		query += " " + r.m.caps.ShareClause
	}
	var e T
	err = r.readRow(ctx, pool, query, &e, id)
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return nil, 0, false, false, nil
	case err != nil:
		return nil, 0, false, false, fmt.Errorf("%s: id=%v: reading it: %w", r.m.table, id, locking.Classify(err))
	}
	rv := reflect.ValueOf(&e).Elem()
	if r.m.deletedAt != nil {
		deleted = r.m.deletedAt.ReflectValueOf(ctx, rv).Interface().(gorm.DeletedAt).Valid
	}
	return &e, r.versionOf(ctx, rv), true, deleted, nil
}

// differing returns the names of the fields Update writes whose values
// differ between the entities in a and b, in the model's order.
func (r *Repository[T]) differing(ctx context.Context, a, b reflect.Value) []string {
	var out []string
	for _, f := range r.m.setCols {
		x, _ := f.ValueOf(ctx, a)
		y, _ := f.ValueOf(ctx, b)
		if !sameValue(x, y) {
			out = append(out, f.Name)
		}
	}
	return out
}

// checkIsolation refuses a lease-guarded write inside a PostgreSQL
// transaction that reads from one snapshot for its whole length (REPEATABLE
// READ, SERIALIZABLE): the lease check would not see a lease taken after the
// snapshot, and taking a lease does not touch the record, so the database
// would not report the conflict either.
func (r *Repository[T]) checkIsolation(ctx context.Context, method string) error {
	if r.m.leases == nil || r.m.caps.Name != dialect.Postgres {
		return nil
	}
	iso, ok := store.Isolation(ctx, r.st.SQLDB)
	if !ok {
		return nil
	}
	switch iso {
	case sql.LevelRepeatableRead, sql.LevelSnapshot, sql.LevelSerializable, sql.LevelLinearizable:
		return fmt.Errorf("%w: %s: %s: a repository WithLeases writes only in READ COMMITTED transactions (this one is %v): a lease taken after the transaction's snapshot would be invisible to it",
			locking.ErrNotSupported, r.m.table, method, iso)
	}
	return nil
}

// guardArgs appends the arguments of the guard: the key's columns and the
// expected version.
func (r *Repository[T]) guardArgs(args []any, id any, expected int64) []any {
	return append(r.m.keyArgs(args, id), expected)
}
