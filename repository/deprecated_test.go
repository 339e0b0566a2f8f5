package repository_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gormlock/gormlock/internal/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/repository"
)

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
