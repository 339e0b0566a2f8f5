package repository

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/gormlock/gormlock/internal/dialect"
	"github.com/gormlock/gormlock/internal/store"
	"github.com/gormlock/gormlock/locking"
)

// needLeases refuses a lease operation on a repository built without
// WithLeases.
func (r *Repository[T]) needLeases(op string) error {
	if r.leases == nil {
		return locking.Invalid("%s: %s: the repository was built without WithLeases", r.m.table, op)
	}
	return nil
}

// leaseTTL returns the TTL a call asks for, or the default, checked against
// the maximum.
func (r *Repository[T]) leaseTTL(op string, opts []LeaseOption) (time.Duration, error) {
	if err := r.needLeases(op); err != nil {
		return 0, err
	}
	c := leaseCall{ttl: r.leases.def}
	if err := applyOpts(opts, &c, LeaseOption.applyLease); err != nil {
		return 0, fmt.Errorf("%s: %s: %w", r.m.table, op, err)
	}
	if c.ttl > r.leases.max {
		return 0, locking.Invalid("%s: %s: lease TTL %v is over the maximum %v", r.m.table, op, c.ttl, r.leases.max)
	}
	return c.ttl, nil
}

// acquire runs the lease's acquire statement with args and scans the lease
// it took into key, fence, acquired and expires; sql.ErrNoRows when it took
// none. Where acquire returns nothing (MySQL), the statement commits by
// itself (outside a transaction) and the lease is read back by the
// record's key and the token hash (a token is 128 random bits, so the row
// holds it only if this call wrote it); a deadlock or, on Galera, a
// certification conflict with another node's acquire (ErrDeadlock, not
// applied) is tried again, twice: the next try sees the winner's lease.
func (r *Repository[T]) acquire(ctx context.Context, id any, args []any, hash string, key *string, fence, acquired, expires *int64) error {
	if r.m.leases.acquireBack == "" {
		return r.st.Exec(ctx, r.m.leases.acquire, args, r.st.QueryRowScan(key, fence, acquired, expires))
	}
	_, inTx := r.st.Pool(ctx)
	var n int64
	var err error
	for try := 1; ; try++ {
		n, err = r.st.ExecResult(ctx, r.m.leases.acquire, args)
		if inTx || try == 3 || !errors.Is(err, locking.ErrDeadlock) || ctx.Err() != nil {
			break
		}
	}
	switch {
	case err != nil:
		return err
	case n == 0:
		return sql.ErrNoRows // no record, or its lease row unchanged: held
	}
	db, _ := r.st.Conn(ctx)
	var k sql.NullString
	var f, a, x sql.NullInt64
	err = r.st.ScanSQL(ctx, db.Statement.ConnPool, r.m.leases.acquireBack, append(r.m.keyArgs(nil, id), r.m.table, hash), &k, &f, &a, &x)
	if store.IsNoRows(err) {
		// The record was deleted since: find the lease by its token, so
		// that Acquire gives it back.
		err = r.st.ScanSQL(ctx, db.Statement.ConnPool, r.m.leases.acquireBackAny, []any{r.m.table, hash}, &k, &f, &a, &x)
	}
	switch {
	case store.IsNoRows(err):
		return err
	case err != nil:
		return locking.Classify(err)
	case !k.Valid:
		return sql.ErrNoRows // the driver counts rows found, not changed
	}
	*key, *fence, *acquired, *expires = k.String, f.Int64, a.Int64, x.Int64
	return nil
}

// leaseState returns the unexpired lease on record id, or nil.
func (r *Repository[T]) leaseState(ctx context.Context, id any) (*LeaseState, error) {
	db, _ := r.st.Conn(ctx)
	var st LeaseState
	var acquired, expires int64
	query, args := r.m.leases.state, r.m.keyArgs([]any{r.m.table}, id)
	if r.m.leases.row != nil {
		query, args = r.m.leases.row.state, r.m.keyArgs(nil, id)
	}
	err := r.st.ScanSQL(ctx, db.Statement.ConnPool, query, args,
		&st.Owner, &st.Fence, &acquired, &expires)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("%s: id=%v: reading its lease: %w", r.m.table, id, locking.Classify(err))
	}
	st.AcquiredAt, st.ExpiresAt = millisTime(acquired), millisTime(expires)
	return &st, nil
}

// leaseRefused explains why a lease operation or a guarded write found no
// row: an unexpired lease someone holds (ErrLeased), or no lease held by the
// caller any more (ErrLeaseExpired). mine is the caller's fence (0 for a
// write without a lease).
func (r *Repository[T]) leaseRefused(ctx context.Context, id any, mine int64, op string) error {
	st, err := r.leaseState(ctx, id)
	if err != nil {
		return err
	}
	le := &locking.LeaseError{Kind: locking.ErrLeased, Table: r.m.table, ID: id, Op: op}
	switch {
	case st != nil:
		// Someone holds the record: another holder, or, when the fence is
		// the caller's own, a wrong token presented with it.
		le.Holder, le.Fence, le.Until = st.Owner, st.Fence, st.ExpiresAt
	case mine != 0:
		le.Kind = locking.ErrLeaseExpired
	}
	// Otherwise a lease refused the operation and has ended since: still
	// refused, and trying again may succeed.
	return le
}

// checkLease validates a lease presented for one of the repository's
// records and returns its key.
func (r *Repository[T]) checkLease(l *Lease, op string) (any, error) {
	if err := r.needLeases(op); err != nil {
		return nil, err
	}
	if l == nil {
		return nil, locking.Invalid("%s: %s: lease is nil", r.m.table, op)
	}
	if l.Table != r.m.table {
		return nil, locking.Invalid("%s: %s: the lease is for table %q", r.m.table, op, l.Table)
	}
	return r.m.normalizeID(l.ID)
}

// release ends lease l in the transaction of ctx, or by itself; the error
// explains a lease that is not held.
func (r *Repository[T]) release(ctx context.Context, l *Lease, op string) error {
	id, err := r.m.normalizeID(l.ID)
	if err != nil {
		return err
	}
	st, args := r.m.leases.release, append(r.m.keyArgs([]any{r.m.table, l.Key}, id), hashToken(l.Token), l.Fence)
	if r.m.leases.row != nil {
		st, args = r.m.leases.row.release, r.rowHeldArgs(nil, l, id)
	}
	n, err := r.st.ExecResult(ctx, st, args)
	if err != nil {
		return fmt.Errorf("%s: %s id=%v: %w", r.m.table, op, l.ID, err)
	}
	if n != 1 {
		return r.leaseRefused(ctx, id, l.Fence, op)
	}
	return nil
}

func (r *Repository[T]) writeWithLease(ctx context.Context, e *T, l *Lease, method string, write func(context.Context, *T) error) (err error) {
	id, err := r.checkLease(l, method)
	if err != nil {
		return err
	}
	if e == nil {
		return locking.Invalid("%s: %s: entity is nil", r.m.table, method)
	}
	if eid, _ := r.idOf(ctx, reflectElem(e)); keyString(eid) != keyString(id) {
		return locking.Invalid("%s: %s: the lease is for id=%v, the entity is id=%v", r.m.table, method, id, eid)
	}
	// Refuse what the write would refuse before ending the lease.
	_, expected, err := r.guardOf(ctx, reflectElem(e), method)
	if err != nil {
		return err
	}
	op, obsOp := "update", OpLeaseUpdate
	if method == "Leases.Delete" {
		op, obsOp = "delete", OpLeaseDelete
	}
	ctx, oc := r.observeLease(ctx, obsOp, id)
	defer func() { oc.end(err) }()
	_, inTx := r.st.Pool(ctx)
	// written is a fast path's update, written: the entity then holds
	// the row's unversioned fields, as after Update.
	written := func(ctx context.Context, err error) error {
		if err != nil {
			return err
		}
		return r.refreshAfterWrite(ctx, reflectElem(e), id, nil)
	}
	if op == "update" && r.m.leases.row != nil && !r.hooksFor(true).on {
		if !inTx {
			return written(ctx, r.updateRow(ctx, e, l, id, expected)) // one statement
		}
		return r.st.SavepointOrRunTx(ctx, r.m.table+": "+method, func(ctx context.Context) error {
			return written(ctx, r.updateRow(ctx, e, l, id, expected))
		})
	}
	if op == "update" && !inTx && r.m.leases.pg != nil && !r.hooksFor(true).on {
		// One statement, committed by itself (see pgLeaseSQL). Inside a
		// transaction the savepoint below keeps a failed write from
		// aborting the caller's transaction.
		return written(ctx, r.updateWithLeasePG(ctx, e, l, id, expected))
	}
	if op == "update" && r.m.leases.writeHeld.Text != "" && !r.hooksFor(true).on {
		if r.m.leases.end.Text == "" && !inTx {
			return written(ctx, r.updateWithLease(ctx, e, l, id, expected)) // one statement (MySQL)
		}
		// Inside a transaction the savepoint keeps a failed write from
		// aborting the caller's transaction.
		return r.st.SavepointOrRunTx(ctx, r.m.table+": "+method, func(ctx context.Context) error {
			return written(ctx, r.updateWithLease(ctx, e, l, id, expected))
		})
	}
	return r.st.SavepointOrRunTx(ctx, r.m.table+": "+method, func(ctx context.Context) error {
		if r.m.caps.Dialector() == dialect.MySQL {
			// Lock the record before the lease row, in the order
			// Leases.Acquire takes them (its INSERT ... SELECT reads the record
			// with a shared lock first): InnoDB would otherwise deadlock
			// the two.
			db, _ := r.st.Conn(ctx)
			var one int
			if err := r.st.ScanSQL(ctx, db.Statement.ConnPool, r.m.rowLockSQL, r.m.keyArgs(nil, id), &one); err != nil && !store.IsNoRows(err) {
				return fmt.Errorf("%s: %s id=%v: %w", r.m.table, method, id, locking.Classify(err))
			}
		}
		if err := r.release(ctx, l, op); err != nil {
			return err
		}
		return write(ctx, e)
	})
}

// acquireRefused explains an acquisition that took no lease: the record is
// missing (or soft-deleted), or someone else holds its lease.
func (r *Repository[T]) acquireRefused(ctx context.Context, id any) error {
	if _, found, deleted, err := r.currentVersion(ctx, id); err != nil {
		return err
	} else if !found || deleted {
		return fmt.Errorf("%s: Leases.Acquire: %w", r.m.table, &locking.NotFoundError{Table: r.m.table, ID: id})
	}
	return r.leaseRefused(ctx, id, 0, "get-and-lock")
}

// fillLease completes a lease just granted on e: its times, and the key
// and version as the record holds them (the database may spell the key
// otherwise than the caller did).
func (r *Repository[T]) fillLease(ctx context.Context, lease *Lease, e *T, acquired, expires int64) {
	lease.AcquiredAt, lease.ExpiresAt = millisTime(acquired), millisTime(expires)
	lease.ID, _ = r.idOf(ctx, reflectElem(e))
	lease.Version = r.versionOf(ctx, reflectElem(e))
}
