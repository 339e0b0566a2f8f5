package repository_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/repository"
)

// The option families: an option is accepted only by the calls it applies
// to. Go checks this at compile time; these assertions pin which option
// implements which family, so a change that lets NoWait() into Mutate or
// Limit into Claim fails here.
func TestOptionFamilies(t *testing.T) {
	for name, opt := range map[string]repository.LockOption{
		"NoWait": repository.NoWait(), "LockTimeout": repository.LockTimeout(1), "ForShare": repository.ForShare(),
	} {
		_, isMutate := any(opt).(repository.MutateOption)
		require.False(t, isMutate, "%s must not compile in Mutate or Upsert", name)
		_, isLocked := any(opt).(repository.LockedMutateOption)
		require.True(t, isLocked, "%s goes straight to MutateRowLocked", name)
	}
	for name, opt := range map[string]repository.MutateOption{
		"Retry": repository.Retry(locking.DefaultRetryPolicy()), "Report": repository.Report(&repository.MutateReport{}), "OpKey": repository.OpKey("k"),
	} {
		_, isLocked := any(opt).(repository.LockedMutateOption)
		require.True(t, isLocked, "%s also applies to MutateRowLocked", name)
		_, isLock := any(opt).(repository.LockOption)
		require.False(t, isLock, "%s is not a lock option", name)
	}
	for name, opt := range map[string]repository.FindOption{"Limit": repository.Limit(1), "Offset": repository.Offset(1)} {
		_, isClaim := any(opt).(repository.ClaimOption)
		require.False(t, isClaim, "%s must not compile in Claim: its n is the limit", name)
	}
	for name, opt := range map[string]repository.FindOption{"Where": repository.Where("id > ?", 0), "OrderBy": repository.OrderBy("id", false)} {
		_, isClaim := any(opt).(repository.ClaimOption)
		require.True(t, isClaim, "%s applies to Claim too", name)
	}
}

// A row-lock conflict and a lease conflict are told apart with errors.Is:
// both match ErrLocked, only the lease matches ErrLeased.
func TestRowLockAndLeaseConflictsAreDistinguishable(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		accounts, err := repository.New[models.Account](db, repository.WithLeases())
		require.NoError(t, err)
		a := newAccount(t, accounts, "ann", 10)
		inc := func(b *models.Account) error { b.Balance++; return nil }

		h := holdLock(t, db, accounts, a.ID, nil)
		_, err = accounts.MutateRowLocked(ctx, a.ID, inc, repository.NoWait())
		require.ErrorIs(t, err, locking.ErrLocked)
		require.NotErrorIs(t, err, locking.ErrLeased, "a row lock is not a lease")
		require.NoError(t, h.stop())

		_, lease, err := accounts.Leases().Acquire(ctx, a.ID, "alice")
		require.NoError(t, err)
		_, err = accounts.Mutate(ctx, a.ID, inc)
		require.ErrorIs(t, err, locking.ErrLeased)
		require.ErrorIs(t, err, locking.ErrLocked, "a lease is a lock too")
		_, _, err = accounts.Leases().Acquire(ctx, a.ID, "bob")
		require.ErrorIs(t, err, locking.ErrLeased)
		require.NoError(t, accounts.Leases().Release(ctx, lease))
		requireRow(t, db, a.ID, 10, a.Version, "nothing was written while locked or leased")
	})
}

// The old names still work, each as its new name.
func TestDeprecatedNamesCallTheNewOnes(t *testing.T) {
	db := testdb.Open(t, "sqlite")
	ctx := testdb.Ctx(t)
	docs, err := repository.New[models.Document](db, repository.WithLeases())
	require.NoError(t, err)
	accounts, err := repository.New[models.Account](db)
	require.NoError(t, err)
	a := newAccount(t, accounts, "ann", 10)
	require.NoError(t, docs.Create(ctx, &models.Document{ID: "d1", Title: "t"}))

	var n int
	got, err := accounts.MutateLocked(ctx, a.ID, func(b *models.Account) error { b.Balance++; return nil },
		repository.Locking(repository.NoWait()), repository.Attempts(&n))
	require.NoError(t, err)
	require.Equal(t, int64(11), got.Balance)
	require.Equal(t, 1, n)
	require.NoError(t, repository.RunInTx(ctx, db, func(ctx context.Context) error {
		if _, err := accounts.GetLocked(ctx, a.ID); err != nil {
			return err
		}
		_, err := accounts.GetManyLocked(ctx, []any{a.ID})
		return err
	}))

	d, l, err := docs.GetAndLock(ctx, "d1", "alice")
	require.NoError(t, err)
	_, _, err = docs.GetAndLock(ctx, "d1", "bob")
	require.ErrorIs(t, err, locking.ErrLocked, "old callers checking ErrLocked still see a lease conflict")
	_, st, err := docs.GetWithLease(ctx, "d1")
	require.NoError(t, err)
	require.Equal(t, "alice", st.Owner)
	require.NoError(t, docs.Renew(ctx, l))
	d.Title = "u"
	require.NoError(t, docs.UpdateWithLease(ctx, d, l))
	_, l, err = docs.GetAndLock(ctx, "d1", "alice")
	require.NoError(t, err)
	require.NoError(t, docs.Unlock(ctx, l))
	_, _, err = docs.GetAndLock(ctx, "d1", "alice")
	require.NoError(t, err)
	released, err := repository.ReleaseOwner(ctx, db, "alice")
	require.NoError(t, err)
	require.EqualValues(t, 1, released)
	d, l, err = docs.GetAndLock(ctx, "d1", "carol")
	require.NoError(t, err)
	require.NoError(t, docs.DeleteWithLease(ctx, d, l))
	swept, err := docs.Sweep(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, swept)

	id, err := accounts.ParseID("7")
	require.NoError(t, err)
	require.Equal(t, int64(7), id)
	gotID, _, zero := accounts.Identity(a)
	require.Equal(t, a.ID, gotID)
	require.False(t, zero)
	var b models.Account
	require.NoError(t, accounts.SetIdentity(&b, int64(3), 5))
	require.Equal(t, int64(3), b.ID)
	require.NoError(t, accounts.CopyWritable(&b, a))
	require.Equal(t, "ann", b.Owner)
	require.True(t, accounts.KeyAssignedByDatabase())
}
