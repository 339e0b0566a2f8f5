package repository_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/repository"
)

// PurgeOperations deletes the operation records past their retention, on
// every table of the database. A key still within its retention is kept;
// one past it is purged, and is then forgotten.
func ExamplePurgeOperations() {
	ctx := context.Background()
	accounts, _ := repository.New[Account](db) // keys kept DefaultOperationRetention
	if err := accounts.Create(ctx, &Account{Owner: "ann"}, repository.OpKey("signup-ann")); err != nil {
		panic(err)
	}
	n, err := repository.PurgeOperations(ctx, db)
	fmt.Println("purged:", n, err)

	brief, _ := repository.New[Account](db, repository.WithOperationRetention(10*time.Millisecond))
	if err := brief.Create(ctx, &Account{Owner: "bob"}, repository.OpKey("signup-bob")); err != nil {
		panic(err)
	}
	time.Sleep(50 * time.Millisecond) // past bob's key's retention, well within ann's
	n, err = repository.PurgeOperations(ctx, db)
	fmt.Println("purged:", n, err)

	ann, _ := repository.LookupOperation(ctx, db, "signup-ann")
	bob, _ := repository.LookupOperation(ctx, db, "signup-bob")
	fmt.Println("ann's key remembered:", ann != nil, "bob's:", bob != nil)
	// Prints:
	// purged: 0 <nil>
	// purged: 1 <nil>
	// ann's key remembered: true bob's: false
}

// VerifyOperationSchema checks the table operation keys are recorded in; call
// it at start-up, after the migrations, when you use OpKey.
func ExampleVerifyOperationSchema() {
	ctx := context.Background()
	fmt.Println(repository.VerifyOperationSchema(ctx, db))

	if err := db.Migrator().DropTable(repository.OperationTable); err != nil {
		panic(err)
	}
	err := repository.VerifyOperationSchema(ctx, db)
	var se *repository.SchemaError
	fmt.Println("mismatch:", errors.Is(err, locking.ErrSchemaMismatch), errors.As(err, &se) && se.Table == repository.OperationTable)
	// Prints:
	// <nil>
	// mismatch: true true
}

// A repository built WithLeases refuses every guarded write of a record
// someone else has leased; the holder writes through its lease.
func ExampleWithLeases() {
	ctx := context.Background()
	docs, err := repository.New[Document](db, repository.WithLeases())
	if err != nil {
		panic(err)
	}
	if err := docs.Create(ctx, &Document{ID: "doc-1", Title: "draft"}); err != nil {
		panic(err)
	}
	_, lease, err := docs.Leases().Acquire(ctx, "doc-1", "alice")
	if err != nil {
		panic(err)
	}

	bobs, _ := docs.Get(ctx, "doc-1") // reading never waits
	bobs.Title = "bob's draft"
	err = docs.Update(ctx, bobs)
	fmt.Println("bob's Update:", errors.Is(err, locking.ErrLeased))

	fmt.Println("alice releases:", docs.Leases().Release(ctx, lease))
	fmt.Println("bob's Update:", docs.Update(ctx, bobs))

	plain, _ := repository.New[Document](db) // without WithLeases
	_, _, err = plain.Leases().Acquire(ctx, "doc-1", "carol")
	fmt.Println("leases off:", errors.Is(err, locking.ErrInvalidArgument))
	// Prints:
	// bob's Update: true
	// alice releases: <nil>
	// bob's Update: <nil>
	// leases off: true
}

// WithCallbacks sends the repository's own statements (Update's guarded
// UPDATE here) through GORM's Raw and Row callbacks, so that a callback the
// application registered with db.Callback() sees them.
func ExampleWithCallbacks() {
	ctx := context.Background()
	sawUpdate := false
	watch := func(tx *gorm.DB) {
		if strings.HasPrefix(tx.Statement.SQL.String(), "UPDATE") {
			sawUpdate = true
		}
	}
	if err := db.Callback().Raw().After("gorm:raw").Register("app:watch", watch); err != nil {
		panic(err)
	}
	if err := db.Callback().Row().After("gorm:row").Register("app:watch", watch); err != nil {
		panic(err)
	}

	fast, _ := repository.New[Account](db) // no plugins: the fast path
	acct := &Account{Owner: "ann", Balance: 100}
	_ = fast.Create(ctx, acct)
	acct.Balance = 90
	fmt.Println(fast.Update(ctx, acct), "callback saw the UPDATE:", sawUpdate)

	traced, _ := repository.New[Account](db, repository.WithCallbacks(true))
	acct.Balance = 80
	fmt.Println(traced.Update(ctx, acct), "callback saw the UPDATE:", sawUpdate)
	// Prints:
	// <nil> callback saw the UPDATE: false
	// <nil> callback saw the UPDATE: true
}

// WithOperationRetention sets how long operation keys are remembered; a
// retention that is not positive is refused by New.
func ExampleWithOperationRetention() {
	ctx := context.Background()
	week := 7 * 24 * time.Hour
	for _, d := range []time.Duration{0, -time.Hour, week} {
		_, err := repository.New[Account](db, repository.WithOperationRetention(d))
		fmt.Printf("%v: built %v, invalid argument %v\n", d, err == nil, errors.Is(err, locking.ErrInvalidArgument))
	}

	accounts, _ := repository.New[Account](db, repository.WithOperationRetention(week))
	if err := accounts.Create(ctx, &Account{Owner: "ann"}, repository.OpKey("signup-ann")); err != nil {
		panic(err)
	}
	op, _ := repository.LookupOperation(ctx, db, "signup-ann")
	fmt.Println("key remembered for a week:", op.ExpiresAt.Sub(op.At) == week)
	// Prints:
	// 0s: built false, invalid argument true
	// -1h0m0s: built false, invalid argument true
	// 168h0m0s: built true, invalid argument false
	// key remembered for a week: true
}

// Preload makes Get and Find load an association too (Find with a condition
// on the associated records, here); an unknown association is refused.
func ExamplePreload() {
	type Line struct {
		ID, OrderID int64
		SKU         string
	}
	type Order struct {
		models.Model // the key and the version
		Customer     string
		Lines        []Line
	}
	ctx := context.Background()
	if err := db.AutoMigrate(&Order{}, &Line{}); err != nil {
		panic(err)
	}
	orders, _ := repository.New[Order](db)
	o := &Order{Customer: "ann"}
	if err := orders.Create(ctx, o); err != nil {
		panic(err)
	}
	db.Create(&[]Line{{OrderID: o.ID, SKU: "lamp"}, {OrderID: o.ID, SKU: "bulb"}})

	plain, _ := orders.Get(ctx, o.ID)
	got, err := orders.Get(ctx, o.ID, repository.Preload("Lines"))
	fmt.Println("lines without Preload:", len(plain.Lines), "with:", len(got.Lines), err)
	found, _ := orders.Find(ctx, repository.Preload("Lines", "sku = ?", "bulb"))
	fmt.Println("Find, only the bulbs:", len(found[0].Lines), found[0].Lines[0].SKU)
	_, err = orders.Get(ctx, o.ID, repository.Preload("Payments"))
	fmt.Println("unknown association:", errors.Is(err, locking.ErrInvalidArgument))
	// Prints:
	// lines without Preload: 0 with: 2 <nil>
	// Find, only the bulbs: 1 bulb
	// unknown association: true
}

// Update writes the record's own row only, so it refuses an entity whose
// association fields hold records (a preloaded one, here) rather than drop
// their changes silently; SkipAssociations says that is meant.
func ExampleSkipAssociations() {
	type Line struct {
		ID, OrderID int64
		Qty         int
	}
	type Order struct {
		models.Model
		Customer string
		Lines    []Line
	}
	ctx := context.Background()
	if err := db.AutoMigrate(&Order{}, &Line{}); err != nil {
		panic(err)
	}
	orders, _ := repository.New[Order](db)
	o := &Order{Customer: "ann"}
	if err := orders.Create(ctx, o); err != nil {
		panic(err)
	}
	db.Create(&Line{OrderID: o.ID, Qty: 1})

	o, _ = orders.Get(ctx, o.ID, repository.Preload("Lines"))
	o.Customer = "ann smith"
	o.Lines[0].Qty = 2 // Update writes no line, with or without the option
	err := orders.Update(ctx, o)
	fmt.Println("refused:", errors.Is(err, locking.ErrInvalidArgument), "names Lines:", strings.Contains(err.Error(), "Lines"))
	fmt.Println("with SkipAssociations:", orders.Update(ctx, o, repository.SkipAssociations()))
	after, _ := orders.Get(ctx, o.ID, repository.Preload("Lines"))
	fmt.Println(after.Customer, "line qty:", after.Lines[0].Qty)
	// Prints:
	// refused: true names Lines: true
	// with SkipAssociations: <nil>
	// ann smith line qty: 1
}

// A key bound to a fingerprint (what identifies the request it came with)
// answers a repeat of that request, and refuses the key sent with another.
func ExampleOperationKey_WithFingerprint() {
	ctx := context.Background()
	accounts, _ := repository.New[Account](db)
	acct := &Account{Owner: "ann", Balance: 100}
	if err := accounts.Create(ctx, acct); err != nil {
		panic(err)
	}
	withdraw := func(n int64) func(*Account) error {
		return func(a *Account) error { a.Balance -= n; return nil }
	}

	key := repository.OpKey("req-42")
	first, err := accounts.Mutate(ctx, acct.ID, withdraw(30), key.WithFingerprint("withdraw 30"))
	fmt.Println(first.Balance, err)
	again, err := accounts.Mutate(ctx, acct.ID, withdraw(30), key.WithFingerprint("withdraw 30"))
	fmt.Println(again.Balance, err, "(the repeat is answered, not applied)")

	_, err = accounts.Mutate(ctx, acct.ID, withdraw(50), key.WithFingerprint("withdraw 50"))
	fmt.Println("reused:", errors.Is(err, locking.ErrOperationKeyReused), errors.Is(err, locking.ErrInvalidArgument))
	op, _ := repository.LookupOperation(ctx, db, "req-42")
	fmt.Printf("recorded: %q\n", op.Fingerprint)
	// Prints:
	// 70 <nil>
	// 70 <nil> (the repeat is answered, not applied)
	// reused: true true
	// recorded: "withdraw 30"
}
