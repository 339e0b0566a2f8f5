package repository_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

// MutateRowLocked locks the row, changes it and writes it in one transaction:
// no retries, and the version still advances for optimistic readers.
func ExampleRepository_MutateRowLocked() {
	ctx := context.Background()
	accounts, err := repository.New[Account](db)
	if err != nil {
		panic(err)
	}
	acct := &Account{Owner: "ann", Balance: 100}
	if err := accounts.Create(ctx, acct); err != nil {
		panic(err)
	}

	var rep repository.MutateReport
	got, err := accounts.MutateRowLocked(ctx, acct.ID, func(a *Account) error {
		a.Balance -= 30
		return nil
	}, repository.NoWait(), repository.Report(&rep))
	fmt.Println(got.Balance, got.Version > acct.Version, rep.Attempts, err)

	// An optimistic writer still holding the version it created is refused.
	acct.Balance = 0
	fmt.Println(errors.Is(accounts.Update(ctx, acct), locking.ErrStaleData))
	// Prints:
	// 70 true 1 <nil>
	// true
}

// LockRows locks several rows in key order inside RunInTx; UpdateMany
// writes them all or none.
func ExampleRepository_LockRows() {
	ctx := context.Background()
	accounts, err := repository.New[Account](db)
	if err != nil {
		panic(err)
	}
	// bob's account is older: its key is the lower one.
	to := &Account{Owner: "bob", Balance: 0}
	from := &Account{Owner: "ann", Balance: 100}
	for _, a := range []*Account{to, from} {
		if err := accounts.Create(ctx, a); err != nil {
			panic(err)
		}
	}

	err = repository.RunInTx(ctx, db, func(ctx context.Context) error {
		both, err := accounts.LockRows(ctx, []any{from.ID, to.ID})
		if err != nil {
			return err
		}
		// Returned in key order, not in the order asked: pick by key.
		src, dst := &both[0], &both[1]
		if src.ID != from.ID {
			src, dst = dst, src
		}
		src.Balance -= 25
		dst.Balance += 25
		return accounts.UpdateMany(ctx, []*Account{src, dst})
	})
	fmt.Println("transfer:", err)
	for _, before := range []*Account{from, to} {
		a, _ := accounts.Get(ctx, before.ID)
		fmt.Println(a.Owner, a.Balance, "written:", a.Version > before.Version)
	}
	// Prints:
	// transfer: <nil>
	// ann 75 written: true
	// bob 25 written: true
}

// When one record of a batch is stale, UpdateMany writes none of them and
// names the stale one.
func ExampleRepository_UpdateMany() {
	ctx := context.Background()
	accounts, err := repository.New[Account](db)
	if err != nil {
		panic(err)
	}
	var batch []*Account
	for _, owner := range []string{"ann", "bob", "cy"} {
		a := &Account{Owner: owner, Balance: 10}
		if err := accounts.Create(ctx, a); err != nil {
			panic(err)
		}
		batch = append(batch, a)
	}
	// Someone else changes bob's account meanwhile.
	if _, err := accounts.Mutate(ctx, batch[1].ID, func(a *Account) error { a.Frozen = true; return nil }); err != nil {
		panic(err)
	}

	for _, a := range batch {
		a.Balance += 5
	}
	err = accounts.UpdateMany(ctx, batch)
	var be *locking.BatchError
	if errors.As(err, &be) {
		fmt.Println("stale:", errors.Is(err, locking.ErrStaleData), "ids:", len(be.IDs()), be.IDs()[0] == batch[1].ID)
	}
	ann, _ := accounts.Get(ctx, batch[0].ID)
	fmt.Println("ann untouched:", ann.Balance, ann.Version == batch[0].Version)
	// Prints:
	// stale: true ids: 1 true
	// ann untouched: 10 true
}

// ForceIncrement marks an aggregate root changed without touching its
// columns, so holders of the old version are refused.
func ExampleRepository_ForceIncrement() {
	ctx := context.Background()
	docs, err := repository.New[Document](db)
	if err != nil {
		panic(err)
	}
	doc := &Document{ID: "order-1", Title: "Order 1"}
	if err := docs.Create(ctx, doc); err != nil {
		panic(err)
	}
	stale := *doc
	// ... a child row of order-1 changed: the order itself must move on too ...
	fmt.Println(docs.ForceIncrement(ctx, doc), doc.Version > stale.Version)
	stale.Title = "Order one"
	fmt.Println(errors.Is(docs.Update(ctx, &stale), locking.ErrStaleData))
	// Prints:
	// <nil> true
	// true
}
