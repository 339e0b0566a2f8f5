package repository_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gormlock/gormlock/internal/tests/fixtures"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

// opCount returns how many operation records key has (0 or 1).
func opCount(t *testing.T, db *gorm.DB, key string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, db.Raw("SELECT count(*) FROM gormlock_operations WHERE op_key = ?", key).Scan(&n).Error)
	return n
}

// Every write that takes an operation key, called twice with the same key,
// applies once; the repeat returns nil and what the first call wrote.
func TestOpKeyRepeatAppliesOnce(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		accounts, docs := repos(t, db)
		inc := func(a *fixtures.Account) error { a.Balance++; return nil }

		t.Run("Update", func(t *testing.T) {
			a := newAccount(t, accounts, "u", 10)
			first, second := *a, *a
			first.Balance, second.Balance = 11, 11
			require.NoError(t, accounts.Update(ctx, &first, repository.OpKey("upd-1")))
			require.NoError(t, accounts.Update(ctx, &second, repository.OpKey("upd-1")), "the repeat returns the first outcome")
			assert.Equal(t, first.Version, second.Version, "the repeat learns the version the first wrote")
			requireRow(t, db, a.ID, 11, first.Version)
			// Without the key the same repeat is stale.
			third := *a
			require.ErrorIs(t, accounts.Update(ctx, &third), locking.ErrStaleData)
		})
		t.Run("ForceIncrement", func(t *testing.T) {
			a := newAccount(t, accounts, "f", 10)
			first, second := *a, *a
			require.NoError(t, accounts.ForceIncrement(ctx, &first, repository.OpKey("fi-1")))
			require.NoError(t, accounts.ForceIncrement(ctx, &second, repository.OpKey("fi-1")))
			assert.Equal(t, first.Version, second.Version)
			requireRow(t, db, a.ID, 10, first.Version)
		})
		t.Run("Delete", func(t *testing.T) {
			a := newAccount(t, accounts, "d", 10)
			first, second := *a, *a
			require.NoError(t, accounts.Delete(ctx, &first, repository.OpKey("del-1")))
			require.NoError(t, accounts.Delete(ctx, &second, repository.OpKey("del-1")))
			_, _, found := rawAccount(t, db, a.ID)
			assert.False(t, found)
			require.ErrorIs(t, accounts.Delete(ctx, a), locking.ErrNotFound, "without the key a repeat is not found")
		})
		t.Run("Create with an assigned key", func(t *testing.T) {
			first := &fixtures.Account{Owner: "c", Balance: 1}
			second := &fixtures.Account{Owner: "c", Balance: 1}
			require.NoError(t, accounts.Create(ctx, first, repository.OpKey("cre-1")))
			require.NoError(t, accounts.Create(ctx, second, repository.OpKey("cre-1")))
			assert.Equal(t, first.ID, second.ID, "the repeat learns the key the database assigned")
			assert.Equal(t, first.Version, second.Version)
			var n int64
			require.NoError(t, db.Raw("SELECT count(*) FROM accounts WHERE owner = 'c'").Scan(&n).Error)
			assert.EqualValues(t, 1, n, "one record, not two")
		})
		t.Run("Create with the caller's key", func(t *testing.T) {
			first := &fixtures.Document{ID: "cd", Title: "t"}
			second := &fixtures.Document{ID: "cd", Title: "t"}
			require.NoError(t, docs.Create(ctx, first, repository.OpKey("cre-2")))
			require.NoError(t, docs.Create(ctx, second, repository.OpKey("cre-2")))
			assert.Equal(t, first.Version, second.Version)
			require.ErrorIs(t, docs.Create(ctx, &fixtures.Document{ID: "cd", Title: "t"}), locking.ErrAlreadyExists)
		})
		t.Run("Mutate", func(t *testing.T) {
			a := newAccount(t, accounts, "m", 10)
			got1, err := accounts.Mutate(ctx, a.ID, inc, repository.OpKey("mut-1"))
			require.NoError(t, err)
			got2, err := accounts.Mutate(ctx, a.ID, inc, repository.OpKey("mut-1"))
			require.NoError(t, err)
			assert.EqualValues(t, 11, got2.Balance)
			assert.Equal(t, got1.Version, got2.Version)
			requireRow(t, db, a.ID, 11, got1.Version)
			// Negative control: without a key the repeat applies again.
			_, err = accounts.Mutate(ctx, a.ID, inc)
			require.NoError(t, err)
			balance, _, _ := rawAccount(t, db, a.ID)
			assert.EqualValues(t, 12, balance)
		})
		t.Run("MutateRowLocked", func(t *testing.T) {
			a := newAccount(t, accounts, "ml", 10)
			for range 3 {
				_, err := accounts.MutateRowLocked(ctx, a.ID, inc, repository.OpKey("mtl-1"))
				require.NoError(t, err)
			}
			balance, _, _ := rawAccount(t, db, a.ID)
			assert.EqualValues(t, 11, balance)
		})
		t.Run("Upsert", func(t *testing.T) {
			mk := func() *fixtures.Document { return &fixtures.Document{Title: "n", Attrs: fixtures.Attributes{}} }
			add := func(d *fixtures.Document) error { d.Attrs["n"] += "x"; return nil }
			for range 3 {
				d, err := docs.Upsert(ctx, "up", mk, add, repository.OpKey("ups-1"))
				require.NoError(t, err)
				assert.Equal(t, "x", d.Attrs["n"])
			}
			d, err := docs.Upsert(ctx, "up", mk, add, repository.OpKey("ups-2"))
			require.NoError(t, err)
			assert.Equal(t, "xx", d.Attrs["n"], "a new key is a new operation")
		})
	})
}

// Operation keys are checked before any I/O, and bound to their first use.
func TestOpKeyRefusals(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		accounts, docs := repos(t, db)
		a := newAccount(t, accounts, "a", 10)
		for _, bad := range []string{"", strings.Repeat("k", repository.MaxOperationKeyLen+1), "a\x00b", "\xff"} {
			e := *a
			e.Balance = 99
			require.ErrorIs(t, accounts.Update(ctx, &e, repository.OpKey(bad)), locking.ErrInvalidArgument)
			_, err := accounts.Mutate(ctx, a.ID, func(a *fixtures.Account) error { a.Balance = 99; return nil }, repository.OpKey(bad))
			require.ErrorIs(t, err, locking.ErrInvalidArgument)
			_, err = repository.LookupOperation(ctx, db, bad)
			require.ErrorIs(t, err, locking.ErrInvalidArgument)
		}
		requireRow(t, db, a.ID, 10, a.Version)

		e := *a
		require.NoError(t, accounts.Update(ctx, &e, repository.OpKey("k1")))
		b := newAccount(t, accounts, "b", 10)
		for name, reuse := range map[string]func() error{
			"another record": func() error { x := *b; return accounts.Update(ctx, &x, repository.OpKey("k1")) },
			"another kind":   func() error { x := e; return accounts.Delete(ctx, &x, repository.OpKey("k1")) },
			"another table": func() error {
				return docs.Create(ctx, &fixtures.Document{ID: "z", Title: "t"}, repository.OpKey("k1"))
			},
			"another fingerprint": func() error {
				x := *a
				return accounts.Update(ctx, &x, repository.OpKey("k1").WithFingerprint("other request"))
			},
		} {
			err := reuse()
			require.ErrorIs(t, err, locking.ErrInvalidArgument, name)
			require.ErrorIs(t, err, locking.ErrOperationKeyReused, name)
			require.ErrorContains(t, err, `operation key "k1" was used for update of accounts`, name)
		}
		requireRow(t, db, b.ID, 10, b.Version)
		_, err := docs.Get(ctx, "z")
		require.ErrorIs(t, err, locking.ErrNotFound)
	})
}

// A key is recorded with its write or not at all: a transaction that rolls
// back forgets both, and LookupOperation says which happened.
func TestOpKeyCommitsWithTheWrite(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		accounts, _ := repos(t, db)
		a := newAccount(t, accounts, "a", 10)
		boom := errors.New("boom")
		err := repository.RunInTx(ctx, db, func(ctx context.Context) error {
			e := *a
			e.Balance = 20
			require.NoError(t, accounts.Update(ctx, &e, repository.OpKey("tx-1")))
			return boom
		})
		require.ErrorIs(t, err, boom)
		op, err := repository.LookupOperation(ctx, db, "tx-1")
		require.NoError(t, err)
		assert.Nil(t, op, "rolled back: not applied")
		requireRow(t, db, a.ID, 10, a.Version)

		e := *a
		e.Balance = 20
		require.NoError(t, accounts.Update(ctx, &e, repository.OpKey("tx-1")), "not applied, so it applies now")
		op, err = repository.LookupOperation(ctx, db, "tx-1")
		require.NoError(t, err)
		require.NotNil(t, op)
		assert.Equal(t, "accounts", op.Table)
		assert.Equal(t, "update", op.Kind)
		assert.Equal(t, e.Version, op.Version)
		assert.WithinDuration(t, time.Now(), op.At, time.Minute)
		assert.Equal(t, repository.DefaultOperationRetention, op.ExpiresAt.Sub(op.At))
		assert.EqualValues(t, 1, opCount(t, db, "tx-1"))

		none, err := repository.LookupOperation(ctx, db, "never-used")
		require.NoError(t, err)
		assert.Nil(t, none)
		assert.Zero(t, opCount(t, db, "never-used"), "the lookup leaves nothing behind")
	})
}

// Concurrent calls with one key — a client retrying while its first request
// is still running — apply once. The instances do not share a queue, so the
// calls really race; the negative control without a key applies every call.
func TestOpKeyConcurrentRepeatsApplyOnce(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		accounts, _ := repos(t, db)
		run := func(key string) int64 {
			a := newAccount(t, accounts, "c", 0)
			start := make(chan struct{})
			var g errgroup.Group
			var ok atomic.Int64
			for range 8 {
				r, err := repository.New[fixtures.Account](db)
				require.NoError(t, err)
				g.Go(func() error {
					<-start
					var opts []repository.MutateOption
					if key != "" {
						opts = append(opts, repository.OpKey(key))
					}
					_, err := r.Mutate(ctx, a.ID, func(a *fixtures.Account) error { a.Balance++; return nil },
						append(opts, repository.Retry(locking.RetryPolicy{MaxAttempts: 100, BaseDelay: time.Millisecond, MaxDelay: 20 * time.Millisecond}))...)
					if err == nil {
						ok.Add(1)
					}
					return err
				})
			}
			close(start)
			require.NoError(t, g.Wait())
			require.EqualValues(t, 8, ok.Load(), "every call succeeds")
			balance, _, _ := rawAccount(t, db, a.ID)
			return balance
		}
		assert.EqualValues(t, 1, run("same-key"), "eight calls with one key apply once")
		assert.EqualValues(t, 8, run(""), "negative control: eight calls without a key apply eight times")
	})
}

// A key is remembered for the retention only: after it the key names a new
// operation, and PurgeOperations deletes the expired records.
func TestOpKeyRetentionAndPurge(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		accounts, err := repository.New[fixtures.Account](db, repository.WithOperationRetention(time.Second))
		require.NoError(t, err)
		a := newAccount(t, accounts, "r", 0)
		inc := func(a *fixtures.Account) error { a.Balance++; return nil }
		for range 3 {
			_, err := accounts.Mutate(ctx, a.ID, inc, repository.OpKey("keep"))
			require.NoError(t, err)
		}
		for i := range 19 {
			_, err = accounts.Mutate(ctx, a.ID, inc, repository.OpKey("k"+string(rune('a'+i))))
			require.NoError(t, err)
		}
		balance, _, _ := rawAccount(t, db, a.ID)
		require.EqualValues(t, 20, balance)
		last, err := repository.LookupOperation(ctx, db, "ks")
		require.NoError(t, err)
		require.NotNil(t, last)
		time.Sleep(time.Until(last.ExpiresAt) + 50*time.Millisecond) // every record expired
		_, err = accounts.Mutate(ctx, a.ID, inc, repository.OpKey("keep"))
		require.NoError(t, err)
		balance, _, _ = rawAccount(t, db, a.ID)
		require.EqualValues(t, 21, balance, "an expired key names a new operation")

		n, err := repository.PurgeOperations(ctx, db)
		require.NoError(t, err)
		assert.EqualValues(t, 19, n, "the 19 expired records, not the fresh one")
		assert.EqualValues(t, 1, opCount(t, db, "keep"))
		_, err = repository.New[fixtures.Account](db, repository.WithOperationRetention(0))
		require.ErrorIs(t, err, locking.ErrInvalidArgument)
	})
}

// LookupOperation waits for a write that holds the key uncommitted, so its
// answer is final: here the writer commits after the lookup began, and the
// lookup reports it applied.
func TestLookupOperationWaitsForTheWriter(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		accounts, _ := repos(t, db)
		a := newAccount(t, accounts, "w", 0)
		recorded := make(chan struct{})
		commit := make(chan struct{})
		writer := make(chan error, 1)
		go func() {
			writer <- repository.RunInTx(ctx, db, func(ctx context.Context) error {
				e := *a
				e.Balance = 5
				if err := accounts.Update(ctx, &e, repository.OpKey("slow")); err != nil {
					return err
				}
				close(recorded)
				<-commit
				return nil
			})
		}()
		<-recorded
		type result struct {
			op  *repository.Operation
			err error
		}
		got := make(chan result, 1)
		go func() {
			op, err := repository.LookupOperation(ctx, db, "slow")
			got <- result{op, err}
		}()
		select {
		case r := <-got:
			t.Fatalf("the lookup answered while the writer held the key: %+v", r)
		case <-time.After(300 * time.Millisecond):
		}
		close(commit)
		require.NoError(t, <-writer)
		r := <-got
		require.NoError(t, r.err)
		require.NotNil(t, r.op, "applied")
		assert.Equal(t, "update", r.op.Kind)
	})
}
