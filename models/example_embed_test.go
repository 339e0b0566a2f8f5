package models_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/repository"
)

// An entity embedding Model gets its id from the database and its version
// from the repository; a write at a version someone else replaced is
// refused.
func ExampleModel() {
	// Invoice embeds Model: an auto-increment id, a version and timestamps.
	type Invoice struct {
		models.Model
		Total int64 `gorm:"column:total;not null"`
	}
	ctx := context.Background()
	// The application's own migration creates the table; the version column
	// is NOT NULL.
	if err := db.Exec(`CREATE TABLE invoices (
		id INTEGER PRIMARY KEY AUTOINCREMENT,
		total INTEGER NOT NULL,
		version INTEGER NOT NULL,
		created_at DATETIME NOT NULL,
		updated_at DATETIME NOT NULL)`).Error; err != nil {
		panic(err)
	}
	invoices, err := repository.New[Invoice](db)
	if err != nil {
		panic(err)
	}
	fmt.Println("schema:", invoices.VerifySchema(ctx))

	inv := &Invoice{Total: 100}
	if err := invoices.Create(ctx, inv); err != nil {
		panic(err)
	}
	fmt.Println("id:", inv.ID, "versioned:", inv.Version > 0, "created:", !inv.CreatedAt.IsZero())

	stale := *inv // a copy read before the update below
	inv.Total = 120
	fmt.Println("update:", invoices.Update(ctx, inv))
	stale.Total = 90
	fmt.Println("stale update refused:", errors.Is(invoices.Update(ctx, &stale), locking.ErrStaleData))
	// Prints:
	// schema: <nil>
	// id: 1 versioned: true created: true
	// update: <nil>
	// stale update refused: true
}

// An entity with its own key embeds Versioned: the version and timestamps
// without an id.
func ExampleVersioned() {
	// Page declares its own key.
	type Page struct {
		Slug string `gorm:"column:slug;primaryKey"`
		Body string `gorm:"column:body;not null"`
		models.Versioned
	}
	ctx := context.Background()
	if err := db.Exec(`CREATE TABLE pages (
		slug TEXT PRIMARY KEY,
		body TEXT NOT NULL,
		version INTEGER NOT NULL,
		created_at DATETIME NOT NULL,
		updated_at DATETIME NOT NULL)`).Error; err != nil {
		panic(err)
	}
	pages, err := repository.New[Page](db)
	if err != nil {
		panic(err)
	}
	if err := pages.Create(ctx, &Page{Slug: "about", Body: "draft"}); err != nil {
		panic(err)
	}
	p, err := pages.Mutate(ctx, "about", func(p *Page) error {
		p.Body = "final"
		return nil
	})
	fmt.Println(p.Slug, p.Body, err)
	// Prints:
	// about final <nil>
}

// A model that has its key and timestamps already, such as one embedding
// gorm.Model, embeds Versioning for the version alone.
func ExampleVersioning() {
	// Product is an existing GORM model: gorm.Model brings the key, the
	// timestamps and soft delete; Versioning adds the version.
	type Product struct {
		gorm.Model
		models.Versioning
		Name string `gorm:"not null"`
	}
	ctx := context.Background()
	if err := db.AutoMigrate(&Product{}); err != nil { // adds version NOT NULL DEFAULT 1
		panic(err)
	}
	products, err := repository.New[Product](db)
	if err != nil {
		panic(err)
	}
	lamp := &Product{Name: "lamp"}
	if err := products.Create(ctx, lamp); err != nil {
		panic(err)
	}
	read := lamp.Version
	lamp.Name = "desk lamp"
	if err := products.Update(ctx, lamp); err != nil {
		panic(err)
	}
	fmt.Println(lamp.ID, lamp.Name, "version advanced:", lamp.Version > read)
	// Prints:
	// 1 desk lamp version advanced: true
}

// A JSON column type for a model, Attributes (declared with the
// examples): stored as a JSON object, and a nil map as {}: never NULL.
func Example_attributes() {
	var none Attributes
	stored, _ := none.Value()
	sent, _ := json.Marshal(none)
	fmt.Println(stored, string(sent))

	var a Attributes
	if err := a.Scan(`{"lang":"en"}`); err != nil { // as the database returns it
		panic(err)
	}
	fmt.Println(a["lang"])
	// Output:
	// {} {}
	// en
}

// Document, declared with the examples, has a string key, Versioned and
// Attributes.
func ExampleVersioned_document() {
	ctx := context.Background()
	docs, err := repository.New[Document](db)
	if err != nil {
		panic(err)
	}
	if err := docs.Create(ctx, &Document{ID: "d1", Title: "draft", Attrs: Attributes{"lang": "en"}}); err != nil {
		panic(err)
	}
	d, err := docs.Get(ctx, "d1")
	if err != nil {
		panic(err)
	}
	fmt.Println(d.TableName(), d.ID, d.Title, d.Attrs["lang"])
	// Prints:
	// documents d1 draft en
}

// Account, declared with the examples, embeds Model: an auto-increment
// key.
func ExampleModel_account() {
	ctx := context.Background()
	accounts, err := repository.New[Account](db)
	if err != nil {
		panic(err)
	}
	acct := &Account{Owner: "ann", Balance: 100}
	if err := accounts.Create(ctx, acct); err != nil {
		panic(err)
	}
	acct, err = accounts.Mutate(ctx, acct.ID, func(a *Account) error {
		a.Balance += 50
		return nil
	})
	fmt.Println(acct.TableName(), acct.ID, acct.Owner, acct.Balance, err)
	// Prints:
	// accounts 1 ann 150 <nil>
}

// Job, declared with the examples, is a work-queue entry; on PostgreSQL workers take pending
// jobs with Claim, which SQLite cannot do (no SKIP LOCKED).
func ExampleModel_job() {
	ctx := context.Background()
	jobs, err := repository.New[Job](db)
	if err != nil {
		panic(err)
	}
	job := &Job{Queue: "mail", Payload: "welcome ann", Status: JobPending}
	if err := jobs.Create(ctx, job); err != nil {
		panic(err)
	}
	job, err = jobs.Mutate(ctx, job.ID, func(j *Job) error {
		j.Status, j.Runs, j.DoneBy = JobDone, j.Runs+1, "worker-1"
		return nil
	})
	fmt.Println(job.TableName(), job.Status, job.Runs, job.DoneBy, err)
	// Prints:
	// jobs done 1 worker-1 <nil>
}
