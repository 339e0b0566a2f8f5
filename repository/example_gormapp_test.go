package repository_test

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/repository"
)

// Product is an existing GORM application's model: gorm.Model, plus the one
// line gormlock needs.
type Product struct {
	gorm.Model
	models.Versioning
	Name  string
	Stock int
}

// An application's own gorm.Model model, its table made by AutoMigrate:
// two clients change the same product, the second is told; a delete is
// GORM's soft delete, guarded, and can be undone.
func Example_gormModel() {
	ctx := context.Background()
	if err := db.AutoMigrate(&Product{}); err != nil {
		panic(err)
	}
	products, err := repository.New[Product](db)
	if err != nil {
		panic(err)
	}
	if err := products.VerifySchema(ctx); err != nil {
		panic(err)
	}

	p := &Product{Name: "lamp", Stock: 3}
	if err := products.Create(ctx, p); err != nil {
		panic(err)
	}
	alice, _ := products.Get(ctx, p.ID)
	bob, _ := products.Get(ctx, p.ID)
	alice.Stock--
	fmt.Println("alice sells one:", products.Update(ctx, alice))
	bob.Stock--
	err = products.Update(ctx, bob)
	fmt.Println("bob's copy is stale:", errors.Is(err, locking.ErrStaleData))

	fmt.Println("delete:", products.Delete(ctx, alice))
	_, err = products.Get(ctx, p.ID)
	fmt.Println("then not found:", errors.Is(err, locking.ErrNotFound))
	var rows int64
	db.Unscoped().Model(&Product{}).Count(&rows)
	fmt.Println("rows kept:", rows)
	fmt.Println("restore:", products.Restore(ctx, alice))
	back, _ := products.Get(ctx, p.ID)
	fmt.Println("stock:", back.Stock)
	// Prints:
	// alice sells one: <nil>
	// bob's copy is stale: true
	// delete: <nil>
	// then not found: true
	// rows kept: 1
	// restore: <nil>
	// stock: 2
}

// Ticket has a composite primary key: a multi-tenant (TenantID, ID).
type Ticket struct {
	TenantID string `gorm:"primaryKey"`
	ID       int64  `gorm:"primaryKey;autoIncrement:false"`
	models.Versioning
	Title string
}

// A model with a composite primary key takes a repository.Key wherever an
// id goes; its text form, for URLs, joins the values with commas.
func ExampleKey() {
	ctx := context.Background()
	if err := db.AutoMigrate(&Ticket{}); err != nil {
		panic(err)
	}
	tickets, _ := repository.New[Ticket](db)
	for _, tenant := range []string{"acme", "globex"} {
		if err := tickets.Create(ctx, &Ticket{TenantID: tenant, ID: 1, Title: tenant + "'s first"}); err != nil {
			panic(err)
		}
	}
	t, _ := tickets.Mutate(ctx, repository.Key{"acme", 1}, func(t *Ticket) error {
		t.Title = "acme's first, edited"
		return nil
	})
	id, _, _ := tickets.Adapter().Identity(t)
	fmt.Println(id, "->", t.Title)
	parsed, _ := tickets.Adapter().ParseID("globex,1")
	other, _ := tickets.Get(ctx, parsed)
	fmt.Println(parsed, "->", other.Title)
	// Prints:
	// acme,1 -> acme's first, edited
	// globex,1 -> globex's first
}
