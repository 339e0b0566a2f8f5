package repository

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"

	"github.com/gormlock/gormlock/locking"
)

// Create inserts e as a new record at version 1 (whatever version e held)
// and sets its creation and update times to now when they are zero; times the
// caller set are kept, converted to UTC with microsecond precision (what the
// databases store). An integer auto-increment key left zero is assigned by the
// database and stored in e; any other key must be set. A record with the same
// key already existing gives an error matching locking.ErrAlreadyExists that
// keeps the driver error. On error e is left as it was. Associations are not
// written.
func (r *Repository[T]) Create(ctx context.Context, e *T) error {
	rv, err := r.entityValue(e)
	if err != nil {
		return err
	}
	id, zeroID := r.idOf(ctx, rv)
	if zeroID && !r.m.pk.AutoIncrement && !r.m.pk.HasDefaultValue {
		return locking.Invalid("%s: Create: primary key %s is empty", r.m.table, r.m.pk.Name)
	}
	saved := *e
	r.setVersion(ctx, rv, 1)
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
	db, _ := r.conn(ctx)
	if err := db.WithContext(ctx).Omit(clause.Associations).Create(e).Error; err != nil {
		*e = saved
		return fmt.Errorf("%s: Create id=%v: %w", r.m.table, id, r.translate(err, id))
	}
	return nil
}

// Update writes every column of e (zero values included) in one guarded
// statement, UPDATE ... WHERE pk = ? AND version = ?, and on success advances
// e's version by one and sets its update time. The columns it never writes are
// the primary key, the creation time and fields GORM may not update (tagged
// "<-:create", "->" or "-").
//
// When no row matches, it returns a *locking.StaleDataError (errors.Is(err,
// locking.ErrStaleData) is true) if the record exists at another version, or
// an error matching locking.ErrNotFound if it is gone. An entity at version 0
// (never loaded or created) or with an empty key is refused with an error
// matching locking.ErrInvalidArgument: the guard is never turned off. On error
// e is left as it was.
func (r *Repository[T]) Update(ctx context.Context, e *T) error {
	rv, err := r.entityValue(e)
	if err != nil {
		return err
	}
	id, expected, err := r.guardOf(ctx, rv, "Update")
	if err != nil {
		return err
	}
	t := now()
	args := make([]any, 0, len(r.m.setCols)+4)
	for _, f := range r.m.setCols {
		v, _ := f.ValueOf(ctx, rv)
		args = append(args, v)
	}
	args = append(args, expected+1)
	var tv any
	if r.m.updatedAt != nil {
		tv = timeValue(r.m.updatedAt, t)
		args = append(args, tv)
	}
	args = append(args, id, expected)

	db, _ := r.conn(ctx)
	res, err := db.Statement.ConnPool.ExecContext(ctx, r.m.updateSQL, args...)
	if err != nil {
		return fmt.Errorf("%s: Update id=%v: %w", r.m.table, id, r.translate(err, id))
	}
	if err := r.checkAffected(ctx, db, res, id, expected, "update"); err != nil {
		return err
	}
	r.setVersion(ctx, rv, expected+1)
	if r.m.updatedAt != nil {
		if err := r.m.updatedAt.Set(ctx, rv, tv); err != nil {
			return fmt.Errorf("%s: Update id=%v: written, but setting %s in memory failed: %w", r.m.table, id, r.m.updatedAt.Name, err)
		}
	}
	return nil
}

// Delete removes the record of e with one guarded statement, DELETE ...
// WHERE pk = ? AND version = ?, and reports a mismatch exactly as Update
// does: a *locking.StaleDataError when the record is at another version, an
// error matching locking.ErrNotFound when it is gone, and
// locking.ErrInvalidArgument for an entity at version 0 or without a key.
func (r *Repository[T]) Delete(ctx context.Context, e *T) error {
	rv, err := r.entityValue(e)
	if err != nil {
		return err
	}
	id, expected, err := r.guardOf(ctx, rv, "Delete")
	if err != nil {
		return err
	}
	db, _ := r.conn(ctx)
	res, err := db.Statement.ConnPool.ExecContext(ctx, r.m.deleteSQL, id, expected)
	if err != nil {
		return fmt.Errorf("%s: Delete id=%v: %w", r.m.table, id, r.translate(err, id))
	}
	return r.checkAffected(ctx, db, res, id, expected, "delete")
}

// guardOf returns the key and version a guarded write needs, refusing an
// empty key or a version that is not positive.
func (r *Repository[T]) guardOf(ctx context.Context, rv reflect.Value, op string) (any, int64, error) {
	id, zero := r.idOf(ctx, rv)
	if zero {
		return nil, 0, locking.Invalid("%s: %s: primary key %s is empty", r.m.table, op, r.m.pk.Name)
	}
	v := r.versionOf(ctx, rv)
	if v <= 0 {
		return nil, 0, locking.Invalid("%s: %s id=%v: version is %d; a guarded write needs the version the record was read at (load it with Get or create it with Create)", r.m.table, op, id, v)
	}
	return id, v, nil
}

// currentVersion reads the version of record id; found is false when it
// does not exist.
func (r *Repository[T]) currentVersion(ctx context.Context, db *gorm.DB, id any) (version int64, found bool, err error) {
	err = db.Statement.ConnPool.QueryRowContext(ctx, r.m.versionSQL, id).Scan(&version)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("%s: id=%v: reading its version: %w", r.m.table, id, locking.Classify(err))
	}
	return version, true, nil
}

// checkAffected turns "no row matched" into StaleDataError or NotFoundError
// by reading the record's current version.
func (r *Repository[T]) checkAffected(ctx context.Context, db *gorm.DB, res sql.Result, id any, expected int64, op string) error {
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("%s: %s id=%v: rows affected: %w", r.m.table, op, id, err)
	}
	if n == 1 {
		return nil
	}
	if n > 1 {
		// Only possible when the table lacks the primary key constraint the
		// model declares; the statement is already applied.
		return fmt.Errorf("%s: %s id=%v matched %d rows: the table's primary key %s is not unique", r.m.table, op, id, n, r.m.pk.DBName)
	}
	actual, found, err := r.currentVersion(ctx, db, id)
	switch {
	case err != nil:
		return fmt.Errorf("%s: %s matched no row: %w", r.m.table, op, err)
	case !found:
		return &locking.NotFoundError{Table: r.m.table, ID: id}
	}
	return &locking.StaleDataError{Table: r.m.table, ID: id, Expected: expected, Actual: actual, Op: op}
}
