package repository_test

import (
	"testing"

	"github.com/gormlock/gormlock/internal/tests/fixtures"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
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
		require.Equal(t, name != "ForShare", isLocked, "%s: the wait bounds go to MutateRowLocked, a shared lock does not", name)
	}
	_, permIsUpdate := any(repository.Permanently()).(repository.UpdateOption)
	require.False(t, permIsUpdate, "Permanently must not compile in Update")
	_, skipIsDelete := any(repository.SkipAssociations()).(repository.DeleteOption)
	require.False(t, skipIsDelete, "SkipAssociations must not compile in Delete")
	_, skipIsWrite := any(repository.SkipAssociations()).(repository.WriteOption)
	require.False(t, skipIsWrite, "SkipAssociations must not compile in Create")
	var key repository.WriteOption = repository.OpKey("k")
	_, keyIsUpdate := key.(repository.UpdateOption)
	_, keyIsDelete := key.(repository.DeleteOption)
	require.True(t, keyIsUpdate && keyIsDelete, "OpKey applies to every write")
	for name, opt := range map[string]repository.MutateOption{
		"Retry": repository.Retry(locking.DefaultRetryPolicy()), "Report": repository.Report(&repository.MutateReport{}), "OpKey": repository.OpKey("k"),
	} {
		_, isLocked := any(opt).(repository.LockedMutateOption)
		require.True(t, isLocked, "%s also applies to MutateRowLocked", name)
		_, isLock := any(opt).(repository.LockOption)
		require.False(t, isLock, "%s is not a lock option", name)
	}
	_, limitIsClaim := any(repository.Limit(1)).(repository.ClaimOption)
	require.False(t, limitIsClaim, "Limit must not compile in Claim: its n is the limit")
	for name, opt := range map[string]repository.FindOption{
		"Where": repository.Where("id > ?", 0), "OrderBy": repository.OrderBy("id", false), "Offset": repository.Offset(1),
		"IncludeDeleted": repository.IncludeDeleted(), "Preload": repository.Preload("x"),
	} {
		_, isClaim := any(opt).(repository.ClaimOption)
		require.True(t, isClaim, "%s applies to Claim too", name)
	}
}

// A row-lock conflict and a lease conflict are told apart with errors.Is:
// both match ErrLocked, only the lease matches ErrLeased.
func TestRowLockAndLeaseConflictsAreDistinguishable(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		accounts, err := repository.New[fixtures.Account](db, repository.WithLeases())
		require.NoError(t, err)
		a := newAccount(t, accounts, "ann", 10)
		inc := func(b *fixtures.Account) error { b.Balance++; return nil }

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
