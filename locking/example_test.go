package locking_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"time"

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

// Whatever gormlock returns, and however the caller wrapped it, errors.Is
// against the sentinels says what happened and what to do about it.
func Example_sentinels() {
	errs := []error{
		&locking.StaleDataError{Table: "accounts", ID: 1, Expected: 3, Actual: 4, Op: "update"},
		fmt.Errorf("load invoice: %w", &locking.NotFoundError{Table: "invoices", ID: 7}),
		&locking.LeaseError{Kind: locking.ErrLeased, Table: "documents", ID: "d1", Op: "update", Holder: "worker-2"},
		&locking.DatabaseError{Kind: locking.ErrDeadlock, Code: "40P01", Err: errors.New("deadlock detected")},
		locking.Invalid("entity is nil"),
		locking.Unknown(io.ErrUnexpectedEOF),
	}
	for _, err := range errs {
		switch {
		case errors.Is(err, locking.ErrStaleData):
			fmt.Println("stale: re-read and apply the change again")
		case errors.Is(err, locking.ErrNotFound):
			fmt.Println("not found: 404")
		case errors.Is(err, locking.ErrLeased):
			fmt.Println("leased: try again when the lease ends")
		case errors.Is(err, locking.ErrDeadlock), errors.Is(err, locking.ErrSerialization):
			fmt.Println("deadlock: retry the whole transaction")
		case errors.Is(err, locking.ErrInvalidArgument):
			fmt.Println("invalid: fix the call")
		case errors.Is(err, locking.ErrCommitUnknown):
			fmt.Println("outcome unknown: look it up before repeating")
		}
	}
	// Output:
	// stale: re-read and apply the change again
	// not found: 404
	// leased: try again when the lease ends
	// deadlock: retry the whole transaction
	// invalid: fix the call
	// outcome unknown: look it up before repeating
}

// OnError retries whatever its predicate accepts; IsRetryable accepts stale
// data, deadlocks and serialization failures, after which re-running the
// whole transaction may succeed.
func ExampleOnError() {
	policy := locking.RetryPolicy{MaxAttempts: 5, BaseDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond}
	attempt := 0
	err := locking.OnError(context.Background(), policy, locking.IsRetryable, func(ctx context.Context) error {
		attempt++
		if attempt < 3 { // the database breaks a deadlock twice
			err := &locking.DatabaseError{Kind: locking.ErrDeadlock, Code: "40P01", Err: errors.New("deadlock detected")}
			fmt.Printf("attempt %d: %v\n", attempt, err)
			return err
		}
		fmt.Printf("attempt %d: committed\n", attempt)
		return nil
	})
	fmt.Println("err:", err)

	// An error the predicate refuses is returned at once.
	attempt = 0
	err = locking.OnError(context.Background(), policy, locking.IsRetryable, func(ctx context.Context) error {
		attempt++
		return &locking.NotFoundError{Table: "accounts", ID: 1}
	})
	fmt.Println("attempts:", attempt, "err:", err)
	// Output:
	// attempt 1: gormlock: deadlock detected (40P01): deadlock detected
	// attempt 2: gormlock: deadlock detected (40P01): deadlock detected
	// attempt 3: committed
	// err: <nil>
	// attempts: 1 err: gormlock: record not found: accounts id=1
}

func ExampleDefaultRetryPolicy() {
	p := locking.DefaultRetryPolicy()
	fmt.Println(p.MaxAttempts, p.BaseDelay, p.MaxDelay)

	p.MaxAttempts = 3 // change fields of the default, rather than start from zero
	fmt.Println(p.Validate())
	// Output:
	// 10 2ms 250ms
	// <nil>
}

// A policy is checked before the first attempt; an unusable one runs
// nothing.
func ExampleRetryPolicy_Validate() {
	for _, p := range []locking.RetryPolicy{
		{}, // the zero value
		{MaxAttempts: 3, BaseDelay: 10 * time.Millisecond, MaxDelay: time.Millisecond},
	} {
		err := p.Validate()
		fmt.Println(errors.Is(err, locking.ErrInvalidArgument), err)
	}

	ran := false
	err := locking.RetryOnConflict(context.Background(), locking.RetryPolicy{}, func(ctx context.Context) error {
		ran = true
		return nil
	})
	fmt.Println("ran:", ran, "invalid:", errors.Is(err, locking.ErrInvalidArgument))
	// Output:
	// true gormlock: invalid argument: retry policy: MaxAttempts must be at least 1, got 0
	// true gormlock: invalid argument: retry policy: MaxDelay (1ms) must not be below BaseDelay (10ms)
	// ran: false invalid: true
}

// Delay is random ("full jitter"), between zero and a ceiling that doubles
// with every failed attempt up to MaxDelay.
func ExampleRetryPolicy_Delay() {
	p := locking.RetryPolicy{MaxAttempts: 10, BaseDelay: 10 * time.Millisecond, MaxDelay: 50 * time.Millisecond}
	ceiling := p.BaseDelay
	for attempt := 1; attempt <= 5; attempt++ {
		d := p.Delay(attempt)
		fmt.Printf("after attempt %d: between 0 and %v: %v\n", attempt, ceiling, d >= 0 && d <= ceiling)
		ceiling = min(2*ceiling, p.MaxDelay)
	}
	// Output:
	// after attempt 1: between 0 and 10ms: true
	// after attempt 2: between 0 and 20ms: true
	// after attempt 3: between 0 and 40ms: true
	// after attempt 4: between 0 and 50ms: true
	// after attempt 5: between 0 and 50ms: true
}

func ExampleIsRetryable() {
	for _, err := range []error{
		&locking.StaleDataError{Table: "accounts", ID: 1, Expected: 1, Actual: 2},
		&locking.DatabaseError{Kind: locking.ErrSerialization, Code: "40001", Err: errors.New("could not serialize access")},
		&locking.DatabaseError{Kind: locking.ErrLocked, Code: "55P03", Err: errors.New("could not obtain lock")},
		locking.Unknown(io.ErrUnexpectedEOF),
		&locking.NotFoundError{Table: "accounts", ID: 1},
	} {
		fmt.Println(locking.IsRetryable(err), err)
	}
	// Output:
	// true gormlock: stale data: write accounts id=1 expected version 1, found 2
	// true gormlock: serialization failure (40001): could not serialize access
	// false gormlock: locked (55P03): could not obtain lock
	// false gormlock: outcome unknown: unexpected EOF
	// false gormlock: record not found: accounts id=1
}

// A COMMIT whose answer never came may have been applied: ClassifyCommit
// marks it ErrCommitUnknown, keeping the cause. An error the database
// reported is classified as usual.
func ExampleClassifyCommit() {
	for _, err := range []error{
		io.ErrUnexpectedEOF,      // the connection broke while waiting
		context.DeadlineExceeded, // the caller stopped waiting
		sql.ErrTxDone,            // the transaction was already over: nothing committed
		driver.ErrBadConn,        // "not sent" is not trusted for a COMMIT
	} {
		got := locking.ClassifyCommit(err)
		fmt.Println(errors.Is(got, locking.ErrCommitUnknown), errors.Is(got, err), got)
	}
	// Output:
	// true true gormlock: outcome unknown: unexpected EOF
	// true true gormlock: outcome unknown: context deadline exceeded
	// false true sql: transaction has already been committed or rolled back
	// true true gormlock: outcome unknown: driver: bad connection
}

// A statement outside a transaction commits by itself; ClassifyWrite trusts
// the driver when it says the statement was never sent.
func ExampleClassifyWrite() {
	for _, err := range []error{
		io.ErrUnexpectedEOF, // sent, and the connection broke: unknown
		driver.ErrBadConn,   // never sent: it did not run
	} {
		got := locking.ClassifyWrite(err)
		fmt.Println(errors.Is(got, locking.ErrCommitUnknown), got)
	}
	// Output:
	// true gormlock: outcome unknown: unexpected EOF
	// false driver: bad connection
}

func ExampleNotSent() {
	fmt.Println(locking.NotSent(fmt.Errorf("insert: %w", driver.ErrBadConn)))
	fmt.Println(locking.NotSent(sql.ErrConnDone))
	fmt.Println(locking.NotSent(io.ErrUnexpectedEOF))
	// Output:
	// true
	// true
	// false
}

// A write whose caller stopped waiting after sending it may or may not have
// been applied.
func ExampleUnknown() {
	err := locking.Unknown(context.Canceled)
	fmt.Println(err)
	fmt.Println(errors.Is(err, locking.ErrCommitUnknown), errors.Is(err, context.Canceled), locking.IsRetryable(err))
	fmt.Println(locking.Unknown(err) == err) // marking twice changes nothing
	// Output:
	// gormlock: outcome unknown: context canceled
	// true true false
	// true
}

func ExampleInvalid() {
	err := locking.Invalid("transfer: amount must be positive, got %d", -5)
	fmt.Println(err)
	fmt.Println(errors.Is(err, locking.ErrInvalidArgument))
	// Output:
	// gormlock: invalid argument: transfer: amount must be positive, got -5
	// true
}

func ExampleIsContextError() {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := fmt.Errorf("get account: %w", ctx.Err())
	fmt.Println(locking.IsContextError(err))
	fmt.Println(locking.IsContextError(locking.Unknown(context.DeadlineExceeded)))
	fmt.Println(locking.IsContextError(io.ErrUnexpectedEOF))
	// Output:
	// true
	// true
	// false
}

// errors.Is matches a BatchError when any of its records does, and
// errors.As reaches the records' own errors.
func ExampleBatchError() {
	var err error = &locking.BatchError{Table: "accounts", Op: "update", Total: 3, Failed: []error{
		&locking.StaleDataError{Table: "accounts", ID: int64(2), Expected: 5, Actual: 6, Op: "update"},
		&locking.NotFoundError{Table: "accounts", ID: int64(3)},
	}}
	fmt.Println(errors.Is(err, locking.ErrStaleData), errors.Is(err, locking.ErrNotFound))

	var batch *locking.BatchError
	if errors.As(err, &batch) {
		fmt.Printf("%d of %d records did not match; nothing was written\n", len(batch.Failed), batch.Total)
		for _, e := range batch.Failed {
			fmt.Println(" ", e)
		}
	}
	// Output:
	// true true
	// 2 of 3 records did not match; nothing was written
	//   gormlock: stale data: update accounts id=2 expected version 5, found 6
	//   gormlock: record not found: accounts id=3
}

func ExampleBatchError_IDs() {
	batch := &locking.BatchError{Table: "accounts", Op: "update", Total: 4, Failed: []error{
		&locking.StaleDataError{Table: "accounts", ID: int64(2), Expected: 5, Actual: 6, Op: "update"},
		&locking.NotFoundError{Table: "accounts", ID: int64(4)},
	}}
	fmt.Println(batch.IDs()) // re-read these and write the batch again
	// Output:
	// [2 4]
}

// A lease held by someone else matches both ErrLeased and ErrLocked; a
// lease of one's own that ran out matches ErrLeaseExpired only.
func ExampleLeaseError() {
	held := &locking.LeaseError{Kind: locking.ErrLeased, Table: "documents", ID: "d1", Op: "update", Holder: "worker-2", Fence: 7}
	expired := &locking.LeaseError{Kind: locking.ErrLeaseExpired, Table: "documents", ID: "d1", Op: "update"}
	for _, err := range []error{held, expired} {
		fmt.Println(errors.Is(err, locking.ErrLeased), errors.Is(err, locking.ErrLocked), errors.Is(err, locking.ErrLeaseExpired))
	}

	var lease *locking.LeaseError
	if errors.As(fmt.Errorf("save: %w", held), &lease) {
		fmt.Printf("held by %s (fence %d)\n", lease.Holder, lease.Fence)
	}
	fmt.Println(expired)
	// Output:
	// true true false
	// false false true
	// held by worker-2 (fence 7)
	// gormlock: lease expired: update documents id=d1
}

func ExampleNotFoundError() {
	err := fmt.Errorf("show invoice: %w", &locking.NotFoundError{Table: "invoices", ID: 7})
	fmt.Println(errors.Is(err, locking.ErrNotFound))
	var nf *locking.NotFoundError
	if errors.As(err, &nf) {
		fmt.Println(nf.Table, nf.ID)
	}
	fmt.Println(err)
	// Output:
	// true
	// invoices 7
	// show invoice: gormlock: record not found: invoices id=7
}

func ExampleRetryExhaustedError() {
	policy := locking.RetryPolicy{MaxAttempts: 2, BaseDelay: 0, MaxDelay: 0}
	err := locking.OnError(context.Background(), policy, locking.IsRetryable, func(ctx context.Context) error {
		return &locking.DatabaseError{Kind: locking.ErrSerialization, Code: "40001", Err: errors.New("could not serialize access")}
	})
	var exhausted *locking.RetryExhaustedError
	if errors.As(err, &exhausted) {
		fmt.Println(exhausted.Attempts, errors.Is(err, locking.ErrRetriesExhausted), errors.Is(err, locking.ErrSerialization))
	}
	fmt.Println(err)
	// Output:
	// 2 true true
	// gormlock: gave up after 2 attempts: gormlock: serialization failure (40001): could not serialize access
}

// RetryNow asks OnError for the next attempt at once, without the policy's
// wait: here the second attempt will take a lock instead of racing again.
func ExampleRetryNow() {
	policy := locking.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Hour, MaxDelay: time.Hour}
	attempts := 0
	err := locking.OnError(context.Background(), policy, locking.IsRetryable, func(context.Context) error {
		attempts++
		if attempts == 1 {
			return locking.RetryNow(&locking.StaleDataError{Table: "accounts", ID: 1, Expected: 1, Actual: 2, Op: "update"})
		}
		return nil
	})
	fmt.Println(attempts, err)
	// Output:
	// 2 <nil>
}
