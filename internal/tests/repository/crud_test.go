package repository_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gormlock/gormlock/internal/tests/fixtures"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

func TestCreate(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		accounts, docs := repos(t, db)

		a := &fixtures.Account{Owner: "ann", Balance: 10}
		a.Version = 42 // ignored: a new record's version is a clock reading
		before := time.Now().UnixMicro()
		require.NoError(t, accounts.Create(ctx, a))
		require.NotZero(t, a.ID)
		require.GreaterOrEqual(t, a.Version, before, "the first version is the creation time in microseconds")
		require.False(t, a.CreatedAt.IsZero())
		require.True(t, a.CreatedAt.Equal(a.UpdatedAt))
		balance, version, found := rawAccount(t, db, a.ID)
		require.True(t, found)
		require.EqualValues(t, 10, balance)
		require.Equal(t, a.Version, version)

		d := &fixtures.Document{ID: "doc-1", Title: "t", Attrs: map[string]string{"a_field": "a_value"}}
		require.NoError(t, docs.Create(ctx, d))
		require.Greater(t, d.Version, a.Version, "versions never repeat in a process")
		got, err := docs.Get(ctx, "doc-1")
		require.NoError(t, err)
		require.Equal(t, d.Attrs, got.Attrs)
		require.True(t, d.CreatedAt.Equal(got.CreatedAt), "in-memory %v, stored %v", d.CreatedAt, got.CreatedAt)
		require.True(t, d.UpdatedAt.Equal(got.UpdatedAt))
	})
}

func TestCreateDuplicateKeepsCause(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		_, docs := repos(t, db)
		require.NoError(t, docs.Create(ctx, &fixtures.Document{ID: "dup", Title: "first"}))

		second := &fixtures.Document{ID: "dup", Title: "second"}
		err := docs.Create(ctx, second)
		require.ErrorIs(t, err, locking.ErrAlreadyExists)
		var dbErr *locking.DatabaseError
		require.ErrorAs(t, err, &dbErr)
		require.NotNil(t, dbErr.Err, "driver error kept")
		require.Contains(t, []string{"23505", "SQLITE_CONSTRAINT_PRIMARYKEY", "1062"}, dbErr.Code)
		require.ErrorContains(t, err, "id=dup")
		// The failed create leaves the entity as it was.
		require.EqualValues(t, 0, second.Version)
		require.True(t, second.CreatedAt.IsZero())

		got, err := docs.Get(ctx, "dup")
		require.NoError(t, err)
		require.Equal(t, "first", got.Title)
	})
}

func TestCreateRefusesEmptyKey(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		_, docs := repos(t, db)
		err := docs.Create(context.Background(), &fixtures.Document{Title: "no id"})
		require.ErrorIs(t, err, locking.ErrInvalidArgument)
		require.ErrorContains(t, err, "primary key ID is empty")
		require.ErrorIs(t, docs.Create(context.Background(), nil), locking.ErrInvalidArgument)
	})
}

func TestGet(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		accounts, docs := repos(t, db)
		a := newAccount(t, accounts, "ann", 7)

		got, err := accounts.Get(ctx, a.ID)
		require.NoError(t, err)
		require.Equal(t, a.Owner, got.Owner)
		require.Equal(t, a.Balance, got.Balance)
		require.Equal(t, a.Version, got.Version)

		got, err = accounts.Get(ctx, int32(a.ID)) // any integer type for an integer key
		require.NoError(t, err)
		require.Equal(t, a.ID, got.ID)

		_, err = accounts.Get(ctx, a.ID+1000)
		require.ErrorIs(t, err, locking.ErrNotFound)
		var nf *locking.NotFoundError
		require.ErrorAs(t, err, &nf)
		require.Equal(t, "accounts", nf.Table)
		require.Equal(t, a.ID+1000, nf.ID)

		_, err = docs.Get(ctx, "missing")
		require.ErrorIs(t, err, locking.ErrNotFound)

		for _, bad := range []any{nil, "1", 0, int64(0), 1.5} {
			_, err = accounts.Get(ctx, bad)
			require.ErrorIs(t, err, locking.ErrInvalidArgument, "id %#v", bad)
		}
		_, err = docs.Get(ctx, 1)
		require.ErrorIs(t, err, locking.ErrInvalidArgument)
		require.ErrorContains(t, err, "has type int")
		_, err = docs.Get(ctx, "")
		require.ErrorIs(t, err, locking.ErrInvalidArgument)
	})
}

func TestUpdate(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		accounts, _ := repos(t, db)
		a := newAccount(t, accounts, "ann", 10)
		before := a.UpdatedAt

		v1 := a.Version
		a.Balance = 25
		require.NoError(t, accounts.Update(ctx, a))
		require.Greater(t, a.Version, v1, "in-memory version advanced")
		require.False(t, a.UpdatedAt.Before(before))
		requireRow(t, db, a.ID, 25, a.Version)

		got, err := accounts.Get(ctx, a.ID)
		require.NoError(t, err)
		require.True(t, got.UpdatedAt.Equal(a.UpdatedAt), "in-memory %v, stored %v", a.UpdatedAt, got.UpdatedAt)
		require.True(t, got.CreatedAt.Equal(a.CreatedAt), "created_at is never rewritten")
	})
}

func TestUpdateWritesZeroValues(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		accounts, docs := repos(t, db)
		a := &fixtures.Account{Owner: "ann", Balance: 10, Frozen: true}
		require.NoError(t, accounts.Create(ctx, a))

		v1 := a.Version
		a.Owner, a.Balance, a.Frozen = "", 0, false
		require.NoError(t, accounts.Update(ctx, a))
		got, err := accounts.Get(ctx, a.ID)
		require.NoError(t, err)
		require.Equal(t, "", got.Owner)
		require.EqualValues(t, 0, got.Balance)
		require.False(t, got.Frozen)
		require.Equal(t, a.Version, got.Version)
		require.Greater(t, got.Version, v1)

		d := &fixtures.Document{ID: "z", Title: "t", Attrs: map[string]string{"k": "v"}}
		require.NoError(t, docs.Create(ctx, d))
		d.Attrs = map[string]string{}
		d.Title = ""
		require.NoError(t, docs.Update(ctx, d))
		gd, err := docs.Get(ctx, "z")
		require.NoError(t, err)
		require.Empty(t, gd.Attrs)
		require.Equal(t, "", gd.Title)
	})
}

func TestUpdateStale(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		accounts, _ := repos(t, db)
		a := newAccount(t, accounts, "ann", 10)
		first, err := accounts.Get(ctx, a.ID)
		require.NoError(t, err)
		second, err := accounts.Get(ctx, a.ID)
		require.NoError(t, err)

		first.Balance = 11
		require.NoError(t, accounts.Update(ctx, first))

		second.Balance = 99
		err = accounts.Update(ctx, second)
		require.ErrorIs(t, err, locking.ErrStaleData)
		var stale *locking.StaleDataError
		require.ErrorAs(t, err, &stale)
		require.Equal(t, locking.StaleDataError{Table: "accounts", ID: a.ID, Expected: a.Version, Actual: first.Version, Op: "update"}, *stale)
		require.Equal(t, a.Version, second.Version, "a failed write leaves the entity's version alone")

		requireRow(t, db, a.ID, 11, first.Version, "the stale write changed nothing")
	})
}

func TestUpdateAfterForeignWriter(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		accounts, _ := repos(t, db)
		a := newAccount(t, accounts, "ann", 10)
		held, err := accounts.Get(ctx, a.ID)
		require.NoError(t, err)

		// Someone outside the repository changes the row and bumps the version.
		require.NoError(t, db.Exec("UPDATE accounts SET balance = balance + 5, version = version + 1 WHERE id = ?", a.ID).Error)

		held.Balance = 1000
		err = accounts.Update(ctx, held)
		var stale *locking.StaleDataError
		require.ErrorAs(t, err, &stale)
		require.Equal(t, a.Version, stale.Expected)
		require.Equal(t, a.Version+1, stale.Actual)
		balance, _, _ := rawAccount(t, db, a.ID)
		require.EqualValues(t, 15, balance, "the foreign write survives")
	})
}

func TestUpdateOfDeletedRowIsNotFound(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		accounts, _ := repos(t, db)
		a := newAccount(t, accounts, "ann", 10)
		require.NoError(t, db.Exec("DELETE FROM accounts WHERE id = ?", a.ID).Error)

		a.Balance = 1
		err := accounts.Update(ctx, a)
		require.ErrorIs(t, err, locking.ErrNotFound)
		require.False(t, errors.Is(err, locking.ErrStaleData), "a gone record is not stale data")
		_, _, found := rawAccount(t, db, a.ID)
		require.False(t, found, "no upsert brought the row back")
	})
}

func TestUpdateRefusesUnguardedWrites(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		accounts, _ := repos(t, db)
		a := newAccount(t, accounts, "ann", 10)

		for _, v := range []int64{-1, -3} {
			e := *a
			e.Version = v
			e.Balance = 500
			err := accounts.Update(ctx, &e)
			require.ErrorIs(t, err, locking.ErrInvalidArgument)
			require.ErrorContains(t, err, fmt.Sprintf("version is %d", v))
			require.ErrorIs(t, accounts.Delete(ctx, &e), locking.ErrInvalidArgument)
		}
		// Version 0 matches only a record a legacy writer left at 0 or
		// NULL: this one has a real version, so it is stale.
		zero := *a
		zero.Version = 0
		zero.Balance = 500
		var stale *locking.StaleDataError
		require.ErrorAs(t, accounts.Update(ctx, &zero), &stale)
		require.Zero(t, stale.Expected)
		require.Equal(t, a.Version, stale.Actual)
		require.ErrorIs(t, accounts.Delete(ctx, &zero), locking.ErrStaleData)
		noKey := *a
		noKey.ID = 0
		require.ErrorIs(t, accounts.Update(ctx, &noKey), locking.ErrInvalidArgument)
		require.ErrorIs(t, accounts.Update(ctx, nil), locking.ErrInvalidArgument)

		balance, version, found := rawAccount(t, db, a.ID)
		require.True(t, found)
		require.EqualValues(t, 10, balance, "nothing was written")
		require.Equal(t, a.Version, version)
	})
}

func TestDelete(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		accounts, _ := repos(t, db)
		a := newAccount(t, accounts, "ann", 10)
		stale := *a
		require.NoError(t, accounts.Update(ctx, a))

		err := accounts.Delete(ctx, &stale)
		var se *locking.StaleDataError
		require.ErrorAs(t, err, &se)
		require.Equal(t, locking.StaleDataError{Table: "accounts", ID: a.ID, Expected: stale.Version, Actual: a.Version, Op: "delete"}, *se)
		_, _, found := rawAccount(t, db, a.ID)
		require.True(t, found, "a stale delete deletes nothing")

		require.NoError(t, accounts.Delete(ctx, a))
		_, _, found = rawAccount(t, db, a.ID)
		require.False(t, found)

		err = accounts.Delete(ctx, a)
		require.ErrorIs(t, err, locking.ErrNotFound)
		require.False(t, errors.Is(err, locking.ErrStaleData))
	})
}

func TestTaggedVersionWithStringKey(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		require.NoError(t, db.AutoMigrate(&tagged{}))
		r, err := repository.New[tagged](db)
		require.NoError(t, err)
		require.NoError(t, r.VerifySchema(ctx))

		e := &tagged{Code: "c1", Note: "x"}
		require.NoError(t, r.Create(ctx, e))
		require.Positive(t, e.Rev)
		other := *e
		e.Note = "y"
		require.NoError(t, r.Update(ctx, e))
		require.Greater(t, e.Rev, other.Rev)
		other.Note = "z"
		require.ErrorIs(t, r.Update(ctx, &other), locking.ErrStaleData)
		got, err := r.Get(ctx, "c1")
		require.NoError(t, err)
		require.Equal(t, "y", got.Note)
		require.NoError(t, r.Delete(ctx, got))
	})
}

func TestFind(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		accounts, _ := repos(t, db)
		for i := range 10 {
			owner := "ann"
			if i%2 == 1 {
				owner = "bob"
			}
			newAccount(t, accounts, owner, int64(i%3))
		}

		anns, err := accounts.Find(ctx, repository.Where("owner = ?", "ann"))
		require.NoError(t, err)
		require.Len(t, anns, 5)

		// Pages in a stable order cover every record exactly once.
		seen := map[int64]int{}
		var order []int64
		for off := 0; ; off += 3 {
			page, err := accounts.Find(ctx, repository.OrderBy("balance", true), repository.Limit(3), repository.Offset(off))
			require.NoError(t, err)
			if len(page) == 0 {
				break
			}
			for _, a := range page {
				seen[a.ID]++
				order = append(order, a.Balance)
			}
		}
		require.Len(t, seen, 10)
		for id, n := range seen {
			require.Equal(t, 1, n, "id %d", id)
		}
		for i := 1; i < len(order); i++ {
			require.GreaterOrEqual(t, order[i-1], order[i], "descending balance")
		}

		rest, err := accounts.Find(ctx, repository.Offset(8)) // offset without limit
		require.NoError(t, err)
		require.Len(t, rest, 2)

		none, err := accounts.Find(ctx, repository.Where("owner = ?", "nobody"))
		require.NoError(t, err)
		require.NotNil(t, none)
		require.Empty(t, none)

		byField, err := accounts.Find(ctx, repository.OrderBy("Owner", false), repository.Limit(1))
		require.NoError(t, err)
		require.Equal(t, "ann", byField[0].Owner)

		for _, opt := range []repository.FindOption{
			repository.OrderBy("balance; DROP TABLE accounts", false),
			repository.Limit(0),
			repository.Offset(-1),
			repository.Where("  "),
		} {
			_, err := accounts.Find(ctx, opt)
			require.ErrorIs(t, err, locking.ErrInvalidArgument)
		}
	})
}

func TestTimestampsAreStoredAsWritten(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		accounts, _ := repos(t, db)
		a := newAccount(t, accounts, "ann", 1)
		time.Sleep(2 * time.Millisecond) // let the clock move so updated_at must change
		prev := a.UpdatedAt
		require.NoError(t, accounts.Update(ctx, a))
		require.True(t, a.UpdatedAt.After(prev))
		got, err := accounts.Get(ctx, a.ID)
		require.NoError(t, err)
		require.True(t, got.UpdatedAt.Equal(a.UpdatedAt))
	})
}
