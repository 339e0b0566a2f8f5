package repository

import (
	"context"

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/locking"
)

// The names before the API was regrouped (see "Migrating from the old
// names" in the README). Each is the new call under its old name; they will
// be removed in the next minor version.

// GetLocked is LockRow.
//
// Deprecated: use LockRow.
func (r *Repository[T]) GetLocked(ctx context.Context, id any, opts ...LockOption) (*T, error) {
	return r.LockRow(ctx, id, opts...)
}

// GetManyLocked is LockRows.
//
// Deprecated: use LockRows.
func (r *Repository[T]) GetManyLocked(ctx context.Context, ids []any, opts ...LockOption) ([]T, error) {
	return r.LockRows(ctx, ids, opts...)
}

// MutateLocked is MutateRowLocked.
//
// Deprecated: use MutateRowLocked, and pass lock options to it directly.
func (r *Repository[T]) MutateLocked(ctx context.Context, id any, fn func(*T) error, opts ...MutateOption) (*T, error) {
	locked := make([]LockedMutateOption, len(opts))
	for i, o := range opts {
		locked[i] = o
	}
	return r.MutateRowLocked(ctx, id, fn, locked...)
}

// GetAndLock is Leases().Acquire.
//
// Deprecated: use r.Leases().Acquire.
func (r *Repository[T]) GetAndLock(ctx context.Context, id any, owner string, opts ...LeaseOption) (*T, *Lease, error) {
	return r.Leases().Acquire(ctx, id, owner, opts...)
}

// GetWithLease is Leases().Get.
//
// Deprecated: use r.Leases().Get.
func (r *Repository[T]) GetWithLease(ctx context.Context, id any) (*T, *LeaseState, error) {
	return r.Leases().Get(ctx, id)
}

// Unlock is Leases().Release.
//
// Deprecated: use r.Leases().Release.
func (r *Repository[T]) Unlock(ctx context.Context, l *Lease) error {
	return r.Leases().Release(ctx, l)
}

// Renew is Leases().Renew.
//
// Deprecated: use r.Leases().Renew.
func (r *Repository[T]) Renew(ctx context.Context, l *Lease, opts ...LeaseOption) error {
	return r.Leases().Renew(ctx, l, opts...)
}

// UpdateWithLease is Leases().Update.
//
// Deprecated: use r.Leases().Update.
func (r *Repository[T]) UpdateWithLease(ctx context.Context, e *T, l *Lease) error {
	return r.Leases().Update(ctx, e, l)
}

// DeleteWithLease is Leases().Delete.
//
// Deprecated: use r.Leases().Delete.
func (r *Repository[T]) DeleteWithLease(ctx context.Context, e *T, l *Lease) error {
	return r.Leases().Delete(ctx, e, l)
}

// Sweep is Leases().Sweep.
//
// Deprecated: use r.Leases().Sweep.
func (r *Repository[T]) Sweep(ctx context.Context) (int64, error) {
	return r.Leases().Sweep(ctx)
}

// ReleaseOwner is ReleaseOwnerLeases.
//
// Deprecated: use ReleaseOwnerLeases.
func ReleaseOwner(ctx context.Context, db *gorm.DB, owner string) (int64, error) {
	return ReleaseOwnerLeases(ctx, db, owner)
}

// ParseID is Adapter().ParseID.
//
// Deprecated: use r.Adapter().ParseID.
func (r *Repository[T]) ParseID(s string) (any, error) { return r.Adapter().ParseID(s) }

// Identity is Adapter().Identity.
//
// Deprecated: use r.Adapter().Identity.
func (r *Repository[T]) Identity(e *T) (id any, version int64, zeroID bool) {
	return r.Adapter().Identity(e)
}

// SetIdentity is Adapter().SetIdentity.
//
// Deprecated: use r.Adapter().SetIdentity.
func (r *Repository[T]) SetIdentity(e *T, id any, version int64) error {
	return r.Adapter().SetIdentity(e, id, version)
}

// CopyWritable is Adapter().CopyWritable.
//
// Deprecated: use r.Adapter().CopyWritable.
func (r *Repository[T]) CopyWritable(dst, src *T) error { return r.Adapter().CopyWritable(dst, src) }

// KeyAssignedByDatabase is Adapter().KeyAssignedByDatabase.
//
// Deprecated: use r.Adapter().KeyAssignedByDatabase.
func (r *Repository[T]) KeyAssignedByDatabase() bool { return r.Adapter().KeyAssignedByDatabase() }

// Locking passes lock options to MutateRowLocked.
//
// Deprecated: pass the LockOptions to MutateRowLocked directly:
// MutateRowLocked(ctx, id, fn, NoWait()). Locking still compiles in a
// Mutate call, where it fails at run time.
func Locking(opts ...LockOption) MutateOption {
	return mutateFunc(func(c *mutateConfig) error {
		c.lock = append(c.lock, opts...)
		return nil
	})
}

// Attempts stores in *n how many attempts the call ran.
//
// Deprecated: use Report, which returns the attempts with the rest of what
// the call did.
func Attempts(n *int) MutateOption {
	return mutateFunc(func(c *mutateConfig) error {
		if n == nil {
			return locking.Invalid("Attempts: nil pointer")
		}
		c.attempts = n
		return nil
	})
}
