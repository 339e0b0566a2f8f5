package repository

import (
	"context"
	"fmt"
	"reflect"

	"github.com/gormlock/gormlock/internal/dialect"
	"github.com/gormlock/gormlock/internal/store"
	"github.com/gormlock/gormlock/locking"
)

// updateWithLease is Leases.Update on SQLite and MySQL, for a model without
// update hooks, in the transaction of ctx when there is one: a guarded
// UPDATE that also checks the caller's lease (writeHeld) and the end of the
// lease. MySQL does both in one multiple-table UPDATE, which commits by
// itself outside a transaction; SQLite, which updates one table per
// statement, runs the end of the lease after the write, in one transaction
// with it. Checking the lease in the write, rather than ending it first and
// writing through Update's statement with its lease guard, saves a
// sub-select per write, and on MySQL the transaction's four round trips.
func (r *Repository[T]) updateWithLease(ctx context.Context, e *T, l *Lease, id any, expected int64) error {
	rv, err := r.leaseWriteChecks(ctx, e, id, expected)
	if err != nil {
		return err
	}
	hash := hashToken(l.Token)
	multi := r.m.caps.VersionBack == dialect.LastInsertID
	args := make([]any, 0, 2*len(r.m.pks)+len(r.m.setCols)+8)
	if multi {
		args = append(args, r.m.table, l.Key) // the join's condition comes first
	}
	for _, f := range r.m.setCols {
		v, _ := f.ValueOf(ctx, rv)
		args = append(args, v)
	}
	va := &versionArg{prev: expected}
	if multi {
		args = append(args, expected+1) // the floor; the database reads its clock
	} else {
		args = append(args, va)
	}
	w := write{}
	if r.m.updatedAt != nil {
		w.updated = timeValue(r.m.updatedAt, r.now(ctx))
		args = append(args, w.updated)
	}
	args = append(r.m.keyArgs(args, id), expected)
	if !multi {
		args = append(args, r.m.table, l.Key)
	}
	args = append(args, hash, l.Fence)
	var n int64
	if multi {
		n, w.version, err = r.st.ExecResultID(ctx, r.m.leases.writeHeld, args)
	} else {
		n, err = r.st.ExecResult(ctx, r.m.leases.writeHeld, args)
		w.version = va.v
	}
	if err != nil {
		return fmt.Errorf("%s: Leases.Update id=%v: %w", r.m.table, id, err)
	}
	if n == 0 {
		return r.leaseWriteMissed(ctx, r.m.leases.heldBy, l, id, hash, expected)
	}
	if multi {
		if n != 2 {
			// Both rows change when the statement matches (a new
			// version; the token cleared): say so rather than hide it.
			return fmt.Errorf("%s: Leases.Update id=%v: the write changed %d rows, not the record and its lease", r.m.table, id, n)
		}
	} else if n, err = r.st.ExecResult(ctx, r.m.leases.end, []any{r.m.table, l.Key, hash}); err != nil {
		return fmt.Errorf("%s: Leases.Update id=%v: ending the lease: %w", r.m.table, id, err)
	} else if n != 1 {
		// The write checked the lease in this transaction, which holds
		// SQLite's write lock: this cannot happen; say so rather than
		// commit a write whose lease lives on.
		return fmt.Errorf("%s: Leases.Update id=%v: the lease checked by the write was not there to end", r.m.table, id)
	}
	return r.written(ctx, rv, id, w)
}

// leaseWriteChecks checks, before any I/O, what Leases.Update's
// one-statement writes need: no associations to write, and a version
// with a successor. It returns the entity's value.
func (r *Repository[T]) leaseWriteChecks(ctx context.Context, e *T, id any, expected int64) (reflect.Value, error) {
	rv := reflect.ValueOf(e).Elem()
	if err := r.refuseAssociations(ctx, rv, "Update", id); err != nil {
		return rv, err
	}
	if expected >= 1<<63-2 {
		return rv, locking.Invalid("%s: Leases.Update id=%v: version %d has no successor", r.m.table, id, expected)
	}
	return rv, nil
}

// leaseWriteMissed explains a Leases.Update write that changed nothing:
// the lease is gone (asked with held, the dialect's "is the lease still
// held" query), or, the lease still held, the version was stale or the
// record gone.
func (r *Repository[T]) leaseWriteMissed(ctx context.Context, held string, l *Lease, id any, hash string, expected int64) error {
	db, _ := r.st.Conn(ctx)
	var one int
	args := append(r.m.keyArgs([]any{r.m.table, l.Key}, id), hash, l.Fence)
	if r.m.leases.row != nil {
		args = r.rowHeldArgs(nil, l, id)
	}
	err := r.st.ScanSQL(ctx, db.Statement.ConnPool, held, args, &one)
	switch {
	case store.IsNoRows(err):
		return r.leaseRefused(ctx, id, l.Fence, "update")
	case err != nil:
		return fmt.Errorf("%s: Leases.Update id=%v: %w", r.m.table, id, locking.Classify(err))
	}
	return r.checkAffected(ctx, 0, id, expected, "update", liveRows, false, reflect.Value{})
}
