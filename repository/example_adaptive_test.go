package repository_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

// Apply changes a counter in one statement, without reading it first; If
// guards it, and a condition that does not hold writes nothing.
func ExampleRepository_Apply() {
	ctx := context.Background()
	accounts, err := repository.New[Account](db)
	if err != nil {
		panic(err)
	}
	acct := &Account{Owner: "ann", Balance: 10}
	if err := accounts.Create(ctx, acct); err != nil {
		panic(err)
	}

	got, err := accounts.Apply(ctx, acct.ID, []repository.Change{repository.Add("Balance", -4)}, repository.If("balance >= ?", 4))
	fmt.Println(got.Balance, err, "version advanced:", got.Version > acct.Version)

	_, err = accounts.Apply(ctx, acct.ID, []repository.Change{repository.Add("Balance", -7)}, repository.If("balance >= ?", 7))
	fmt.Println(errors.Is(err, locking.ErrConditionFailed))
	// Prints:
	// 6 <nil> version advanced: true
	// true
}

// Mutate is adaptive by default: a Mutate that loses a race runs its next
// attempt with the row locked at once, and the record stays hot for the
// next calls; Report says what a call did. WithAdaptive(false) keeps
// Mutate optimistic.
func ExampleWithAdaptive() {
	ctx := context.Background()
	mine, err := repository.New[Account](db)
	if err != nil {
		panic(err)
	}
	other, _ := repository.New[Account](db) // another process, say
	acct := &Account{Owner: "ann", Balance: 0}
	if err := mine.Create(ctx, acct); err != nil {
		panic(err)
	}

	var rep repository.MutateReport
	first := true
	_, err = mine.Mutate(ctx, acct.ID, func(a *Account) error {
		if first { // the other process writes between our read and our write
			first = false
			if _, err := other.Mutate(ctx, acct.ID, func(a *Account) error { a.Balance += 10; return nil }); err != nil {
				return err
			}
		}
		a.Balance++
		return nil
	}, repository.Report(&rep))
	fmt.Println(err, rep.Attempts, "attempts,", rep.Locked, "locked, escalated:", rep.Escalated)

	got, _ := mine.Mutate(ctx, acct.ID, func(a *Account) error { a.Balance++; return nil }, repository.Report(&rep))
	fmt.Println(got.Balance, "hot:", rep.Hot, rep.Locked, "locked")

	optimistic, _ := repository.New[Account](db, repository.WithAdaptive(false))
	first = true
	_, err = optimistic.Mutate(ctx, acct.ID, func(a *Account) error {
		if first {
			first = false
			if _, err := other.Mutate(ctx, acct.ID, func(a *Account) error { a.Balance += 10; return nil }); err != nil {
				return err
			}
		}
		a.Balance++
		return nil
	}, repository.Report(&rep))
	fmt.Println(err, rep.Attempts, "attempts,", rep.Locked, "locked")
	// Prints:
	// <nil> 2 attempts, 1 locked, escalated: true
	// 12 hot: true 1 locked
	// <nil> 2 attempts, 0 locked
}

// WithMutateHook sees what every Mutate, Upsert and MutateRowLocked call did,
// for metrics.
func ExampleWithMutateHook() {
	ctx := context.Background()
	accounts, err := repository.New[Account](db, repository.WithMutateHook(func(_ context.Context, rep repository.MutateReport) {
		fmt.Println(rep)
	}))
	if err != nil {
		panic(err)
	}
	acct := &Account{Owner: "ann"}
	if err := accounts.Create(ctx, acct); err != nil {
		panic(err)
	}
	_, _ = accounts.Mutate(ctx, acct.ID, func(a *Account) error { a.Balance++; return nil })
	_, _ = accounts.MutateRowLocked(ctx, acct.ID, func(a *Account) error { a.Balance++; return nil })
	_, _ = accounts.Mutate(ctx, int64(42), func(a *Account) error { return nil })
	// Prints:
	// mutate accounts id=1: 1 attempts, 0 locked
	// mutateRowLocked accounts id=1: 1 attempts, 1 locked
	// mutate accounts id=42: 1 attempts, 0 locked: accounts: Get id=42: gormlock: record not found: accounts id=42
}
