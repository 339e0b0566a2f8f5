package locking_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	sqliteopen "github.com/gormlock/gormlock/opendb/sqlite"

	"github.com/gormlock/gormlock/locking"
)

// account is an in-memory record with a version, standing in for a table row.
type account struct {
	balance int64
	version int64
}

// update writes balance if the record is still at version expected, as a
// guarded UPDATE ... WHERE version = expected would.
func (a *account) update(expected, balance int64) error {
	if a.version != expected {
		return &locking.StaleDataError{Table: "accounts", ID: 1, Expected: expected, Actual: a.version, Op: "update"}
	}
	a.balance, a.version = balance, a.version+1
	return nil
}

func ExampleRetryOnConflict() {
	acct := &account{balance: 100, version: 1}
	interruptions := 2 // another writer gets in first twice

	policy := locking.RetryPolicy{MaxAttempts: 5, BaseDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond}
	attempt := 0
	err := locking.RetryOnConflict(context.Background(), policy, func(ctx context.Context) error {
		attempt++
		balance, version := acct.balance, acct.version // re-read on every attempt
		if interruptions > 0 {
			interruptions--
			_ = acct.update(acct.version, acct.balance+5) // the other writer's deposit
		}
		err := acct.update(version, balance+10)
		fmt.Printf("attempt %d: read version %d: %v\n", attempt, version, err)
		return err
	})
	fmt.Println("err:", err)
	fmt.Println("balance:", acct.balance, "version:", acct.version)
	// Output:
	// attempt 1: read version 1: gormlock: stale data: update accounts id=1 expected version 1, found 2
	// attempt 2: read version 2: gormlock: stale data: update accounts id=1 expected version 2, found 3
	// attempt 3: read version 3: <nil>
	// err: <nil>
	// balance: 120 version: 4
}

func ExampleRetryOnConflict_exhausted() {
	acct := &account{balance: 100, version: 1}
	policy := locking.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond}
	err := locking.RetryOnConflict(context.Background(), policy, func(ctx context.Context) error {
		version := acct.version
		_ = acct.update(acct.version, acct.balance+5) // someone else always wins
		return acct.update(version, acct.balance+10)
	})

	var exhausted *locking.RetryExhaustedError
	var stale *locking.StaleDataError
	fmt.Println(errors.Is(err, locking.ErrRetriesExhausted), errors.Is(err, locking.ErrStaleData))
	if errors.As(err, &exhausted) && errors.As(err, &stale) {
		fmt.Printf("gave up after %d attempts; last conflict: expected %d, found %d\n", exhausted.Attempts, stale.Expected, stale.Actual)
	}
	// Output:
	// true true
	// gave up after 3 attempts; last conflict: expected 3, found 4
}

func ExampleStaleDataError() {
	var err error = fmt.Errorf("transfer: %w", &locking.StaleDataError{
		Table: "accounts", ID: 42, Expected: 3, Actual: 4, Op: "update",
	})

	fmt.Println(errors.Is(err, locking.ErrStaleData))
	var stale *locking.StaleDataError
	if errors.As(err, &stale) {
		fmt.Printf("%s %v: held version %d, database has %d\n", stale.Table, stale.ID, stale.Expected, stale.Actual)
	}
	// Output:
	// true
	// accounts 42: held version 3, database has 4
}

func ExampleClassify() {
	dir, err := os.MkdirTemp("", "gormlock-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	db, err := sqliteopen.Open(filepath.Join(dir, "example.db"))
	if err != nil {
		panic(err)
	}
	defer fixtures.Close(db)

	if err := db.Exec(`CREATE TABLE users (email TEXT PRIMARY KEY)`).Error; err != nil {
		panic(err)
	}
	if err := db.Exec(`INSERT INTO users (email) VALUES ('ada@example.com')`).Error; err != nil {
		panic(err)
	}
	raw := db.Exec(`INSERT INTO users (email) VALUES ('ada@example.com')`).Error

	err = locking.Classify(raw)
	fmt.Println(errors.Is(err, locking.ErrAlreadyExists))
	fmt.Println(locking.Code(err))
	fmt.Println(locking.IsRetryable(err))
	// Output:
	// true
	// SQLITE_CONSTRAINT_PRIMARYKEY
	// false
}
