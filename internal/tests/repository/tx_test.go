package repository_test

import (
	"context"
	"errors"
	"testing"

	"github.com/gormlock/gormlock/internal/tests/fixtures"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

func TestRunInTxCommitsAllRepositories(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		accounts, docs := repos(t, db)
		a := newAccount(t, accounts, "ann", 10)
		d := &fixtures.Document{ID: "d", Title: "t"}
		require.NoError(t, docs.Create(ctx, d))

		err := repository.RunInTx(ctx, db, func(ctx context.Context) error {
			require.True(t, repository.InTx(ctx))
			a.Balance = 20
			if err := accounts.Update(ctx, a); err != nil {
				return err
			}
			d.Title = "changed"
			return docs.Update(ctx, d)
		})
		require.NoError(t, err)
		requireRow(t, db, a.ID, 20, a.Version)
		got, err := docs.Get(ctx, "d")
		require.NoError(t, err)
		require.Equal(t, "changed", got.Title)
	})
}

func TestRunInTxStaleSecondWriteRollsBackFirst(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		accounts, docs := repos(t, db)
		a := newAccount(t, accounts, "ann", 10)
		d := &fixtures.Document{ID: "d", Title: "t"}
		require.NoError(t, docs.Create(ctx, d))
		created := a.Version
		// Someone else moves the document on, so our copy is stale.
		require.NoError(t, db.Exec("UPDATE documents SET version = version + 1 WHERE id = 'd'").Error)

		err := repository.RunInTx(ctx, db, func(ctx context.Context) error {
			a.Balance = 999
			if err := accounts.Update(ctx, a); err != nil {
				return err
			}
			d.Title = "mine"
			return docs.Update(ctx, d)
		})
		var stale *locking.StaleDataError
		require.ErrorAs(t, err, &stale)
		require.Equal(t, "documents", stale.Table)

		requireRow(t, db, a.ID, 10, created, "the first write was rolled back")
	})
}

func TestRunInTxRollsBackOnPanic(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		accounts, _ := repos(t, db)
		a := newAccount(t, accounts, "ann", 10)
		created := a.Version
		require.PanicsWithValue(t, "boom", func() {
			_ = repository.RunInTx(ctx, db, func(ctx context.Context) error {
				a.Balance = 0
				require.NoError(t, accounts.Update(ctx, a))
				panic("boom")
			})
		})
		requireRow(t, db, a.ID, 10, created)
	})
}

func TestRunInTxNestedUsesSavepoint(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		accounts, _ := repos(t, db)
		a := newAccount(t, accounts, "ann", 10)
		b := newAccount(t, accounts, "bob", 10)
		created := b.Version
		errInner := errors.New("inner fails")

		err := repository.RunInTx(ctx, db, func(ctx context.Context) error {
			a.Balance = 11
			require.NoError(t, accounts.Update(ctx, a))
			inner := repository.RunInTx(ctx, db, func(ctx context.Context) error {
				b.Balance = 99
				require.NoError(t, accounts.Update(ctx, b))
				return errInner
			})
			require.ErrorIs(t, inner, errInner)
			return nil
		})
		require.NoError(t, err)
		balance, _, _ := rawAccount(t, db, a.ID)
		require.EqualValues(t, 11, balance, "outer write committed")
		requireRow(t, db, b.ID, 10, created, "inner write rolled back to the savepoint")
	})
}

func TestRunInTxRefusesBadArguments(t *testing.T) {
	db := testdb.SQLite(t)
	require.ErrorIs(t, repository.RunInTx(context.Background(), nil, func(context.Context) error { return nil }), locking.ErrInvalidArgument)
	require.ErrorIs(t, repository.RunInTx(context.Background(), db, nil), locking.ErrInvalidArgument)
}

// A transaction of one database is not used by a repository of another.
func TestRunInTxIgnoresOtherDatabases(t *testing.T) {
	ctx := context.Background()
	db1 := testdb.Open(t, "sqlite")
	db2 := testdb.Open(t, "sqlite")
	acc2, err := repository.New[fixtures.Account](db2)
	require.NoError(t, err)
	a := newAccount(t, acc2, "ann", 10)
	err = repository.RunInTx(ctx, db1, func(ctx context.Context) error {
		a.Balance = 20
		require.NoError(t, acc2.Update(ctx, a))
		return errors.New("roll back db1")
	})
	require.Error(t, err)
	balance, _, _ := rawAccount(t, db2, a.ID)
	require.EqualValues(t, 20, balance, "db2's write is not part of db1's transaction")
}

// When RunInTx returns, its transaction has ended on the server: a caller
// that cancels its context after a write finds the row free the moment
// RunInTx returns. database/sql rolls back a transaction whose context
// ended in a goroutine of its own, and the call used to return while the
// session was still idle in transaction, holding the row's lock.
func TestRunInTxReturnsAfterTheTransactionEnded(t *testing.T) {
	for _, d := range []string{"postgres", "mariadb"} {
		t.Run(d, func(t *testing.T) {
			db := testdb.Open(t, d)
			accounts, _ := repos(t, db)
			a := newAccount(t, accounts, "ann", 0)
			const runs = 100
			held := 0
			for i := range runs {
				ctx, cancel := context.WithCancel(context.Background())
				err := repository.RunInTx(ctx, db, func(ctx context.Context) error {
					_, err := accounts.Apply(ctx, a.ID, []repository.Change{repository.Add("Balance", 1)})
					if err != nil {
						return err
					}
					cancel() // the caller gives up after the write
					return ctx.Err()
				})
				require.ErrorIs(t, err, context.Canceled, "run %d", i)
				err = repository.RunInTx(context.Background(), db, func(ctx context.Context) error {
					_, err := accounts.LockRow(ctx, a.ID, repository.NoWait())
					return err
				})
				if errors.Is(err, locking.ErrLocked) {
					held++
				} else {
					require.NoError(t, err, "run %d", i)
				}
			}
			require.Zero(t, held, "of %d runs, RunInTx returned while the cancelled transaction still held the row", runs)
			requireRow(t, db, a.ID, 0, a.Version)
		})
	}
}
