package repository_test

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

// An application that adopts gormlock in one place while another still
// writes with plain GORM: with the plugin registered, the plain GORM write
// advances the version, so the guarded write from a copy read before it is
// refused instead of erasing it, and Mutate reads again.
func ExamplePlugin() {
	if err := db.Use(repository.Plugin()); err != nil {
		panic(err)
	}
	ctx := context.Background()
	accounts, err := repository.New[Account](db)
	if err != nil {
		panic(err)
	}
	a := &Account{Owner: "ann", Balance: 100}
	if err := accounts.Create(ctx, a); err != nil {
		panic(err)
	}
	form := *a // the edit form's copy

	// Billing, not moved to gormlock yet: a plain GORM update.
	err = db.Model(&Account{}).Where("id = ?", a.ID).
		Update("balance", gorm.Expr("balance - ?", 30)).Error
	if err != nil {
		panic(err)
	}

	form.Frozen = true // the form writes every column, the old balance too
	err = accounts.Update(ctx, &form)
	fmt.Println("the form's copy is stale:", errors.Is(err, locking.ErrStaleData))

	got, err := accounts.Mutate(ctx, a.ID, func(a *Account) error {
		a.Frozen = true // on a fresh read
		return nil
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("balance:", got.Balance, "frozen:", got.Frozen)
	// Prints:
	// the form's copy is stale: true
	// balance: 70 frozen: true
}

// With GuardGORMUpdates, a plain GORM Save of a record read with its
// version is itself guarded: from a stale copy it writes nothing and
// returns locking.ErrStaleData.
func ExampleGuardGORMUpdates() {
	if err := db.Use(repository.Plugin(repository.GuardGORMUpdates())); err != nil {
		panic(err)
	}
	var alice, bob Account
	if err := db.Create(&Account{Owner: "ann", Balance: 100}).Error; err != nil {
		panic(err)
	}
	db.First(&alice)
	db.First(&bob)

	alice.Balance -= 30
	fmt.Println("alice:", db.Save(&alice).Error)
	bob.Balance += 50
	err := db.Save(&bob).Error
	var stale *locking.StaleDataError
	fmt.Println("bob's copy is stale:", errors.As(err, &stale), stale.Actual == alice.Version)

	var now Account
	db.First(&now)
	fmt.Println("balance:", now.Balance)
	// Prints:
	// alice: <nil>
	// bob's copy is stale: true true
	// balance: 70
}
