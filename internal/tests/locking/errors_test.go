package locking_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gormlock/gormlock/locking"
)

// sentinels lists every sentinel, to check that each typed error matches its
// own sentinel and no other.
var sentinels = map[string]error{
	"ErrStaleData":           locking.ErrStaleData,
	"ErrNotFound":            locking.ErrNotFound,
	"ErrAlreadyExists":       locking.ErrAlreadyExists,
	"ErrInvalidArgument":     locking.ErrInvalidArgument,
	"ErrLocked":              locking.ErrLocked,
	"ErrLockTimeout":         locking.ErrLockTimeout,
	"ErrDeadlock":            locking.ErrDeadlock,
	"ErrSerialization":       locking.ErrSerialization,
	"ErrNotSupported":        locking.ErrNotSupported,
	"ErrRetriesExhausted":    locking.ErrRetriesExhausted,
	"ErrCommitUnknown":       locking.ErrCommitUnknown,
	"ErrOperationKeyReused":  locking.ErrOperationKeyReused,
	"ErrUnguardedWrite":      locking.ErrUnguardedWrite,
	"ErrConstraintViolation": locking.ErrConstraintViolation,
	"ErrSchemaMismatch":      locking.ErrSchemaMismatch,
	"ErrConditionFailed":     locking.ErrConditionFailed,
	"ErrLeased":              locking.ErrLeased,
	"ErrLeaseExpired":        locking.ErrLeaseExpired,
}

// assertMatchesOnly checks that err matches exactly the named sentinels.
func assertMatchesOnly(t *testing.T, err error, want ...error) {
	t.Helper()
	for name, s := range sentinels {
		expected := false
		for _, w := range want {
			if w == s {
				expected = true
			}
		}
		assert.Equal(t, expected, errors.Is(err, s), "errors.Is(%v, %s)", err, name)
	}
}

func TestSentinelsAreDistinct(t *testing.T) {
	for name, s := range sentinels {
		t.Run(name, func(t *testing.T) {
			assertMatchesOnly(t, s, s)
		})
	}
}

func TestStaleDataError(t *testing.T) {
	stale := &locking.StaleDataError{Table: "accounts", ID: int64(42), Expected: 3, Actual: 5, Op: "update"}
	err := fmt.Errorf("transfer: %w", stale)

	assert.Equal(t, "gormlock: stale data: update accounts id=42 expected version 3, found 5", stale.Error())
	assert.Same(t, locking.ErrStaleData, stale.Unwrap())
	assertMatchesOnly(t, err, locking.ErrStaleData)

	var got *locking.StaleDataError
	require.True(t, errors.As(err, &got))
	assert.Same(t, stale, got)
	assert.Equal(t, "accounts", got.Table)
	assert.Equal(t, int64(42), got.ID)
	assert.Equal(t, int64(3), got.Expected)
	assert.Equal(t, int64(5), got.Actual)
	assert.Equal(t, "update", got.Op)
}

func TestStaleDataErrorMessageNamesEverything(t *testing.T) {
	tests := []struct {
		name string
		err  *locking.StaleDataError
		want string
	}{
		{
			name: "delete with string id",
			err:  &locking.StaleDataError{Table: "documents", ID: "doc-7", Expected: 11, Actual: 12, Op: "delete"},
			want: "gormlock: stale data: delete documents id=doc-7 expected version 11, found 12",
		},
		{
			name: "no op says write",
			err:  &locking.StaleDataError{Table: "accounts", ID: 1, Expected: 1, Actual: 2},
			want: "gormlock: stale data: write accounts id=1 expected version 1, found 2",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.err.Error())
			assert.ErrorIs(t, tt.err, locking.ErrStaleData)
		})
	}
}

func TestNotFoundError(t *testing.T) {
	nf := &locking.NotFoundError{Table: "documents", ID: "missing"}
	err := fmt.Errorf("load: %w", nf)

	assert.Equal(t, "gormlock: record not found: documents id=missing", nf.Error())
	assert.Same(t, locking.ErrNotFound, nf.Unwrap())
	assertMatchesOnly(t, err, locking.ErrNotFound)

	var got *locking.NotFoundError
	require.True(t, errors.As(err, &got))
	assert.Same(t, nf, got)
	var stale *locking.StaleDataError
	assert.False(t, errors.As(err, &stale))
}

func TestRetryExhaustedError(t *testing.T) {
	stale := &locking.StaleDataError{Table: "accounts", ID: 9, Expected: 4, Actual: 6, Op: "update"}
	last := fmt.Errorf("attempt 3: %w", stale)
	ex := &locking.RetryExhaustedError{Attempts: 3, Last: last}
	err := fmt.Errorf("deposit: %w", ex)

	assert.Equal(t, "gormlock: gave up after 3 attempts: attempt 3: "+stale.Error(), ex.Error())
	assertMatchesOnly(t, err, locking.ErrRetriesExhausted, locking.ErrStaleData)

	var gotEx *locking.RetryExhaustedError
	require.True(t, errors.As(err, &gotEx))
	assert.Equal(t, 3, gotEx.Attempts)
	assert.Same(t, last, gotEx.Last)

	var gotStale *locking.StaleDataError
	require.True(t, errors.As(err, &gotStale))
	assert.Same(t, stale, gotStale)
	assert.Equal(t, int64(6), gotStale.Actual)
}

func TestRetryExhaustedErrorMatchesLastErrorKind(t *testing.T) {
	last := &locking.DatabaseError{Kind: locking.ErrDeadlock, Code: "40P01", Err: &pgconn.PgError{Code: "40P01"}}
	err := &locking.RetryExhaustedError{Attempts: 10, Last: last}

	assertMatchesOnly(t, err, locking.ErrRetriesExhausted, locking.ErrDeadlock)
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr))
	assert.Equal(t, "40P01", pgErr.Code)
}

func TestDatabaseError(t *testing.T) {
	driverErr := &pgconn.PgError{Severity: "ERROR", Code: "23505", Message: "duplicate key value violates unique constraint \"accounts_pkey\""}
	de := &locking.DatabaseError{Kind: locking.ErrAlreadyExists, Code: "23505", Err: driverErr}
	err := fmt.Errorf("create: %w", de)

	assert.Equal(t, "gormlock: record already exists (23505): "+driverErr.Error(), de.Error())
	assertMatchesOnly(t, err, locking.ErrAlreadyExists)

	var gotDE *locking.DatabaseError
	require.True(t, errors.As(err, &gotDE))
	assert.Same(t, de, gotDE)
	var gotPG *pgconn.PgError
	require.True(t, errors.As(err, &gotPG))
	assert.Same(t, driverErr, gotPG)
	assert.Equal(t, "23505", locking.Code(err))
}

func TestInvalid(t *testing.T) {
	err := locking.Invalid("repository: %s must be positive, got %d", "Version", 0)
	assert.Equal(t, "gormlock: invalid argument: repository: Version must be positive, got 0", err.Error())
	assertMatchesOnly(t, err, locking.ErrInvalidArgument)

	plain := locking.Invalid("no arguments")
	assert.Equal(t, "gormlock: invalid argument: no arguments", plain.Error())
}

func TestBatchError(t *testing.T) {
	err := error(&locking.BatchError{Table: "accounts", Op: "update", Total: 50, Failed: []error{
		&locking.NotFoundError{Table: "accounts", ID: int64(3)},
		&locking.StaleDataError{Table: "accounts", ID: int64(7), Expected: 1, Actual: 2, Op: "update"},
	}})
	require.ErrorIs(t, err, locking.ErrStaleData)
	require.ErrorIs(t, err, locking.ErrNotFound)
	var be *locking.BatchError
	require.ErrorAs(t, err, &be)
	assert.Equal(t, []any{int64(3), int64(7)}, be.IDs())
	assert.Equal(t, "gormlock: batch update of 50 accounts records wrote nothing: 2 did not match (ids [3 7]): "+
		"gormlock: record not found: accounts id=3; gormlock: stale data: update accounts id=7 expected version 1, found 2", err.Error())

	onlyStale := &locking.BatchError{Failed: []error{&locking.StaleDataError{ID: 1}}}
	require.NotErrorIs(t, onlyStale, locking.ErrNotFound)
}
