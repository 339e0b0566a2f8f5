package repository_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gormlock/gormlock/internal/tests/fixtures"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/repository"
)

// shadowed declares its own string key over the embedded Model's int64 ID:
// only the outer field maps the id column.
type shadowed struct {
	models.Model
	ID   string `gorm:"primaryKey"`
	Name string
}

func TestShadowedEmbeddedFieldIsNotWritten(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		require.NoError(t, db.AutoMigrate(&shadowed{}))
		r, err := repository.New[shadowed](db)
		require.NoError(t, err)
		e := &shadowed{ID: "k", Name: "a"}
		require.NoError(t, r.Create(ctx, e))
		e.Name = "b"
		require.NoError(t, r.Update(ctx, e))
		got, err := r.Get(ctx, "k")
		require.NoError(t, err, "the key was not rewritten")
		require.Equal(t, "b", got.Name)
		require.Equal(t, e.Version, got.Version)
	})
}

type smallKey struct {
	ID      int32 `gorm:"primaryKey"`
	Version int64 `gorm:"not null"`
	Name    string
}

type unsignedKey struct {
	ID      uint64 `gorm:"primaryKey"`
	Version int64  `gorm:"not null"`
}

func TestIDsThatDoNotFitAreRefused(t *testing.T) {
	db := testdb.SQLite(t)
	require.NoError(t, db.AutoMigrate(&smallKey{}, &unsignedKey{}))
	ctx := context.Background()
	small, err := repository.New[smallKey](db)
	require.NoError(t, err)
	require.NoError(t, small.Create(ctx, &smallKey{ID: 5, Name: "five"}))

	for _, id := range []any{int64(1<<32 + 5), int64(math.MaxInt32 + 1), uint64(math.MaxUint64), int64(math.MinInt32 - 1)} {
		_, err := small.Get(ctx, id)
		require.ErrorIs(t, err, locking.ErrInvalidArgument, "id %v", id)
		require.ErrorContains(t, err, "does not fit")
		_, err = small.Mutate(ctx, id, func(e *smallKey) error { e.Name = "overwritten"; return nil })
		require.ErrorIs(t, err, locking.ErrInvalidArgument)
	}
	got, err := small.Get(ctx, int64(5))
	require.NoError(t, err)
	require.Equal(t, "five", got.Name, "no record reached through a wrapped id")

	unsigned, err := repository.New[unsignedKey](db)
	require.NoError(t, err)
	_, err = unsigned.Get(ctx, -1)
	require.ErrorIs(t, err, locking.ErrInvalidArgument)
	_, err = unsigned.Get(ctx, int64(1)<<40)
	require.ErrorIs(t, err, locking.ErrNotFound, "a signed id that fits an unsigned key is looked up")
}

func TestMutateNeverRetriesFnErrors(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		accounts, _ := repos(t, db)
		a := newAccount(t, accounts, "ann", 10)
		fromElsewhere := &locking.StaleDataError{Table: "other", ID: 1, Expected: 1, Actual: 2}
		calls := 0
		_, err := accounts.Mutate(ctx, a.ID, func(*fixtures.Account) error {
			calls++
			return fromElsewhere
		})
		require.Equal(t, 1, calls, "an error from fn aborts, even one matching ErrStaleData")
		require.Same(t, fromElsewhere, err)
	})
}

func TestMutateRefusesKeyOrVersionChanges(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		accounts, _ := repos(t, db)
		a := newAccount(t, accounts, "a", 1)
		b := newAccount(t, accounts, "b", 2)
		_, err := accounts.Mutate(ctx, a.ID, func(x *fixtures.Account) error {
			x.ID = b.ID
			x.Owner = "hijacked"
			return nil
		})
		require.ErrorIs(t, err, locking.ErrInvalidArgument)
		require.ErrorContains(t, err, "changed the primary key or the version")
		_, err = accounts.Mutate(ctx, a.ID, func(x *fixtures.Account) error {
			x.Version = 99
			return nil
		})
		require.ErrorIs(t, err, locking.ErrInvalidArgument)
		for _, want := range []*fixtures.Account{a, b} {
			got, err := accounts.Get(ctx, want.ID)
			require.NoError(t, err)
			require.Equal(t, want.Owner, got.Owner)
			require.Equal(t, want.Version, got.Version)
		}
	})
}

// slugged has a second unique column: a Create that violates it while the
// id is free is not a lost race.
type slugged struct {
	ID      string `gorm:"primaryKey"`
	Slug    string `gorm:"uniqueIndex;not null"`
	Version int64  `gorm:"not null"`
}

func TestUpsertDoesNotRetryOtherUniqueViolations(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		require.NoError(t, db.AutoMigrate(&slugged{}))
		r, err := repository.New[slugged](db)
		require.NoError(t, err)
		require.NoError(t, r.Create(ctx, &slugged{ID: "a", Slug: "x"}))
		var rep repository.MutateReport
		_, err = r.Upsert(ctx, "b", func() *slugged { return &slugged{Slug: "x"} }, func(*slugged) error { return nil }, repository.Report(&rep))
		require.ErrorIs(t, err, locking.ErrAlreadyExists)
		require.NotErrorIs(t, err, locking.ErrStaleData)
		require.Equal(t, 1, rep.Attempts)
	})
}

// Every worker reads "not found" before any of them inserts, so all of them
// try to create the same id; exactly one insert wins and every increment is
// kept. Each worker has its own Repository, as separate processes would (one
// Repository queues its own callers of a record instead of racing them).
func TestUpsertConcurrentCreatorsAllRace(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		const workers = 8
		var arrived sync.WaitGroup
		arrived.Add(workers)
		allRead := make(chan struct{})
		go func() { arrived.Wait(); close(allRead) }()
		var factoryCalls, lost atomic.Int64
		var g errgroup.Group
		for range workers {
			accounts, err := repository.New[fixtures.Account](db, repository.WithRetryPolicy(
				locking.RetryPolicy{MaxAttempts: 50, BaseDelay: time.Millisecond, MaxDelay: 20 * time.Millisecond}))
			require.NoError(t, err)
			g.Go(func() error {
				first := true
				var rep repository.MutateReport
				_, err := accounts.Upsert(context.Background(), int64(4242), func() *fixtures.Account {
					factoryCalls.Add(1)
					if first {
						first = false
						arrived.Done()
						<-allRead
					}
					return &fixtures.Account{Owner: "race"}
				}, func(a *fixtures.Account) error { a.Balance++; return nil }, repository.Report(&rep))
				if rep.Attempts > 1 {
					lost.Add(1)
				}
				return err
			})
		}
		require.NoError(t, g.Wait())
		require.GreaterOrEqual(t, factoryCalls.Load(), int64(workers), "every worker tried to create")
		require.EqualValues(t, workers-1, lost.Load(), "all but one lost the create and retried")
		balance, _, found := rawAccount(t, db, 4242)
		require.True(t, found)
		require.EqualValues(t, workers, balance)
	})
}

func TestCreateNormalisesCallerTimes(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		accounts, _ := repos(t, db)
		zone := time.FixedZone("CET", 3600)
		a := &fixtures.Account{Owner: "ann"}
		a.CreatedAt = time.Date(2026, 1, 2, 3, 4, 5, 123456789, zone)
		require.NoError(t, accounts.Create(ctx, a))
		require.Equal(t, time.UTC, a.CreatedAt.Location())
		require.Equal(t, 123456000, a.CreatedAt.Nanosecond())
		got, err := accounts.Get(ctx, a.ID)
		require.NoError(t, err)
		require.True(t, got.CreatedAt.Equal(a.CreatedAt), "stored %v, in memory %v", got.CreatedAt, a.CreatedAt)
	})
}

func TestRunInTxNestedRefusesOptions(t *testing.T) {
	db := testdb.Open(t, "sqlite")
	err := repository.RunInTx(context.Background(), db, func(ctx context.Context) error {
		return repository.RunInTx(ctx, db, func(context.Context) error { return nil }, nil)
	})
	require.ErrorIs(t, err, locking.ErrInvalidArgument)
	require.ErrorContains(t, err, "savepoint")
}

// On PostgreSQL a failed statement makes COMMIT roll back: that is a known
// outcome (nothing committed), not ErrCommitUnknown.
func TestRunInTxCommitAfterFailedStatementIsKnownRollback(t *testing.T) {
	db := testdb.Open(t, "postgres")
	ctx := context.Background()
	accounts, _ := repos(t, db)
	a := newAccount(t, accounts, "ann", 10)
	created := a.Version
	err := repository.RunInTx(ctx, db, func(ctx context.Context) error {
		a.Balance = 0
		require.NoError(t, accounts.Update(ctx, a))
		_ = accounts.DB(ctx).Exec("SELECT no_such_column FROM accounts").Error // ignored on purpose
		return nil
	})
	require.Error(t, err)
	require.NotErrorIs(t, err, locking.ErrCommitUnknown)
	requireRow(t, db, a.ID, 10, created)
}

// Negative control of TestUpsertConcurrentCreatorsAllRace: the same race
// written with GORM's Save (load or build, increment, Save) loses increments,
// because Save's zero-rows fallback is an upsert that overwrites.
func TestSaveLosesConcurrentCreatorsIncrements(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		const workers = 8
		var arrived sync.WaitGroup
		arrived.Add(workers)
		allRead := make(chan struct{})
		go func() { arrived.Wait(); close(allRead) }()
		var g errgroup.Group
		for range workers {
			g.Go(func() error {
				var a fixtures.Account
				err := db.Where("id = ?", 4242).Take(&a).Error
				if err != nil && !errors.Is(err, gorm.ErrRecordNotFound) {
					return err
				}
				arrived.Done()
				<-allRead // everyone has read before anyone writes
				if errors.Is(err, gorm.ErrRecordNotFound) {
					now := time.Now()
					a = fixtures.Account{Owner: "race"}
					a.ID, a.Version, a.CreatedAt, a.UpdatedAt = 4242, 1, now, now
				}
				a.Balance++
				return db.Save(&a).Error
			})
		}
		require.NoError(t, g.Wait())
		balance, _, found := rawAccount(t, db, 4242)
		require.True(t, found)
		require.Less(t, balance, int64(workers), "Save must lose increments")
		t.Logf("Save: %d of %d increments kept", balance, workers)
	})
}

// ticket has a UUID key, stored in a uuid column on PostgreSQL.
type ticket struct {
	ID    uuid.UUID `gorm:"type:uuid;primaryKey"`
	Title string
	models.Versioned
}

func TestUUIDKey(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		require.NoError(t, db.AutoMigrate(&ticket{}))
		r, err := repository.New[ticket](db)
		require.NoError(t, err)
		require.NoError(t, r.VerifySchema(ctx))

		id := uuid.New()
		e := &ticket{ID: id, Title: "a"}
		require.NoError(t, r.Create(ctx, e))
		stale := *e
		e.Title = "b"
		require.NoError(t, r.Update(ctx, e))
		err = r.Update(ctx, &stale)
		var se *locking.StaleDataError
		require.ErrorAs(t, err, &se)
		require.Equal(t, id, se.ID)

		got, err := r.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, "b", got.Title)
		_, err = r.Get(ctx, id.String())
		require.ErrorIs(t, err, locking.ErrInvalidArgument, "a string is not a uuid.UUID key")
		_, err = r.Get(ctx, uuid.Nil)
		require.ErrorIs(t, err, locking.ErrInvalidArgument)
		got, err = r.Mutate(ctx, id, func(x *ticket) error { x.Title = "c"; return nil })
		require.NoError(t, err)
		require.Greater(t, got.Version, e.Version)
		require.NoError(t, r.Delete(ctx, got))
		_, err = r.Get(ctx, id)
		require.ErrorIs(t, err, locking.ErrNotFound)
	})
}

// bare has nothing but a key and a version: its update and force-increment
// statements are the same text, and errors still name the operation.
type bare struct {
	ID      int64 `gorm:"primaryKey"`
	Version int64
}

func TestBareModelNamesTheOperation(t *testing.T) {
	db := testdb.Open(t, "sqlite")
	require.NoError(t, db.AutoMigrate(&bare{}))
	r, err := repository.New[bare](db)
	require.NoError(t, err)
	ctx := context.Background()
	e := &bare{ID: 1}
	require.NoError(t, r.Create(ctx, e))
	stale := *e
	require.NoError(t, r.ForceIncrement(ctx, e))
	var se *locking.StaleDataError
	require.ErrorAs(t, r.Update(ctx, &stale), &se)
	require.Equal(t, "update", se.Op)
	require.ErrorAs(t, r.ForceIncrement(ctx, &stale), &se)
	require.Equal(t, "force increment", se.Op)
}
