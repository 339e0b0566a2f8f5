package repository_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/repository"
)

// ShopItem is a shop's product: a form edits its name and price, orders
// decrement its stock, which is outside the version.
type ShopItem struct {
	models.Model
	Name  string `json:"name"`
	Price int64  `json:"price"`
	Stock int64  `json:"stock" gormlock:"unversioned"`
}

// A stock tagged gormlock:"unversioned": an order's Apply does not advance
// the version, so the product form read before it saves without a
// conflict, and its stale copy of the stock is not written back.
func ExampleRepository_Apply_unversioned() {
	ctx := context.Background()
	if err := db.AutoMigrate(&ShopItem{}); err != nil {
		panic(err)
	}
	items, err := repository.New[ShopItem](db)
	if err != nil {
		panic(err)
	}
	lamp := &ShopItem{Name: "lamp", Price: 1000, Stock: 100}
	if err := items.Create(ctx, lamp); err != nil {
		panic(err)
	}

	form, _ := items.Get(ctx, lamp.ID) // the admin opens the form

	order, err := items.Apply(ctx, lamp.ID, []repository.Change{repository.Add("Stock", -10)}, repository.If("stock >= ?", 10))
	fmt.Println("order:", err, "stock:", order.Stock, "version kept:", order.Version == form.Version)

	form.Name = "desk lamp" // the form still holds stock 100
	fmt.Println("save:", items.Update(ctx, form), "stock:", form.Stock)
	// Prints:
	// order: <nil> stock: 90 version kept: true
	// save: <nil> stock: 90
}

// A stale write's error gives the record as it is now and the fields that
// differ: re-apply the user's change to it, or show them the difference.
func ExampleStaleError() {
	ctx := context.Background()
	if err := db.AutoMigrate(&ShopItem{}); err != nil {
		panic(err)
	}
	items, _ := repository.New[ShopItem](db)
	lamp := &ShopItem{Name: "lamp", Price: 1000}
	_ = items.Create(ctx, lamp)

	alice, _ := items.Get(ctx, lamp.ID)
	bob, _ := items.Get(ctx, lamp.ID)
	alice.Name = "desk lamp"
	_ = items.Update(ctx, alice)

	bob.Price = 900
	err := items.Update(ctx, bob)
	var se *repository.StaleError[ShopItem]
	if errors.As(err, &se) {
		fmt.Println("stale:", errors.Is(err, locking.ErrStaleData), "now:", se.Current.Name, se.Current.Price, "differing:", se.Fields)
		now := se.Current
		now.Price = bob.Price // bob's edit, on the record as it is now
		fmt.Println("resolved:", items.Update(ctx, now))
	}

	// A client that sent no version at all:
	err = items.Update(ctx, &ShopItem{Model: models.Model{ID: lamp.ID}, Name: "lamp"})
	fmt.Println("version missing:", errors.Is(err, locking.ErrVersionMissing), errors.Is(err, locking.ErrStaleData))
	// Prints:
	// stale: true now: desk lamp 1000 differing: [Name Price]
	// resolved: <nil>
	// version missing: true true
}
