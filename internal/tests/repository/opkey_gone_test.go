package repository_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

// requireGone checks that err answers a repeat of an applied operation
// whose record was deleted since: a *locking.RecordGoneError naming the
// operation and the version it wrote, and nothing that reads as "not
// applied", "unknown" or "gave up".
func requireGone(t *testing.T, err error, key, kind string, id any, version int64) {
	t.Helper()
	require.ErrorIs(t, err, locking.ErrRecordGone)
	var gone *locking.RecordGoneError
	require.ErrorAs(t, err, &gone)
	assert.Equal(t, locking.RecordGoneError{Table: "accounts", ID: id, Key: key, Kind: kind, Version: version}, *gone)
	for _, not := range []error{locking.ErrCommitUnknown, locking.ErrRetriesExhausted, locking.ErrNotFound, locking.ErrStaleData} {
		assert.NotErrorIs(t, err, not)
	}
}

// A keyed call repeated after its first call was applied answers from the
// key at once, for every keyed write alike; when the record has been
// deleted since, with a *locking.RecordGoneError (issue 27, item 5: Apply
// and Mutate spent 10 attempts and returned ErrCommitUnknown and
// ErrRetriesExhausted).
func TestOpKeyRepeatAfterDelete(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		accounts, _ := repos(t, db)
		del := func(id int64) {
			t.Helper()
			require.NoError(t, db.Exec("DELETE FROM accounts WHERE id = ?", id).Error)
		}
		inc := func(a *fixtures.Account) error { a.Balance++; return nil }

		t.Run("Apply", func(t *testing.T) {
			a := newAccount(t, accounts, "a", 10)
			first, err := accounts.Apply(ctx, a.ID, []repository.Change{repository.Add("Balance", 5)}, repository.OpKey("gone-apply"))
			require.NoError(t, err)
			// Before the delete the repeat returns the record as it is now.
			again, err := accounts.Apply(ctx, a.ID, []repository.Change{repository.Add("Balance", 5)}, repository.OpKey("gone-apply"))
			require.NoError(t, err)
			assert.Equal(t, first.Version, again.Version)
			assert.EqualValues(t, 15, again.Balance)
			del(a.ID)
			got, err := accounts.Apply(ctx, a.ID, []repository.Change{repository.Add("Balance", 5)}, repository.OpKey("gone-apply"))
			assert.Nil(t, got)
			requireGone(t, err, "gone-apply", "apply", a.ID, first.Version)
		})
		for _, locked := range []bool{false, true} {
			name, kind := "Mutate", "mutate"
			call := func(id int64, opts ...repository.MutateOption) (*fixtures.Account, error) {
				return accounts.Mutate(ctx, id, inc, opts...)
			}
			if locked {
				name = "MutateRowLocked"
				call = func(id int64, opts ...repository.MutateOption) (*fixtures.Account, error) {
					lo := make([]repository.LockedMutateOption, len(opts))
					for i, o := range opts {
						lo[i] = o.(repository.LockedMutateOption)
					}
					return accounts.MutateRowLocked(ctx, id, inc, lo...)
				}
			}
			t.Run(name, func(t *testing.T) {
				a := newAccount(t, accounts, "m", 10)
				key := "gone-" + name
				first, err := call(a.ID, repository.OpKey(key))
				require.NoError(t, err)
				del(a.ID)
				var rep repository.MutateReport
				got, err := call(a.ID, repository.OpKey(key), repository.Report(&rep))
				assert.Nil(t, got)
				requireGone(t, err, key, kind, a.ID, first.Version)
				assert.Equal(t, 1, rep.Attempts, "answered at once, not retried")
				// Without the key the same call is not found.
				_, err = call(a.ID)
				require.ErrorIs(t, err, locking.ErrNotFound)
			})
		}
		t.Run("Upsert", func(t *testing.T) {
			mk := func() *fixtures.Account { return &fixtures.Account{Owner: "u"} }
			first, err := accounts.Upsert(ctx, int64(7001), mk, inc, repository.OpKey("gone-upsert"))
			require.NoError(t, err)
			del(7001)
			var rep repository.MutateReport
			got, err := accounts.Upsert(ctx, int64(7001), mk, inc, repository.OpKey("gone-upsert"), repository.Report(&rep))
			assert.Nil(t, got)
			requireGone(t, err, "gone-upsert", "upsert", int64(7001), first.Version)
			assert.Equal(t, 1, rep.Attempts)
			_, _, found := rawAccount(t, db, 7001)
			assert.False(t, found, "the repeat did not create the record again")
		})
		t.Run("Update", func(t *testing.T) {
			a := newAccount(t, accounts, "x", 10)
			first, second := *a, *a
			first.Balance, second.Balance = 20, 20
			require.NoError(t, accounts.Update(ctx, &first, repository.OpKey("gone-update")))
			del(a.ID)
			err := accounts.Update(ctx, &second, repository.OpKey("gone-update"))
			requireGone(t, err, "gone-update", "update", a.ID, first.Version)
			assert.Equal(t, a.Version, second.Version, "on error the entity is left as it was")
		})
		t.Run("UpdateMany", func(t *testing.T) {
			a, b := newAccount(t, accounts, "p", 1), newAccount(t, accounts, "q", 2)
			batch := func() []*fixtures.Account {
				x, y := *a, *b
				x.Balance, y.Balance = 11, 12
				return []*fixtures.Account{&x, &y}
			}
			first := batch()
			require.NoError(t, accounts.UpdateMany(ctx, first, repository.OpKey("gone-many")))
			del(b.ID)
			second := batch()
			err := accounts.UpdateMany(ctx, second, repository.OpKey("gone-many"))
			// b is second in key order: the key records a's version only.
			requireGone(t, err, "gone-many", "update-many", b.ID, 0)
			assert.Equal(t, first[0].Version, second[0].Version, "the record still there is loaded as it is now")
			assert.EqualValues(t, 11, second[0].Balance)
			assert.Equal(t, b.Version, second[1].Version, "the gone record's entity is left as given")
			// Both gone: both reported.
			del(a.ID)
			err = accounts.UpdateMany(ctx, batch(), repository.OpKey("gone-many"))
			var ids []any
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				var g *locking.RecordGoneError
				require.True(t, errors.As(e, &g))
				ids = append(ids, g.ID)
			}
			assert.Equal(t, []any{a.ID, b.ID}, ids)
		})
		t.Run("Delete still returns nil", func(t *testing.T) {
			a := newAccount(t, accounts, "d", 10)
			first, second := *a, *a
			require.NoError(t, accounts.Delete(ctx, &first, repository.OpKey("gone-delete")))
			require.NoError(t, accounts.Delete(ctx, &second, repository.OpKey("gone-delete")))
		})
	})
}
