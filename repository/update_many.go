package repository

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"reflect"
	"sort"

	"github.com/gormlock/gormlock/locking"
)

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
// It takes Update's options: SkipAssociations, and OpKey, with which the
// batch and the key's record are one transaction, so the batch applies at
// most once however often the call is repeated; a repeat of an applied
// batch writes nothing and loads every entity as its record is now (see
// OpKey for a record deleted since). The key is bound to the batch's
// records (their keys, in any order).
//
// A single UPDATE of many rows (GORM's Model(...).Where(...).Updates) would
// skip the version check of each record; UpdateMany never does.
func (r *Repository[T]) UpdateMany(ctx context.Context, entities []*T, opts ...UpdateOption) error {
	wc, err := updateConfigOf(opts)
	if err != nil {
		return err
	}
	if len(entities) == 0 {
		return nil
	}
	cols, err := r.columnSet(wc.columns, "UpdateMany")
	if err != nil {
		return err
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
		if !wc.skipAssoc {
			if err := r.refuseAssociations(ctx, rv, "UpdateMany", id); err != nil {
				return err
			}
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
	batch := func(ctx context.Context) error {
		var failed []error
		for i := range rows {
			row := &rows[i]
			conds, err := r.before(ctx, h, row.e, row.rv)
			if err != nil {
				return err
			}
			w, err := r.execWrite(ctx, kindUpdate, row.rv, row.id, row.expected, cols, conds)
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
			if err := r.refreshUnversioned(ctx, row.rv, row.id, w.unversioned); err != nil {
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
	}
	restore := func() {
		for _, row := range rows {
			*row.e = row.saved
		}
	}
	if wc.op == nil {
		if err := RunInTx(ctx, r.st.Gorm, batch); err != nil {
			restore()
			return err
		}
		return nil
	}
	// The batch's name in the operation table: a digest of its records'
	// keys, in key order, so that it fits the column whatever the size of
	// the batch.
	digest := sha256.New()
	for _, row := range rows {
		digest.Write([]byte(keyString(row.id)))
		digest.Write([]byte{0})
	}
	batchKey := fmt.Sprintf("batch:%d:%x", len(rows), digest.Sum(nil))
	prior, err := r.runOp(ctx, *wc.op, "update-many", batchKey, func(ctx context.Context) (string, int64, error) {
		if err := batch(ctx); err != nil {
			return "", 0, err
		}
		return batchKey, r.versionOf(ctx, rows[0].rv), nil
	})
	if err != nil {
		restore()
		return err
	}
	if prior != nil {
		// A repeat of an applied batch: every entity as its record is now;
		// the records deleted since, each a *locking.RecordGoneError.
		restore()
		var gone []error
		for i, row := range rows {
			now, err := r.recordNow(ctx, prior, row.id)
			var g *locking.RecordGoneError
			switch {
			case errors.As(err, &g):
				if i > 0 {
					g.Version = 0 // the key records the first record's version only
				}
				gone = append(gone, err) // the entity stays as it was given
				continue
			case err != nil:
				return fmt.Errorf("%s: UpdateMany: id=%v: %w", r.m.table, row.id, err)
			}
			*row.e = *now
		}
		return errors.Join(gone...)
	}
	return nil
}
