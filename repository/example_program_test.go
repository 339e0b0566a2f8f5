package repository_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/repository"
)

// Wallet is an application's own model: models.Model gives it an id and the
// version every guarded write checks.
type Wallet struct {
	models.Model
	Owner   string
	Balance int64
}

// The smallest program, on db (the application's *gorm.DB, from one of
// gormlock's openers): create a table, change a record safely, and see a
// stale write refused.
func Example() {
	ctx := context.Background()
	if err := db.AutoMigrate(&Wallet{}); err != nil {
		panic(err)
	}
	wallets, err := repository.New[Wallet](db)
	if err != nil {
		panic(err)
	}

	w := &Wallet{Owner: "ann", Balance: 100}
	if err := wallets.Create(ctx, w); err != nil {
		panic(err)
	}
	// Mutate reads, applies the change and writes it guarded by the version,
	// re-running the whole read-modify-write if someone else wrote first.
	got, err := wallets.Mutate(ctx, w.ID, func(w *Wallet) error {
		w.Balance -= 30
		return nil
	})
	fmt.Println(got.Balance, err)

	// w still holds the version it was created with: writing it back would
	// erase the change above, so it is refused.
	w.Balance = 0
	err = wallets.Update(ctx, w)
	fmt.Println(errors.Is(err, locking.ErrStaleData))
	// Prints:
	// 70 <nil>
	// true
}
