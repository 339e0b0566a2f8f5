package repository

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/schema"

	"github.com/gormlock/gormlock/internal/dialect"
	"github.com/gormlock/gormlock/locking"
)

// Create inserts e as a new record and sets its version to the record's
// first version (a clock reading, see "Versions" in the package doc: never a
// version an earlier record with the same key had; whatever version e
// held is ignored), and its creation and update times to now when they are
// zero; times the caller set are kept, converted to UTC with microsecond
// precision (what the databases store). An integer auto-increment key left
// zero is assigned by the database and stored in e; any other key must be
// set. A record with the same key already existing gives an error matching
// locking.ErrAlreadyExists that keeps the driver error. On error e is left
// as it was. Associations are not written.
//
// Outside a transaction the insert commits by itself; an error matching
// locking.ErrCommitUnknown means it may have been applied (see Update).
// With OpKey, repeating the call applies it once: a repeat stores in e the
// record as it is now (see repeated).
func (r *Repository[T]) Create(ctx context.Context, e *T, opts ...WriteOption) error {
	wc, err := writeConfigOf(opts)
	if err != nil {
		return err
	}
	rv, err := r.entityValue(e)
	if err != nil {
		return err
	}
	id, zeroID := r.idOf(ctx, rv)
	if zeroID {
		for _, f := range r.m.pks {
			if _, zero := f.ValueOf(ctx, rv); zero && !f.AutoIncrement && !f.HasDefaultValue {
				return locking.Invalid("%s: Create: primary key %s is empty", r.m.table, f.Name)
			}
		}
	}
	saved := *e
	t := now()
	for _, f := range []*schema.Field{r.m.createdAt, r.m.updatedAt} {
		if f == nil || !isTimeField(f) {
			continue // GORM fills integer (Unix) timestamps itself
		}
		v := f.ReflectValueOf(ctx, rv)
		if v.Kind() == reflect.Pointer {
			if v.IsNil() {
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
		}
		ts := v.Interface().(time.Time)
		if ts.IsZero() {
			ts = t
		}
		// Store what the database keeps (UTC, microseconds), so the entity
		// equals what a later Get returns.
		v.Set(reflect.ValueOf(ts.UTC().Truncate(time.Microsecond)))
	}
	insert := func(ctx context.Context) error { return r.insert(ctx, rv, e) }
	if wc.op == nil {
		err = insert(ctx)
	} else {
		recordKey := ""
		if !zeroID {
			recordKey = keyString(id)
		}
		var prior *Operation
		prior, err = r.runOp(ctx, *wc.op, "create", recordKey, func(ctx context.Context) (string, int64, error) {
			if err := insert(ctx); err != nil {
				return "", 0, err
			}
			key, _ := r.idOf(ctx, rv)
			return keyString(key), r.versionOf(ctx, rv), nil
		})
		if err == nil && prior != nil {
			*e = saved
			err = r.repeated(ctx, rv, prior)
		}
	}
	if err != nil {
		*e = saved
		return fmt.Errorf("%s: Create id=%v: %w", r.m.table, id, r.explainDuplicate(ctx, id, zeroID, err))
	}
	return nil
}

// explainDuplicate adds to a Create's ErrAlreadyExists that the key is held
// by a soft-deleted record, when it is (and can be asked: not inside a
// PostgreSQL transaction the failed INSERT aborted).
func (r *Repository[T]) explainDuplicate(ctx context.Context, id any, zeroID bool, err error) error {
	if r.m.deletedAt == nil || zeroID || !errors.Is(err, locking.ErrAlreadyExists) {
		return err
	}
	if _, inTx := r.conn(ctx); inTx && !r.caps.SingleWriter {
		return err
	}
	if _, found, deleted, verr := r.currentVersion(ctx, id); verr == nil && found && deleted {
		return &softDeletedError{table: r.m.table, id: id, err: err}
	}
	return err
}

// softDeletedError is a Create refused because a soft-deleted record holds
// the key. It matches locking.ErrAlreadyExists and the driver's error.
type softDeletedError struct {
	table string
	id    any
	err   error
}

func (e *softDeletedError) Error() string {
	return fmt.Sprintf("id=%v is held by a soft-deleted record of %s: Restore it (read it with IncludeDeleted), or Delete it with Permanently() before creating it again: %v", e.id, e.table, e.err)
}
func (e *softDeletedError) Unwrap() error { return e.err }

// insert writes e as a new record with its first version, in one
// transaction (the caller's, or one of its own). The first version must be
// above every version an earlier record with the same key had, and a
// version read from a clock before the INSERT runs may not be: the INSERT
// can wait (for the write lock, for a transaction deleting the same key, or
// just for the CPU) while the old record is written once more and deleted.
// So the version is read from the clock once nothing can come in between:
// on SQLite after the transaction took the database's write lock, where the
// dialect has NextVersion from the database's clock after the INSERT is
// through (an UPDATE of the new row in the same transaction).
//
// GORM writes the record's associations in the same transaction, as its
// Create does; associated records whose model has a gormlock version at
// zero get a first version (versionNewAssociations).
func (r *Repository[T]) insert(ctx context.Context, rv reflect.Value, e *T) error {
	write := func(ctx context.Context) error {
		db, _ := r.conn(ctx)
		v, _ := nextVersion(0)
		r.setVersion(ctx, rv, v)
		q := r.on(ctx, db.Statement.ConnPool)
		if len(r.m.assocs) > 0 {
			versionNewAssociations(ctx, r.m.schema, rv, 0)
		}
		if err := locking.Classify(q.Create(e).Error); err != nil {
			noteRolledBack(ctx, r.store, err)
			return err
		}
		if r.m.firstVersionSQL == "" {
			return nil
		}
		id, _ := r.idOf(ctx, rv)
		var err error
		if r.m.caps.VersionBack == dialect.LastInsertID {
			_, v, err = r.execSQLID(ctx, db.Statement.ConnPool, r.m.firstVersionSQL, r.m.keyArgs(nil, id), true)
		} else {
			err = r.scanSQL(ctx, db.Statement.ConnPool, r.m.firstVersionSQL, r.m.keyArgs(nil, id), &v)
		}
		if err != nil {
			return fmt.Errorf("setting the first version: %w", locking.Classify(err))
		}
		r.setVersion(ctx, rv, v)
		return nil
	}
	if _, inTx := r.conn(ctx); inTx {
		return write(ctx)
	}
	return r.runTx(ctx, r.db, nil, lockWait{}, r.m.table+": Create", write)
}

// repeated answers a repeat of an applied operation prior: it stores in
// the entity the record as it is now — what the first call wrote, and any
// later writes — or, when the record is gone since, the key and the version
// the first call gave it.
func (r *Repository[T]) repeated(ctx context.Context, rv reflect.Value, prior *Operation) error {
	id, err := r.parseID(prior.RecordKey)
	if err != nil {
		return err
	}
	if now, err := r.Get(ctx, id, IncludeDeleted()); err == nil {
		rv.Set(reflect.ValueOf(now).Elem())
		return nil
	} else if !errors.Is(err, locking.ErrNotFound) {
		return fmt.Errorf("operation %q was applied; reading the record: %w", prior.Key, err)
	}
	if err := r.m.setKey(ctx, rv, id); err != nil {
		return err
	}
	r.setVersion(ctx, rv, prior.Version)
	return nil
}

// on returns a GORM session of the repository that sends its statements on
// pool (a connection, a transaction) with ctx.
func (r *Repository[T]) on(ctx context.Context, pool gorm.ConnPool) *gorm.DB {
	db := r.db.Session(&gorm.Session{NewDB: true, Context: ctx})
	db.Statement.ConnPool = pool
	return db
}

// Update writes every column of e (zero values included) in one guarded
// statement, UPDATE ... WHERE pk = ? AND version = ?, and on success sets e's
// version to the record's next version (larger than the one it had, see
// "Versions" in the package doc) and its update time. The columns it never
// writes are the primary key, the creation time, the soft-delete time and
// fields GORM may not update (tagged "<-:create", "->" or "-").
//
// When no row matches, it returns a *locking.StaleDataError (errors.Is(err,
// locking.ErrStaleData) is true) if the record exists at another version, or
// an error matching locking.ErrNotFound if it does not exist or is
// soft-deleted. An entity at version 0 (never loaded or created) or with an
// empty key is refused with an error matching locking.ErrInvalidArgument:
// the guard is never turned off. On error e is left as it was.
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
// record as it is now (the first call's write, and any later ones). See
// OpKey and LookupOperation.
func (r *Repository[T]) Update(ctx context.Context, e *T, opts ...WriteOption) error {
	return r.guardedWrite(ctx, e, kindUpdate, opts)
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
	return r.guardedWrite(ctx, e, kindBump, opts)
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
	return r.guardedWrite(ctx, e, kindRestore, opts)
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

func (m *meta) stmtOf(k writeKind) stmt {
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
func (r *Repository[T]) guardedWrite(ctx context.Context, e *T, kind writeKind, opts []WriteOption) error {
	method := writeKinds[kind].method
	wc, err := writeConfigOf(opts)
	if err != nil {
		return err
	}
	if wc.permanently {
		return locking.Invalid("%s: %s: Permanently applies to Delete only", r.m.table, method)
	}
	rv, err := r.entityValue(e)
	if err != nil {
		return err
	}
	id, expected, err := r.guardOf(ctx, rv, method)
	if err != nil {
		return err
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
		if err := r.before(ctx, h, e, rv); err != nil {
			return 0, err
		}
		w, err := r.execWrite(ctx, kind, rv, id, expected)
		if err != nil {
			return 0, err
		}
		if err := r.written(ctx, rv, id, w); err != nil {
			return 0, err
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
	if _, inTx := r.conn(ctx); hooked && !inTx {
		return nil, r.runTx(ctx, r.db, nil, lockWait{}, r.m.table+": "+writeKinds[kind].method, func(ctx context.Context) error {
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
}

// execWrite runs one guarded UPDATE of the record in rv (of the kind given)
// and returns what it wrote, without changing the entity. No matching row
// gives a *locking.StaleDataError or a *locking.NotFoundError, unwrapped
// (wrapped when the record is soft-deleted).
func (r *Repository[T]) execWrite(ctx context.Context, kind writeKind, rv reflect.Value, id any, expected int64) (write, error) {
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
		for _, f := range r.m.setCols {
			v, _ := f.ValueOf(ctx, rv)
			args = append(args, v)
		}
	case kindSoftDelete:
		w.deleted = &gorm.DeletedAt{Time: now(), Valid: true}
		args = append(args, w.deleted.Time)
	case kindRestore:
		w.deleted = &gorm.DeletedAt{}
	}
	va := &versionArg{prev: expected}
	if r.m.caps.NextVersion != "" {
		args = append(args, expected+1) // the floor; the database reads its clock
	} else {
		args = append(args, va)
	}
	if r.m.updatedAt != nil && (kind == kindUpdate || kind == kindBump) {
		w.updated = timeValue(r.m.updatedAt, now())
		args = append(args, w.updated)
	}
	args = r.guardArgs(args, id, expected)
	s := r.m.stmtOf(kind)
	var n int64
	var err error
	switch r.m.caps.VersionBack {
	case dialect.Returning:
		err = r.exec(ctx, s, args, r.queryRowScan(&w.version))
		if n = 1; isNoRows(err) {
			n, err = 0, nil
		}
	case dialect.LastInsertID:
		n, w.version, err = r.execResultID(ctx, s, args)
	default:
		n, err = r.execResult(ctx, s, args)
		w.version = va.v
	}
	if err != nil {
		return write{}, fmt.Errorf("%s: %s id=%v: %w", r.m.table, k.method, id, err)
	}
	return w, r.checkAffected(ctx, n, id, expected, k.op, k.rows)
}

// versionArg is the version a write gives a record, computed by the
// process (where the dialect has no NextVersion) when the driver sends the
// statement: database/sql converts arguments once it holds the connection,
// and SQLite's write-lock loop sends again on every attempt. So the clock is
// read as late as possible — after the write lock was free — and a record
// created again after a delete gets a version above the deleted one's. v
// is the value last sent.
//
// Each send reads the clock once (sending marks it pending); any other
// call of Value — GORM's logger explaining the statement — returns the
// value sent.
type versionArg struct {
	prev    int64
	v       int64
	pending bool
}

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

// UpdateMany is Update for a batch, all or nothing: it writes every entity
// with its own guarded statement inside one transaction (a savepoint when ctx
// already carries one), in primary-key order so that two batches over the
// same records never deadlock. When any record is stale or gone, nothing is
// written and the error is a *locking.BatchError listing exactly those
// records (it matches locking.ErrStaleData and/or locking.ErrNotFound); no
// entity is changed in memory. On success every entity is at its new version.
// A nil entity, an entity that Update would refuse, or the same record twice
// gives an error matching locking.ErrInvalidArgument before any I/O. An empty
// batch does nothing. Update's hooks run for every entity, in the
// transaction; an error from one rolls the batch back.
//
// A single UPDATE of many rows (GORM's Model(...).Where(...).Updates) would
// skip the version check of each record; UpdateMany never does.
func (r *Repository[T]) UpdateMany(ctx context.Context, entities []*T) error {
	if len(entities) == 0 {
		return nil
	}
	type row struct {
		e        *T
		saved    T
		rv       reflect.Value
		id       any
		expected int64
	}
	rows := make([]row, len(entities))
	for i, e := range entities {
		if e == nil {
			return locking.Invalid("%s: UpdateMany: entity %d is nil", r.m.table, i)
		}
		rv := reflect.ValueOf(e).Elem()
		id, expected, err := r.guardOf(ctx, rv, "UpdateMany")
		if err != nil {
			return err
		}
		if err := r.refuseAssociations(ctx, rv, "UpdateMany", id); err != nil {
			return err
		}
		rows[i] = row{e: e, saved: *e, rv: rv, id: id, expected: expected}
	}
	sort.SliceStable(rows, func(i, j int) bool { return compareKeys(rows[i].id, rows[j].id) < 0 })
	for i := 1; i < len(rows); i++ {
		if compareKeys(rows[i-1].id, rows[i].id) == 0 {
			return locking.Invalid("%s: UpdateMany: id=%v appears twice in the batch", r.m.table, rows[i].id)
		}
	}
	h := r.hooksFor(true)
	err := RunInTx(ctx, r.db, func(ctx context.Context) error {
		var failed []error
		for i := range rows {
			row := &rows[i]
			if err := r.before(ctx, h, row.e, row.rv); err != nil {
				return err
			}
			w, err := r.execWrite(ctx, kindUpdate, row.rv, row.id, row.expected)
			var stale *locking.StaleDataError
			var missing *locking.NotFoundError
			switch {
			case errors.As(err, &stale) || errors.As(err, &missing):
				failed = append(failed, err)
				continue
			case err != nil:
				return err
			}
			if err := r.written(ctx, row.rv, row.id, w); err != nil {
				return err
			}
			if err := r.after(ctx, h, row.e, row.rv); err != nil {
				return err
			}
		}
		if len(failed) > 0 {
			return &locking.BatchError{Table: r.m.table, Op: "update", Total: len(rows), Failed: failed}
		}
		return nil
	})
	if err != nil {
		for _, row := range rows {
			*row.e = row.saved
		}
		return err
	}
	return nil
}

// Delete removes the record of e with one guarded statement, DELETE ...
// WHERE pk = ? AND version = ?, and reports a mismatch exactly as Update
// does: a *locking.StaleDataError when the record is at another version, an
// error matching locking.ErrNotFound when it does not exist, and
// locking.ErrInvalidArgument for an entity at version 0 or without a key.
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
func (r *Repository[T]) Delete(ctx context.Context, e *T, opts ...WriteOption) error {
	wc, err := writeConfigOf(opts)
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
	saved := *e
	prior, err := r.runWrite(ctx, wc, h.on, kindSoftDelete, id, func(ctx context.Context) (int64, error) {
		if err := r.before(ctx, h, e, rv); err != nil {
			return 0, err
		}
		var version int64
		if soft {
			w, err := r.execWrite(ctx, kindSoftDelete, rv, id, expected)
			if err != nil {
				return 0, err
			}
			if err := r.written(ctx, rv, id, w); err != nil {
				return 0, err
			}
			version = w.version
		} else {
			n, err := r.execResult(ctx, r.m.delete, r.guardArgs(make([]any, 0, len(r.m.pks)+2), id, expected))
			if err != nil {
				return 0, fmt.Errorf("%s: Delete id=%v: %w", r.m.table, id, err)
			}
			if err := r.checkAffected(ctx, n, id, expected, "delete", anyRows); err != nil {
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
	if v <= 0 {
		return nil, 0, locking.Invalid("%s: %s id=%v: version is %d; a guarded write needs the version the record was read at (load it with Get or create it with Create)", r.m.table, op, id, v)
	}
	return id, v, nil
}

// currentVersion reads the version of record id, in the transaction of ctx
// if there is one; found is false when it does not exist, deleted true when
// it is soft-deleted.
func (r *Repository[T]) currentVersion(ctx context.Context, id any) (version int64, found, deleted bool, err error) {
	db, inTx := r.conn(ctx)
	query := r.m.versionSQL
	if inTx {
		query = r.m.versionSQLInTx
	}
	err = r.scanSQL(ctx, db.Statement.ConnPool, query, r.m.keyArgs(nil, id), &version, &deleted)
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
func (r *Repository[T]) checkAffected(ctx context.Context, n int64, id any, expected int64, op string, rows rowState) error {
	if n == 1 {
		return nil
	}
	if n > 1 {
		// Only possible when the table lacks the primary key constraint the
		// model declares; the statement is already applied.
		return fmt.Errorf("%s: %s id=%v matched %d rows: the table's primary key %s is not unique", r.m.table, op, id, n, r.m.keyNames())
	}
	actual, found, deleted, err := r.currentVersion(ctx, id)
	switch {
	case err != nil:
		return fmt.Errorf("%s: %s matched no row (not applied): %w", r.m.table, op, err)
	case !found:
		return &locking.NotFoundError{Table: r.m.table, ID: id}
	case deleted && rows == liveRows:
		return fmt.Errorf("%s: %s id=%v: the record is soft-deleted (read it with IncludeDeleted, Restore brings it back): %w",
			r.m.table, op, id, &locking.NotFoundError{Table: r.m.table, ID: id})
	case actual != expected:
		return &locking.StaleDataError{Table: r.m.table, ID: id, Expected: expected, Actual: actual, Op: op}
	case !deleted && rows == deletedRows:
		return locking.Invalid("%s: %s id=%v: the record is not deleted", r.m.table, op, id)
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

// checkIsolation refuses a lease-guarded write inside a PostgreSQL
// transaction that reads from one snapshot for its whole length (REPEATABLE
// READ, SERIALIZABLE): the lease check would not see a lease taken after the
// snapshot, and taking a lease does not touch the record, so the database
// would not report the conflict either.
func (r *Repository[T]) checkIsolation(ctx context.Context, method string) error {
	if r.m.leases == nil || r.m.caps.Name != dialect.Postgres {
		return nil
	}
	st, ok := ctx.Value(txKey{}).(*txState)
	if !ok || st.sqlDB != r.sqlDB {
		return nil
	}
	switch st.iso {
	case sql.LevelRepeatableRead, sql.LevelSnapshot, sql.LevelSerializable, sql.LevelLinearizable:
		return fmt.Errorf("%w: %s: %s: a repository WithLeases writes only in READ COMMITTED transactions (this one is %v): a lease taken after the transaction's snapshot would be invisible to it",
			locking.ErrNotSupported, r.m.table, method, st.iso)
	}
	return nil
}

// guardArgs appends the arguments of the guard: the key's columns and the
// expected version.
func (r *Repository[T]) guardArgs(args []any, id any, expected int64) []any {
	return append(r.m.keyArgs(args, id), expected)
}
