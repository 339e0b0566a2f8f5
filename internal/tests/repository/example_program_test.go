package repository_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	sqliteopen "github.com/gormlock/gormlock/opendb/sqlite"

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

// The smallest complete program: open SQLite, create a table, change a
// record safely, and see a stale write refused.
func Example() {
	dir, _ := os.MkdirTemp("", "gormlock")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	db, err := sqliteopen.Open(filepath.Join(dir, "app.db"))
	if err != nil {
		panic(err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		panic(err)
	}
	defer sqlDB.Close()
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
	// Output:
	// 70 <nil>
	// true
}
