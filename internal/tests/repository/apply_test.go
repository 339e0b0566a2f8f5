package repository_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gormlock/gormlock/internal/tests/fixtures"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

func TestApply(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		accounts, _ := repos(t, db)
		a := newAccount(t, accounts, "ann", 10)

		got, err := accounts.Apply(ctx, a.ID, []repository.Change{repository.Add("Balance", 5)})
		require.NoError(t, err)
		assert.Equal(t, int64(15), got.Balance)
		assert.Equal(t, "ann", got.Owner)
		assert.Greater(t, got.Version, a.Version)
		assert.True(t, got.UpdatedAt.After(a.UpdatedAt) || got.UpdatedAt.Equal(a.UpdatedAt))
		balance, version, _ := rawAccount(t, db, a.ID)
		assert.Equal(t, int64(15), balance)
		assert.Equal(t, got.Version, version, "the returned row is the one written")

		// Several changes, by field or column name, and an expression.
		got, err = accounts.Apply(ctx, a.ID, []repository.Change{
			repository.Expr("balance", "balance * ?", 2), repository.SetTo("Owner", "bob"),
		})
		require.NoError(t, err)
		assert.Equal(t, int64(30), got.Balance)
		assert.Equal(t, "bob", got.Owner)

		// The guard: If holds, or nothing is written.
		_, err = accounts.Apply(ctx, a.ID, []repository.Change{repository.Add("Balance", -31)}, repository.If("balance >= ?", 31))
		require.ErrorIs(t, err, locking.ErrConditionFailed)
		balance, v2, _ := rawAccount(t, db, a.ID)
		assert.Equal(t, int64(30), balance)
		assert.Equal(t, got.Version, v2, "a failed condition writes nothing")
		got, err = accounts.Apply(ctx, a.ID, []repository.Change{repository.Add("Balance", -30)}, repository.If("balance >= ?", 30), repository.If("owner = ?", "bob"))
		require.NoError(t, err)
		assert.Equal(t, int64(0), got.Balance)

		// A holder of the old version is stale.
		a.Balance = 1000
		require.ErrorIs(t, accounts.Update(ctx, a), locking.ErrStaleData)

		// Missing record.
		_, err = accounts.Apply(ctx, int64(987654), []repository.Change{repository.Add("Balance", 1)})
		require.ErrorIs(t, err, locking.ErrNotFound)
		_, err = accounts.Apply(ctx, int64(987654), []repository.Change{repository.Add("Balance", 1)}, repository.If("balance > 0"))
		require.ErrorIs(t, err, locking.ErrNotFound, "a missing record is not a failed condition")

		// In a transaction, rolled back with it.
		err = repository.RunInTx(ctx, db, func(ctx context.Context) error {
			got, err := accounts.Apply(ctx, a.ID, []repository.Change{repository.Add("Balance", 7)})
			require.NoError(t, err)
			assert.Equal(t, int64(7), got.Balance)
			return errRollback
		})
		require.ErrorIs(t, err, errRollback)
		balance, _, _ = rawAccount(t, db, a.ID)
		assert.Equal(t, int64(0), balance)
	})
}

var errRollback = &rollbackError{}

type rollbackError struct{}

func (*rollbackError) Error() string { return "roll back" }

// Bad changes are refused before any I/O, naming the problem.
func TestApplyRefusesBadInput(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		accounts, _ := repos(t, db)
		a := newAccount(t, accounts, "ann", 10)
		for name, c := range map[string]struct {
			changes []repository.Change
			opts    []repository.ApplyOption
			want    string
		}{
			"no changes":             {nil, nil, "no changes"},
			"unknown field":          {[]repository.Change{repository.Add("Nope", 1)}, nil, `no field or column "Nope"`},
			"the version":            {[]repository.Change{repository.Add("Version", 1)}, nil, "Version cannot be changed"},
			"the key":                {[]repository.Change{repository.SetTo("ID", 2)}, nil, "ID cannot be changed"},
			"the update time":        {[]repository.Change{repository.SetTo("UpdatedAt", nil)}, nil, "UpdatedAt cannot be changed"},
			"twice":                  {[]repository.Change{repository.Add("Balance", 1), repository.Add("balance", 1)}, nil, "changed twice"},
			"a second statement":     {[]repository.Change{repository.Expr("Balance", "1; DELETE FROM accounts")}, nil, "';'"},
			"a comment":              {[]repository.Change{repository.Expr("Balance", "1 -- x")}, nil, "comment"},
			"placeholders mismatch":  {[]repository.Change{repository.Expr("Balance", "balance + ?")}, nil, "1 placeholders and 0 arguments"},
			"a condition with ';'":   {[]repository.Change{repository.Add("Balance", 1)}, []repository.ApplyOption{repository.If("1=1; DELETE FROM accounts")}, "';'"},
			"an empty condition":     {[]repository.Change{repository.Add("Balance", 1)}, []repository.ApplyOption{repository.If(" ")}, "empty condition"},
			"condition placeholders": {[]repository.Change{repository.Add("Balance", 1)}, []repository.ApplyOption{repository.If("balance > ?")}, "1 placeholders and 0 arguments"},
		} {
			_, err := accounts.Apply(ctx, a.ID, c.changes, c.opts...)
			require.ErrorIs(t, err, locking.ErrInvalidArgument, name)
			assert.Contains(t, err.Error(), c.want, name)
		}
		balance, version, _ := rawAccount(t, db, a.ID)
		assert.Equal(t, int64(10), balance)
		assert.Equal(t, a.Version, version)
	})
}

// Concurrent Apply(Add) calls on one hot record lose nothing and never
// retry; a read followed by SetTo of the value read — the same change made
// from a read — loses increments.
func TestApplyLosesNoIncrement(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		accounts, _ := repos(t, db)
		a := newAccount(t, accounts, "ann", 0)
		b := newAccount(t, accounts, "bob", 0)
		const workers, each = 8, 25
		var ok atomic.Int64
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for range each {
					if _, err := accounts.Apply(ctx, a.ID, []repository.Change{repository.Add("Balance", 1)}); assert.NoError(t, err) {
						ok.Add(1)
					}
				}
			})
		}
		wg.Wait()
		balance, _, _ := rawAccount(t, db, a.ID)
		require.Equal(t, int64(workers*each), ok.Load())
		assert.Equal(t, ok.Load(), balance, "final balance == successful increments")

		lostUpdateRounds(t, workers, func() int64 {
			x, err := accounts.Get(ctx, b.ID)
			if !assert.NoError(t, err) {
				return 0
			}
			return x.Balance
		}, func(v int64) {
			_, err := accounts.Apply(ctx, b.ID, []repository.Change{repository.SetTo("Balance", v)})
			assert.NoError(t, err)
		})
		lost, _, _ := rawAccount(t, db, b.ID)
		assert.Equal(t, int64(3), lost, "a change computed from a read loses all but one increment of each round")
	})
}

// With leases on, Apply refuses a record someone has leased, like every
// guarded write, and writes it once the lease is over.
func TestApplyRespectsLeases(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		accounts, err := repository.New[fixtures.Account](db, repository.WithLeases())
		require.NoError(t, err)
		a := newAccount(t, accounts, "ann", 10)
		_, lease, err := accounts.Leases().Acquire(ctx, a.ID, "someone")
		require.NoError(t, err)
		_, err = accounts.Apply(ctx, a.ID, []repository.Change{repository.Add("Balance", 1)})
		require.ErrorIs(t, err, locking.ErrLocked)
		var le *locking.LeaseError
		require.ErrorAs(t, err, &le)
		assert.Equal(t, "someone", le.Holder)
		balance, version, _ := rawAccount(t, db, a.ID)
		assert.Equal(t, int64(10), balance)
		assert.Equal(t, a.Version, version)

		require.NoError(t, accounts.Leases().Release(ctx, lease))
		got, err := accounts.Apply(ctx, a.ID, []repository.Change{repository.Add("Balance", 1)})
		require.NoError(t, err)
		assert.Equal(t, int64(11), got.Balance)
	})
}
