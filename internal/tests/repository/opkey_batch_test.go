package repository_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

// Apply with an operation key applies once however often it is repeated,
// also when its condition no longer holds on the repeat, and the key is
// recorded with the write.
func TestApplyWithOpKeyAppliesOnce(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		accounts, _ := repos(t, db)
		a := newAccount(t, accounts, "ann", 10)
		key := repository.OpKey("apply-once-" + db.Dialector.Name())
		// Withdraw 6 if at least 6 are there: a second application would
		// fail the condition, the repeat must not.
		cond := repository.If("balance >= ?", 6)
		first, err := accounts.Apply(ctx, a.ID, []repository.Change{repository.Add("Balance", -6)}, cond, key)
		require.NoError(t, err)
		require.EqualValues(t, 4, first.Balance)
		for range 3 {
			again, err := accounts.Apply(ctx, a.ID, []repository.Change{repository.Add("Balance", -6)}, cond, key)
			require.NoError(t, err, "a repeat of an applied Apply is its first outcome")
			require.EqualValues(t, 4, again.Balance)
			require.Equal(t, first.Version, again.Version)
		}
		requireRow(t, db, a.ID, 4, first.Version)
		op, err := repository.LookupOperation(ctx, db, key.Key())
		require.NoError(t, err)
		require.NotNil(t, op)
		require.Equal(t, "apply", op.Kind)
		require.Equal(t, first.Version, op.Version)

		// The key names that operation: another record, another kind.
		b := newAccount(t, accounts, "bob", 10)
		_, err = accounts.Apply(ctx, b.ID, []repository.Change{repository.Add("Balance", 1)}, key)
		require.ErrorIs(t, err, locking.ErrOperationKeyReused)
		_, err = accounts.Mutate(ctx, a.ID, func(x *fixtures.Account) error { x.Balance++; return nil }, key)
		require.ErrorIs(t, err, locking.ErrOperationKeyReused)
		requireRow(t, db, b.ID, 10, b.Version)

		// A keyed Apply that did not apply records nothing.
		miss := repository.OpKey("apply-miss-" + db.Dialector.Name())
		_, err = accounts.Apply(ctx, a.ID, []repository.Change{repository.Add("Balance", -6)}, cond, miss)
		require.ErrorIs(t, err, locking.ErrConditionFailed)
		op, err = repository.LookupOperation(ctx, db, miss.Key())
		require.NoError(t, err)
		require.Nil(t, op)

		// Inside a transaction the key rolls back with it.
		inTx := repository.OpKey("apply-tx-" + db.Dialector.Name())
		errRollback := errors.New("roll back")
		err = repository.RunInTx(ctx, db, func(ctx context.Context) error {
			if _, err := accounts.Apply(ctx, a.ID, []repository.Change{repository.Add("Balance", 1)}, inTx); err != nil {
				return err
			}
			return errRollback
		})
		require.ErrorIs(t, err, errRollback)
		op, err = repository.LookupOperation(ctx, db, inTx.Key())
		require.NoError(t, err)
		require.Nil(t, op)
		requireRow(t, db, a.ID, 4, first.Version)
	})
}

// UpdateMany with an operation key applies the batch once: a repeat writes
// nothing and loads every entity as its record is now; the key is bound to
// the batch's records.
func TestUpdateManyWithOpKeyAppliesOnce(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		accounts, _ := repos(t, db)
		a := newAccount(t, accounts, "ann", 10)
		b := newAccount(t, accounts, "bob", 20)
		key := repository.OpKey("batch-once-" + db.Dialector.Name())
		a1, b1 := *a, *b
		a1.Balance, b1.Balance = 11, 21
		require.NoError(t, accounts.UpdateMany(ctx, []*fixtures.Account{&a1, &b1}, key))

		// The same call again, from the same stale copies (as a client
		// retrying after an unknown outcome would): nothing written, the
		// entities loaded as they are now.
		a2, b2 := *a, *b
		a2.Balance, b2.Balance = 11, 21
		require.NoError(t, accounts.UpdateMany(ctx, []*fixtures.Account{&b2, &a2}, key), "the batch in another order is the same batch")
		require.Equal(t, a1.Version, a2.Version)
		require.Equal(t, b1.Version, b2.Version)
		requireRow(t, db, a.ID, 11, a1.Version)
		requireRow(t, db, b.ID, 21, b1.Version)

		op, err := repository.LookupOperation(ctx, db, key.Key())
		require.NoError(t, err)
		require.NotNil(t, op)
		require.Equal(t, "update-many", op.Kind)

		// Another batch with the key is refused.
		c := newAccount(t, accounts, "cy", 30)
		c1 := *c
		c1.Balance = 31
		require.ErrorIs(t, accounts.UpdateMany(ctx, []*fixtures.Account{&a1, &c1}, key), locking.ErrOperationKeyReused)
		requireRow(t, db, c.ID, 30, c.Version)

		// A keyed batch that fails records nothing and changes nothing.
		miss := repository.OpKey("batch-miss-" + db.Dialector.Name())
		stale := *a // at its first version
		stale.Balance = 99
		err = accounts.UpdateMany(ctx, []*fixtures.Account{&stale, &c1}, miss)
		var batch *locking.BatchError
		require.ErrorAs(t, err, &batch)
		require.Equal(t, 99, int(stale.Balance), "entities are left as they were given")
		op, err = repository.LookupOperation(ctx, db, miss.Key())
		require.NoError(t, err)
		require.Nil(t, op)
		requireRow(t, db, c.ID, 30, c.Version)
	})
}
