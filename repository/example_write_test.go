package repository_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

// Two writers hold the same version; the second one's Update is refused
// instead of erasing the first one's change.
func ExampleRepository_Update() {
	ctx := context.Background()
	accounts, err := repository.New[Account](db)
	if err != nil {
		panic(err)
	}
	acct := &Account{Owner: "ann", Balance: 100}
	if err := accounts.Create(ctx, acct); err != nil {
		panic(err)
	}

	alice, _ := accounts.Get(ctx, acct.ID)
	bob, _ := accounts.Get(ctx, acct.ID)

	alice.Balance += 50
	fmt.Println("alice:", accounts.Update(ctx, alice), "version advanced:", alice.Version > bob.Version)

	bob.Balance -= 30
	err = accounts.Update(ctx, bob)
	var stale *locking.StaleDataError
	if errors.As(err, &stale) {
		fmt.Println("bob: stale, held the version he read:", stale.Expected == bob.Version, "record is at alice's:", stale.Actual == alice.Version)
	}
	fmt.Println("is ErrStaleData:", errors.Is(err, locking.ErrStaleData))

	final, _ := accounts.Get(ctx, acct.ID)
	fmt.Println("balance:", final.Balance)
	// Prints:
	// alice: <nil> version advanced: true
	// bob: stale, held the version he read: true record is at alice's: true
	// is ErrStaleData: true
	// balance: 150
}

// Mutate re-reads and re-applies the change until it wins; fn must only
// change the entity it is given, because it may run more than once.
func ExampleRepository_Mutate() {
	ctx := context.Background()
	accounts, _ := repository.New[Account](db)
	acct := &Account{Owner: "ann", Balance: 100}
	_ = accounts.Create(ctx, acct)

	calls := 0
	got, err := accounts.Mutate(ctx, acct.ID, func(a *Account) error {
		calls++
		if calls == 1 { // simulate another client writing between our read and write
			db.Exec("UPDATE accounts SET balance = balance + 1, version = version + 1 WHERE id = ?", a.ID)
		}
		if a.Balance < 30 {
			return errors.New("insufficient funds") // aborts without writing
		}
		a.Balance -= 30
		return nil
	})
	fmt.Println(err, "calls:", calls, "balance:", got.Balance, "newer than the other client's write:", got.Version > acct.Version+1)
	// Prints:
	// <nil> calls: 2 balance: 71 newer than the other client's write: true
}

// Upsert loads or creates, mutates, and writes, retrying the whole cycle when
// another writer wins (the "addOrUpdate" pattern).
func ExampleRepository_Upsert() {
	ctx := context.Background()
	docs, _ := repository.New[Document](db)

	newDoc := func() *Document { return &Document{Title: "notes", Attrs: Attributes{}} }
	var last int64
	for _, field := range []string{"field1", "field2"} {
		d, err := docs.Upsert(ctx, "doc-1", newDoc, func(d *Document) error {
			d.Attrs[field] = "set"
			return nil
		})
		if err != nil {
			panic(err)
		}
		fmt.Println(d.ID, "newer version:", d.Version > last, d.Attrs)
		last = d.Version
	}
	// Prints:
	// doc-1 newer version: true map[field1:set]
	// doc-1 newer version: true map[field1:set field2:set]
}

// RunInTx makes guarded writes (of one or several repositories) one unit: a stale write
// rolls back everything before it.
func ExampleRunInTx() {
	ctx := context.Background()
	accounts, _ := repository.New[Account](db)
	from := &Account{Owner: "ann", Balance: 100}
	to := &Account{Owner: "bob", Balance: 0}
	_ = accounts.Create(ctx, from)
	_ = accounts.Create(ctx, to)
	db.Exec("UPDATE accounts SET version = version + 1 WHERE id = ?", to.ID) // our copy of bob goes stale

	err := repository.RunInTx(ctx, db, func(ctx context.Context) error {
		from.Balance -= 40
		if err := accounts.Update(ctx, from); err != nil {
			return err
		}
		to.Balance += 40
		return accounts.Update(ctx, to)
	})
	fmt.Println("stale:", errors.Is(err, locking.ErrStaleData))
	ann, _ := accounts.Get(ctx, from.ID)
	fmt.Println("ann still has", ann.Balance)
	// Prints:
	// stale: true
	// ann still has 100
}
