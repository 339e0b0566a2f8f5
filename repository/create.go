package repository

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/schema"

	"github.com/gormlock/gormlock/internal/dialect"
	"github.com/gormlock/gormlock/internal/store"
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
// as it was. Associations the entity holds are written as GORM writes them,
// in the same transaction (a failing child leaves no parent).
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
	t := r.now(ctx)
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
	if _, inTx := r.st.Pool(ctx); inTx && !r.st.Caps.SingleWriter {
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
		db, _ := r.st.Conn(ctx)
		v, _ := nextVersion(0)
		r.setVersion(ctx, rv, v)
		// On SQLite GORM's statements run to their end (see store.Detach).
		sctx, err := r.st.Detach(ctx)
		if err != nil {
			return err
		}
		q := r.on(sctx, db.Statement.ConnPool)
		if len(r.m.assocs) > 0 {
			versionNewAssociations(ctx, r.m.schema, rv, 0)
		}
		if err := locking.Classify(q.Create(e).Error); err != nil {
			store.NoteRolledBack(ctx, r.st, err)
			return err
		}
		if r.m.firstVersionSQL == "" {
			return nil
		}
		id, _ := r.idOf(ctx, rv)
		if r.m.caps.VersionBack == dialect.LastInsertID {
			_, v, err = r.st.ExecSQLID(ctx, db.Statement.ConnPool, r.m.firstVersionSQL, r.m.keyArgs(nil, id), true)
		} else {
			err = r.st.ScanSQL(ctx, db.Statement.ConnPool, r.m.firstVersionSQL, r.m.keyArgs(nil, id), &v)
		}
		if err != nil {
			return fmt.Errorf("setting the first version: %w", locking.Classify(err))
		}
		r.setVersion(ctx, rv, v)
		return nil
	}
	return r.st.JoinOrRunTx(ctx, r.m.table+": Create", write)
}

// repeated answers a repeat of an applied operation prior: it stores in
// the entity the record as it is now — what the first call wrote, and any
// later writes. A record deleted since gives a *locking.RecordGoneError
// (see recordNow), except for a repeated delete, whose outcome that is: a
// soft delete's entity then holds the record as it is now, deleted, or,
// once it is gone for good, the key and the version the delete gave it.
func (r *Repository[T]) repeated(ctx context.Context, rv reflect.Value, prior *Operation) error {
	id, err := r.parseID(prior.RecordKey)
	if err != nil {
		return err
	}
	if prior.Kind != writeKinds[kindSoftDelete].opKind {
		now, err := r.recordNow(ctx, prior, id)
		if err != nil {
			return err
		}
		rv.Set(reflect.ValueOf(now).Elem())
		return nil
	}
	if now, err := r.Get(ctx, id, IncludeDeleted()); err == nil {
		rv.Set(reflect.ValueOf(now).Elem())
		return nil
	} else if !errors.Is(err, locking.ErrNotFound) {
		return locking.Unknown(fmt.Errorf("operation %q was applied; reading the record: %w", prior.Key, err))
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
	db := r.st.Gorm.Session(&gorm.Session{NewDB: true, Context: ctx})
	db.Statement.ConnPool = pool
	return db
}
