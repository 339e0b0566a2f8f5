package repository_test

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

// Add changes a number by a delta in the statement itself: two Applies
// that ran at the same time both count, without a read or a retry.
func ExampleAdd() {
	ctx := context.Background()
	accounts, _ := repository.New[Account](db)
	acct := &Account{Owner: "ann", Balance: 100}
	if err := accounts.Create(ctx, acct); err != nil {
		panic(err)
	}

	deposit := []repository.Change{repository.Add("Balance", 25)}
	if _, err := accounts.Apply(ctx, acct.ID, deposit); err != nil {
		panic(err)
	}
	got, err := accounts.Apply(ctx, acct.ID, deposit)
	fmt.Println(got.Balance, err)
	// Prints:
	// 150 <nil>
}

// SetTo writes a value, in the same statement as the other changes and the
// version; here with Add, under If.
func ExampleSetTo() {
	ctx := context.Background()
	accounts, _ := repository.New[Account](db)
	acct := &Account{Owner: "ann", Balance: 40}
	if err := accounts.Create(ctx, acct); err != nil {
		panic(err)
	}

	closeAccount := []repository.Change{repository.Add("Balance", -40), repository.SetTo("Frozen", true)}
	got, err := accounts.Apply(ctx, acct.ID, closeAccount, repository.If("balance = ?", 40))
	fmt.Println(got.Balance, got.Frozen, err)
	// Prints:
	// 0 true <nil>
}

// Expr sets a field to an SQL expression over the record's columns, with
// its values as arguments.
func ExampleExpr() {
	ctx := context.Background()
	accounts, _ := repository.New[Account](db)
	acct := &Account{Owner: "ann", Balance: 100}
	if err := accounts.Create(ctx, acct); err != nil {
		panic(err)
	}

	interest := []repository.Change{repository.Expr("Balance", "balance + balance * ? / 100", 5)}
	got, err := accounts.Apply(ctx, acct.ID, interest)
	fmt.Println(got.Balance, err)
	// Prints:
	// 105 <nil>
}

// If makes Apply write only while a condition holds when the statement
// runs: of five concurrent withdrawals of 30 from 100, three apply and two
// are refused with locking.ErrConditionFailed, and the balance never goes
// below zero.
func ExampleIf() {
	ctx := context.Background()
	accounts, _ := repository.New[Account](db)
	acct := &Account{Owner: "ann", Balance: 100}
	if err := accounts.Create(ctx, acct); err != nil {
		panic(err)
	}

	var wg sync.WaitGroup
	var mu sync.Mutex
	applied, refused := 0, 0
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := accounts.Apply(ctx, acct.ID, []repository.Change{repository.Add("Balance", -30)}, repository.If("balance >= ?", 30))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				applied++
			case errors.Is(err, locking.ErrConditionFailed):
				refused++
			default:
				panic(err)
			}
		}()
	}
	wg.Wait()
	got, _ := accounts.Get(ctx, acct.ID)
	fmt.Println("applied:", applied, "refused:", refused, "balance:", got.Balance)
	// Prints:
	// applied: 3 refused: 2 balance: 10
}

// Columns makes Update write the named fields only, still guarded by the
// version: the other fields keep what the database has.
func ExampleColumns() {
	ctx := context.Background()
	accounts, _ := repository.New[Account](db)
	acct := &Account{Owner: "ann", Balance: 100}
	if err := accounts.Create(ctx, acct); err != nil {
		panic(err)
	}

	acct.Owner = "ann smith"
	acct.Balance = 0 // not written
	fmt.Println(accounts.Update(ctx, acct, repository.Columns("Owner")))
	got, _ := accounts.Get(ctx, acct.ID)
	fmt.Println(got.Owner, got.Balance, "same version:", got.Version == acct.Version)
	// Prints:
	// <nil>
	// ann smith 100 same version: true
}

// StrictGORMWrites(true) refuses every plain GORM update of a versioned
// model that no version guards, for the tests of an application moving its
// writers to gormlock: the call sites that could erase a concurrent change
// fail instead of writing.
func ExampleStrictGORMWrites() {
	if err := db.Use(repository.Plugin(repository.StrictGORMWrites(true))); err != nil {
		panic(err)
	}
	ctx := context.Background()
	accounts, _ := repository.New[Account](db)
	acct := &Account{Owner: "ann", Balance: 100}
	if err := accounts.Create(ctx, acct); err != nil {
		panic(err)
	}

	err := db.Model(&Account{}).Where("id = ?", acct.ID).Update("balance", 0).Error
	fmt.Println("unguarded:", errors.Is(err, locking.ErrUnguardedWrite))
	err = db.Model(&Account{}).Where("id = ? AND version = ?", acct.ID, acct.Version).Update("balance", 0).Error
	fmt.Println("guarded by the version:", err)
	// Prints:
	// unguarded: true
	// guarded by the version: <nil>
}

// attempts is an Observer that prints each attempt of a call.
type attempts struct{}

func (attempts) StartCall(ctx context.Context, c repository.Call) context.Context { return ctx }
func (attempts) Attempt(ctx context.Context, c repository.Call, a repository.Attempt) {
	fmt.Println(c.Op, c.Table, "attempt", a.N, a.Outcome, "locked:", a.Locked)
}
func (attempts) EndCall(ctx context.Context, c repository.Call, end repository.CallEnd) {
	fmt.Println(c.Op, c.Table, "ended:", end.Err)
}
func (attempts) Wait(ctx context.Context, w repository.Wait)                     {}
func (attempts) UnknownOutcome(ctx context.Context, u repository.UnknownOutcome) {}

// WithObserver tells an Observer (otelgormlock's, or one of your own) what
// one repository's calls decide: here a Mutate that loses its first attempt
// to another writer and wins the second, row-locked.
func ExampleWithObserver() {
	ctx := context.Background()
	accounts, _ := repository.New[Account](db, repository.WithObserver(attempts{}))
	acct := &Account{Owner: "ann"}
	if err := accounts.Create(ctx, acct); err != nil {
		panic(err)
	}

	first := true
	_, err := accounts.Mutate(ctx, acct.ID, func(a *Account) error {
		if first {
			first = false
			db.Exec("UPDATE accounts SET version = version + 1 WHERE id = ?", a.ID)
		}
		a.Balance++
		return nil
	})
	fmt.Println(err)
	// Prints:
	// mutate accounts attempt 1 conflict locked: false
	// mutate accounts attempt 2 applied locked: true
	// mutate accounts ended: <nil>
	// <nil>
}
