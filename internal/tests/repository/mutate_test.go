package repository_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gormlock/gormlock/internal/tests/fixtures"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

func fastRetry(attempts int) locking.RetryPolicy {
	return locking.RetryPolicy{MaxAttempts: attempts, BaseDelay: 0, MaxDelay: 0}
}

func TestMutate(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		accounts, _ := repos(t, db)
		a := newAccount(t, accounts, "ann", 10)

		var rep repository.MutateReport
		got, err := accounts.Mutate(ctx, a.ID, func(a *fixtures.Account) error {
			a.Balance += 5
			return nil
		}, repository.Report(&rep))
		require.NoError(t, err)
		require.Equal(t, 1, rep.Attempts)
		require.EqualValues(t, 15, got.Balance)
		require.Greater(t, got.Version, a.Version)
		requireRow(t, db, a.ID, 15, got.Version)
	})
}

func TestMutateRetriesFromAFreshRead(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		accounts, _ := repos(t, db)
		a := newAccount(t, accounts, "ann", 10)

		calls := 0
		var rep repository.MutateReport
		got, err := accounts.Mutate(ctx, a.ID, func(a *fixtures.Account) error {
			calls++
			if calls <= 2 { // a foreign writer gets in between our read and write, twice
				require.NoError(t, db.Exec("UPDATE accounts SET balance = balance + 100, version = version + 1 WHERE id = ?", a.ID).Error)
			}
			a.Balance++
			return nil
		}, repository.Report(&rep), repository.Retry(fastRetry(5)))
		require.NoError(t, err)
		require.Equal(t, 3, calls)
		require.Equal(t, 3, rep.Attempts)
		require.EqualValues(t, 211, got.Balance, "both foreign writes and ours are kept")
		require.Greater(t, got.Version, a.Version+2, "after the two foreign writes")
	})
}

func TestMutateGivesUpAfterMaxAttempts(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		accounts, _ := repos(t, db)
		a := newAccount(t, accounts, "ann", 10)

		calls := 0
		_, err := accounts.Mutate(ctx, a.ID, func(a *fixtures.Account) error {
			calls++
			require.NoError(t, db.Exec("UPDATE accounts SET version = version + 1 WHERE id = ?", a.ID).Error)
			a.Balance = -1
			return nil
		}, repository.Retry(fastRetry(3)))
		require.Equal(t, 3, calls)
		require.ErrorIs(t, err, locking.ErrStaleData)
		require.ErrorIs(t, err, locking.ErrRetriesExhausted)
		var ex *locking.RetryExhaustedError
		require.ErrorAs(t, err, &ex)
		require.Equal(t, 3, ex.Attempts)
		require.ErrorContains(t, err, "after 3 attempts")
		requireRow(t, db, a.ID, 10, a.Version+3)
	})
}

// The repository's default policy makes DefaultMaxAttempts attempts.
func TestMutateDefaultAttempts(t *testing.T) {
	db := testdb.Open(t, "sqlite")
	accounts, err := repository.New[fixtures.Account](db)
	require.NoError(t, err)
	a := newAccount(t, accounts, "ann", 10)
	calls := 0
	_, err = accounts.Mutate(context.Background(), a.ID, func(a *fixtures.Account) error {
		calls++
		return db.Exec("UPDATE accounts SET version = version + 1 WHERE id = ?", a.ID).Error
	})
	require.ErrorIs(t, err, locking.ErrStaleData)
	require.Equal(t, locking.DefaultMaxAttempts, calls)
}

func TestMutateAbortsOnFnError(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		accounts, _ := repos(t, db)
		a := newAccount(t, accounts, "ann", 10)
		errInsufficient := errors.New("insufficient funds")

		calls := 0
		got, err := accounts.Mutate(ctx, a.ID, func(a *fixtures.Account) error {
			calls++
			a.Balance -= 50
			return errInsufficient
		})
		require.Nil(t, got)
		require.Same(t, errInsufficient, err, "fn's error is returned as is")
		require.Equal(t, 1, calls)
		requireRow(t, db, a.ID, 10, a.Version)
	})
}

func TestMutateErrors(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		accounts, _ := repos(t, db)
		a := newAccount(t, accounts, "ann", 10)
		noop := func(*fixtures.Account) error { return nil }

		_, err := accounts.Mutate(ctx, a.ID+99, noop)
		require.ErrorIs(t, err, locking.ErrNotFound)
		_, err = accounts.Mutate(ctx, a.ID, nil)
		require.ErrorIs(t, err, locking.ErrInvalidArgument)
		_, err = accounts.Mutate(ctx, "x", noop)
		require.ErrorIs(t, err, locking.ErrInvalidArgument)
		_, err = accounts.Mutate(ctx, a.ID, noop, repository.Retry(locking.RetryPolicy{MaxAttempts: 0}))
		require.ErrorIs(t, err, locking.ErrInvalidArgument)
		_, err = accounts.Mutate(ctx, a.ID, noop, repository.Report(nil))
		require.ErrorIs(t, err, locking.ErrInvalidArgument)
	})
}

// Cancelling ctx while an optimistic Mutate waits to retry stops it at
// once. (Adaptive Mutate runs the attempt after a lost race at once, with
// the row lock: this test needs the optimistic wait, so it turns that off.)
func TestMutateStopsOnCancel(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		// ctx ends as the first attempt has failed, while Mutate waits to
		// retry (a timer could end it during the write on a loaded
		// machine, which is another test's case).
		accounts, err := repository.New[fixtures.Account](db, repository.WithAdaptive(false), repository.WithObserver(cancelAfterAttempt{cancel}))
		require.NoError(t, err)
		a := newAccount(t, accounts, "ann", 10)

		calls := 0
		slow := locking.RetryPolicy{MaxAttempts: 10, BaseDelay: time.Hour, MaxDelay: time.Hour}
		_, err = accounts.Mutate(ctx, a.ID, func(a *fixtures.Account) error {
			calls++
			require.NoError(t, db.Exec("UPDATE accounts SET version = version + 1 WHERE id = ?", a.ID).Error)
			return nil
		}, repository.Retry(slow))
		require.ErrorIs(t, err, context.Canceled)
		require.ErrorIs(t, err, locking.ErrStaleData, "the last conflict is kept")
		require.Equal(t, 1, calls)
	})
}

// cancelAfterAttempt cancels the call's context when an attempt ends.
type cancelAfterAttempt struct{ cancel context.CancelFunc }

func (cancelAfterAttempt) StartCall(ctx context.Context, _ repository.Call) context.Context {
	return ctx
}
func (o cancelAfterAttempt) Attempt(context.Context, repository.Call, repository.Attempt) {
	o.cancel()
}
func (cancelAfterAttempt) EndCall(context.Context, repository.Call, repository.CallEnd) {}
func (cancelAfterAttempt) Wait(context.Context, repository.Wait)                        {}
func (cancelAfterAttempt) UnknownOutcome(context.Context, repository.UnknownOutcome)    {}

func TestUpsert(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		_, docs := repos(t, db)
		create := func() *fixtures.Document {
			return &fixtures.Document{ID: "ignored", Title: "new", Attrs: fixtures.Attributes{}}
		}
		setField := func(k, v string) func(*fixtures.Document) error {
			return func(d *fixtures.Document) error { d.Attrs[k] = v; return nil }
		}

		d, err := docs.Upsert(ctx, "u1", create, setField("a", "1"))
		require.NoError(t, err)
		require.Equal(t, "u1", d.ID, "the key is the id asked for")
		first := d.Version
		require.Positive(t, first)

		d, err = docs.Upsert(ctx, "u1", create, setField("b", "2"))
		require.NoError(t, err)
		require.Greater(t, d.Version, first)
		require.Equal(t, fixtures.Attributes{"a": "1", "b": "2"}, d.Attrs)

		_, err = docs.Upsert(ctx, "u2", nil, setField("a", "1"))
		require.ErrorIs(t, err, locking.ErrNotFound, "no factory, no create")
		_, err = docs.Upsert(ctx, "u2", func() *fixtures.Document { return nil }, setField("a", "1"))
		require.ErrorIs(t, err, locking.ErrInvalidArgument)
		_, err = docs.Upsert(ctx, "u2", create, nil)
		require.ErrorIs(t, err, locking.ErrInvalidArgument)
		_, err = docs.Get(ctx, "u2")
		require.ErrorIs(t, err, locking.ErrNotFound, "nothing written by the refused calls")
	})
}

// Inside a transaction a losing create is rolled back to a savepoint and the
// transaction goes on (on PostgreSQL a failed statement would otherwise abort
// it).
func TestUpsertInTxSurvivesLosingCreate(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		_, docs := repos(t, db)
		err := repository.RunInTx(ctx, db, func(ctx context.Context) error {
			first := true
			d, err := docs.Upsert(ctx, "race", func() *fixtures.Document {
				if first { // a rival creates the record between our read and our insert
					first = false
					require.NoError(t, docs.DB(ctx).Exec(`INSERT INTO documents (id, title, attrs, version, created_at, updated_at) VALUES ('race', 'rival', '{}', 1, ?, ?)`, time.Now(), time.Now()).Error)
				}
				return &fixtures.Document{Title: "mine"}
			}, func(d *fixtures.Document) error {
				d.Attrs = fixtures.Attributes{"seen": d.Title}
				return nil
			}, repository.Retry(fastRetry(3)))
			require.NoError(t, err)
			require.Greater(t, d.Version, int64(1), "the rival's record, written once more")
			return nil
		})
		require.NoError(t, err)
		got, err := docs.Get(ctx, "race")
		require.NoError(t, err)
		require.Equal(t, "rival", got.Title)
		require.Equal(t, fixtures.Attributes{"seen": "rival"}, got.Attrs)
	})
}
