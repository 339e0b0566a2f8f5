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

// New inspects the model once: a model with a version field gets a
// repository, one without is refused before any I/O.
func ExampleNew() {
	accounts, err := repository.New[Account](db)
	fmt.Println(accounts.Table(), err)

	type Note struct { // no Version field, no `gormlock:"version"` tag
		ID   int64
		Text string
	}
	_, err = repository.New[Note](db)
	fmt.Println("refused:", errors.Is(err, locking.ErrInvalidArgument))
	// Prints:
	// accounts <nil>
	// refused: true
}

// Get reads one record by its key; a key with no record gives an error
// matching locking.ErrNotFound.
func ExampleRepository_Get() {
	ctx := context.Background()
	accounts, _ := repository.New[Account](db)
	acct := &Account{Owner: "ann", Balance: 100}
	if err := accounts.Create(ctx, acct); err != nil {
		panic(err)
	}

	got, err := accounts.Get(ctx, acct.ID)
	fmt.Println(got.Owner, got.Balance, err, "same version:", got.Version == acct.Version)

	_, err = accounts.Get(ctx, int64(42))
	fmt.Println("not found:", errors.Is(err, locking.ErrNotFound))
	var nf *locking.NotFoundError
	fmt.Println("typed:", errors.As(err, &nf))
	// Prints:
	// ann 100 <nil> same version: true
	// not found: true
	// typed: true
}

// Find filters with Where, sorts with OrderBy (the key always ends the
// order) and pages with Limit and Offset.
func ExampleRepository_Find() {
	ctx := context.Background()
	accounts, _ := repository.New[Account](db)
	for _, a := range []Account{{Owner: "ann", Balance: 30}, {Owner: "bob", Balance: 70}, {Owner: "cy", Balance: 50}, {Owner: "dee", Balance: 5}} {
		if err := accounts.Create(ctx, &a); err != nil {
			panic(err)
		}
	}

	rich := []repository.FindOption{repository.Where("balance >= ?", 10), repository.OrderBy("Balance", true)}
	for _, page := range []int{0, 2} {
		got, err := accounts.Find(ctx, append(rich, repository.Limit(2), repository.Offset(page))...)
		fmt.Print("page at ", page, ":")
		for _, a := range got {
			fmt.Print(" ", a.Owner, "=", a.Balance)
		}
		fmt.Println(" err:", err)
	}
	none, err := accounts.Find(ctx, repository.Where("owner = ?", "zed"))
	fmt.Println("none:", len(none), err)
	// Prints:
	// page at 0: bob=70 cy=50 err: <nil>
	// page at 2: ann=30 err: <nil>
	// none: 0 <nil>
}

// Create inserts a record and gives it its first version; a second record
// with the same key is refused with locking.ErrAlreadyExists.
func ExampleRepository_Create() {
	ctx := context.Background()
	docs, _ := repository.New[Document](db)

	doc := &Document{ID: "doc-1", Title: "notes"}
	fmt.Println(docs.Create(ctx, doc), "versioned:", doc.Version > 0, "created at set:", !doc.CreatedAt.IsZero())

	err := docs.Create(ctx, &Document{ID: "doc-1", Title: "other notes"})
	fmt.Println("exists:", errors.Is(err, locking.ErrAlreadyExists))

	// An auto-increment key left zero is assigned by the database.
	accounts, _ := repository.New[Account](db)
	acct := &Account{Owner: "ann"}
	fmt.Println(accounts.Create(ctx, acct), "id:", acct.ID)
	// Prints:
	// <nil> versioned: true created at set: true
	// exists: true
	// <nil> id: 1
}

// Delete is guarded by the version like Update: a copy read before another
// write is refused with locking.ErrStaleData and the record stays.
func ExampleRepository_Delete() {
	ctx := context.Background()
	accounts, _ := repository.New[Account](db)
	acct := &Account{Owner: "ann", Balance: 100}
	if err := accounts.Create(ctx, acct); err != nil {
		panic(err)
	}

	fresh, _ := accounts.Mutate(ctx, acct.ID, func(a *Account) error { a.Frozen = true; return nil })
	err := accounts.Delete(ctx, acct) // acct holds the version before Mutate
	fmt.Println("stale:", errors.Is(err, locking.ErrStaleData))
	_, err = accounts.Get(ctx, acct.ID)
	fmt.Println("still there:", err == nil)

	fmt.Println("delete:", accounts.Delete(ctx, fresh))
	_, err = accounts.Get(ctx, acct.ID)
	fmt.Println("gone:", errors.Is(err, locking.ErrNotFound))
	// Prints:
	// stale: true
	// still there: true
	// delete: <nil>
	// gone: true
}

// Restore brings back a soft-deleted record (a model with a gorm.DeletedAt
// field), read with IncludeDeleted; a record that is not deleted is refused.
func ExampleRepository_Restore() {
	ctx := context.Background()
	type Memo struct {
		models.Model
		Text      string
		DeletedAt gorm.DeletedAt `gorm:"index"`
	}
	if err := db.AutoMigrate(&Memo{}); err != nil {
		panic(err)
	}
	memos, _ := repository.New[Memo](db)
	m := &Memo{Text: "call bob"}
	if err := memos.Create(ctx, m); err != nil {
		panic(err)
	}
	fmt.Println("not deleted:", errors.Is(memos.Restore(ctx, m), locking.ErrInvalidArgument))
	if err := memos.Delete(ctx, m); err != nil {
		panic(err)
	}

	deleted, err := memos.Get(ctx, m.ID, repository.IncludeDeleted())
	fmt.Println("found deleted:", err, deleted.DeletedAt.Valid)
	fmt.Println("restore:", memos.Restore(ctx, deleted), "cleared:", !deleted.DeletedAt.Valid, "newer:", deleted.Version > m.Version)
	back, err := memos.Get(ctx, m.ID)
	fmt.Println(back.Text, err)
	// Prints:
	// not deleted: true
	// found deleted: <nil> true
	// restore: <nil> cleared: true newer: true
	// call bob <nil>
}

// IncludeDeleted makes Find (and Get) see soft-deleted records too; their
// DeletedAt tells them apart.
func ExampleIncludeDeleted() {
	ctx := context.Background()
	type Memo struct {
		models.Model
		Text      string
		DeletedAt gorm.DeletedAt `gorm:"index"`
	}
	if err := db.AutoMigrate(&Memo{}); err != nil {
		panic(err)
	}
	memos, _ := repository.New[Memo](db)
	for _, text := range []string{"keep", "drop"} {
		m := &Memo{Text: text}
		if err := memos.Create(ctx, m); err != nil {
			panic(err)
		}
		if text == "drop" {
			if err := memos.Delete(ctx, m); err != nil {
				panic(err)
			}
		}
	}

	live, _ := memos.Find(ctx)
	fmt.Println("live:", len(live))
	all, _ := memos.Find(ctx, repository.IncludeDeleted())
	for _, m := range all {
		fmt.Println(m.Text, "deleted:", m.DeletedAt.Valid)
	}
	// Prints:
	// live: 1
	// keep deleted: false
	// drop deleted: true
}

// Permanently makes Delete of a soft-delete model remove the row, still
// guarded by the version.
func ExamplePermanently() {
	ctx := context.Background()
	type Memo struct {
		models.Model
		Text      string
		DeletedAt gorm.DeletedAt `gorm:"index"`
	}
	if err := db.AutoMigrate(&Memo{}); err != nil {
		panic(err)
	}
	memos, _ := repository.New[Memo](db)
	m := &Memo{Text: "secret"}
	if err := memos.Create(ctx, m); err != nil {
		panic(err)
	}
	old := *m
	_, _ = memos.Mutate(ctx, m.ID, func(m *Memo) error { m.Text = "top secret"; return nil })
	err := memos.Delete(ctx, &old, repository.Permanently())
	fmt.Println("stale:", errors.Is(err, locking.ErrStaleData))

	fresh, _ := memos.Get(ctx, m.ID)
	fmt.Println("delete:", memos.Delete(ctx, fresh, repository.Permanently()))
	_, err = memos.Get(ctx, m.ID, repository.IncludeDeleted())
	var rows int64
	db.Unscoped().Model(&Memo{}).Count(&rows)
	fmt.Println("not found:", errors.Is(err, locking.ErrNotFound), "rows:", rows)
	// Prints:
	// stale: true
	// delete: <nil>
	// not found: true rows: 0
}

// VerifySchema checks the table against the model at start-up; every
// problem is listed in a *SchemaError matching ErrSchemaMismatch.
func ExampleRepository_VerifySchema() {
	ctx := context.Background()
	accounts, _ := repository.New[Account](db)
	fmt.Println("accounts:", accounts.VerifySchema(ctx))

	type Note struct {
		models.Model
		Text string
	}
	// A hand-made table without the text column and with a nullable version.
	db.Exec("CREATE TABLE notes (id INTEGER PRIMARY KEY, version INTEGER, created_at DATETIME NOT NULL, updated_at DATETIME NOT NULL)")
	notes, _ := repository.New[Note](db)
	err := notes.VerifySchema(ctx)
	var se *repository.SchemaError
	if errors.As(err, &se) {
		fmt.Println(se.Table, errors.Is(err, locking.ErrSchemaMismatch))
		for _, p := range se.Problems {
			fmt.Println("-", p)
		}
	}
	// Prints:
	// accounts: <nil>
	// notes true
	// - version column version is nullable; it must be NOT NULL: SQLite cannot add NOT NULL to a column in place: create the table again with `version` BIGINT NOT NULL and copy the rows, giving those without a version one (CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER))
	// - column text (field Text) is missing
}

// Table names the model's table, as GORM's naming strategy (or the model's
// TableName method) gives it.
func ExampleRepository_Table() {
	accounts, _ := repository.New[Account](db)
	type OrderLine struct {
		models.Model
		Qty int
	}
	lines, _ := repository.New[OrderLine](db)
	fmt.Println(accounts.Table(), lines.Table())
	// Prints:
	// accounts order_lines
}

// DB gives a plain GORM session for reads the repository does not offer;
// inside RunInTx it is the transaction, so it sees the transaction's writes.
func ExampleRepository_DB() {
	ctx := context.Background()
	accounts, _ := repository.New[Account](db)
	ann, bob := &Account{Owner: "ann", Balance: 10}, &Account{Owner: "bob", Balance: 10}
	for _, a := range []*Account{ann, bob} {
		if err := accounts.Create(ctx, a); err != nil {
			panic(err)
		}
	}
	total := func(ctx context.Context) (sum int64) {
		accounts.DB(ctx).Model(&Account{}).Select("SUM(balance)").Scan(&sum)
		return sum
	}
	fmt.Println("total:", total(ctx))

	_ = repository.RunInTx(ctx, db, func(ctx context.Context) error {
		if _, err := accounts.Mutate(ctx, ann.ID, func(a *Account) error { a.Balance += 5; return nil }); err != nil {
			return err
		}
		fmt.Println("in the transaction:", total(ctx))
		return nil
	})
	// Prints:
	// total: 20
	// in the transaction: 25
}

// An operation key makes a retried write apply once: the client repeats the
// call after losing the reply, and the second call returns the record as it is.
func ExampleOpKey() {
	ctx := context.Background()
	accounts, _ := repository.New[Account](db)
	acct := &Account{Owner: "ann", Balance: 100}
	if err := accounts.Create(ctx, acct); err != nil {
		panic(err)
	}

	key := repository.OpKey("withdraw-7f3a") // a new UUID per logical operation
	withdraw := func(a *Account) error { a.Balance -= 30; return nil }
	first, err := accounts.Mutate(ctx, acct.ID, withdraw, key)
	fmt.Println(first.Balance, err)
	again, err := accounts.Mutate(ctx, acct.ID, withdraw, key) // the reply was lost: retry
	fmt.Println(again.Balance, err, "same version:", again.Version == first.Version)

	// The key is bound to its first use: another write with it is refused.
	acct2 := &Account{Owner: "bob"}
	err = accounts.Create(ctx, acct2, key)
	fmt.Println("reused:", errors.Is(err, locking.ErrOperationKeyReused))
	// Prints:
	// 70 <nil>
	// 70 <nil> same version: true
	// reused: true
}

// LookupOperation tells whether the write made with a key was applied, to
// resolve an outcome reported as locking.ErrCommitUnknown.
func ExampleLookupOperation() {
	ctx := context.Background()
	accounts, _ := repository.New[Account](db)
	acct := &Account{Owner: "ann", Balance: 100}
	if err := accounts.Create(ctx, acct, repository.OpKey("signup-ann")); err != nil {
		panic(err)
	}

	op, err := repository.LookupOperation(ctx, db, "signup-ann")
	fmt.Println(op.Kind, op.Table, op.RecordKey, op.Version == acct.Version, err)
	op, err = repository.LookupOperation(ctx, db, "never-sent")
	fmt.Println(op, err)
	// Prints:
	// create accounts 1 true <nil>
	// <nil> <nil>
}

// WithRetryPolicy sets how many attempts Mutate and Upsert make; when they
// run out the error is a *locking.RetryExhaustedError matching ErrStaleData.
func ExampleWithRetryPolicy() {
	ctx := context.Background()
	policy := locking.DefaultRetryPolicy()
	policy.MaxAttempts = 2
	accounts, _ := repository.New[Account](db, repository.WithRetryPolicy(policy))
	acct := &Account{Owner: "ann"}
	if err := accounts.Create(ctx, acct); err != nil {
		panic(err)
	}

	_, err := accounts.Mutate(ctx, acct.ID, func(a *Account) error {
		db.Exec("UPDATE accounts SET version = version + 1 WHERE id = ?", a.ID) // always beaten
		a.Balance++
		return nil
	})
	var ex *locking.RetryExhaustedError
	fmt.Println(errors.As(err, &ex), ex.Attempts, errors.Is(err, locking.ErrStaleData))

	policy.MaxAttempts = 0
	_, err = repository.New[Account](db, repository.WithRetryPolicy(policy))
	fmt.Println("invalid policy:", errors.Is(err, locking.ErrInvalidArgument))
	// Prints:
	// true 2 true
	// invalid policy: true
}

// Retry overrides the repository's retry policy for one call.
func ExampleRetry() {
	ctx := context.Background()
	policy := locking.DefaultRetryPolicy()
	policy.MaxAttempts = 1 // no retries by default
	accounts, _ := repository.New[Account](db, repository.WithRetryPolicy(policy))
	acct := &Account{Owner: "ann"}
	if err := accounts.Create(ctx, acct); err != nil {
		panic(err)
	}
	beaten := func(times int) func(a *Account) error {
		return func(a *Account) error {
			if times > 0 {
				times--
				db.Exec("UPDATE accounts SET version = version + 1 WHERE id = ?", a.ID)
			}
			a.Balance++
			return nil
		}
	}
	_, err := accounts.Mutate(ctx, acct.ID, beaten(1))
	fmt.Println("one attempt:", errors.Is(err, locking.ErrStaleData))

	policy.MaxAttempts = 3
	var rep repository.MutateReport
	got, err := accounts.Mutate(ctx, acct.ID, beaten(1), repository.Retry(policy), repository.Report(&rep))
	fmt.Println(got.Balance, err, "attempts:", rep.Attempts)
	// Prints:
	// one attempt: true
	// 1 <nil> attempts: 2
}

// Report says what one Mutate, Upsert or MutateRowLocked call did: here a
// Mutate that lost one race, took the row lock for its second attempt (the
// default, adaptive Mutate) and won it.
func ExampleReport() {
	ctx := context.Background()
	accounts, _ := repository.New[Account](db)
	acct := &Account{Owner: "ann"}
	if err := accounts.Create(ctx, acct); err != nil {
		panic(err)
	}

	var rep repository.MutateReport
	first := true
	_, err := accounts.Mutate(ctx, acct.ID, func(a *Account) error {
		if first {
			first = false
			db.Exec("UPDATE accounts SET version = version + 1 WHERE id = ?", a.ID)
		}
		a.Balance++
		return nil
	}, repository.Report(&rep))
	fmt.Println(err, rep.Op, rep.Table, rep.Attempts, rep.Locked, rep.Err)
	fmt.Println(rep)
	// Prints:
	// <nil> mutate accounts 2 1 <nil>
	// mutate accounts id=1: 2 attempts, 1 locked, escalated
}

// InTx tells whether a context carries RunInTx's transaction.
func ExampleInTx() {
	ctx := context.Background()
	fmt.Println("outside:", repository.InTx(ctx))
	_ = repository.RunInTx(ctx, db, func(ctx context.Context) error {
		fmt.Println("inside:", repository.InTx(ctx))
		return nil
	})
	// Prints:
	// outside: false
	// inside: true
}

// Tx gives plain GORM calls the transaction of RunInTx, so they roll back
// with the guarded writes.
func ExampleTx() {
	ctx := context.Background()
	db.Exec("CREATE TABLE audit (note TEXT NOT NULL)")
	accounts, _ := repository.New[Account](db)
	acct := &Account{Owner: "ann", Balance: 100}
	if err := accounts.Create(ctx, acct); err != nil {
		panic(err)
	}

	err := repository.RunInTx(ctx, db, func(ctx context.Context) error {
		if err := repository.Tx(ctx, db).Exec("INSERT INTO audit (note) VALUES (?)", "withdraw 150").Error; err != nil {
			return err
		}
		a, err := accounts.Mutate(ctx, acct.ID, func(a *Account) error { a.Balance -= 150; return nil })
		if err != nil {
			return err
		}
		if a.Balance < 0 {
			return errors.New("overdrawn") // rolls back the audit row and the write
		}
		return nil
	})
	var rows int64
	db.Table("audit").Count(&rows)
	after, _ := accounts.Get(ctx, acct.ID)
	fmt.Println(err, "audit rows:", rows, "balance:", after.Balance)
	// Prints:
	// overdrawn audit rows: 0 balance: 100
}

// WithTx lets repository calls join a transaction the application opened
// with GORM; a *gorm.DB outside a transaction is refused.
func ExampleWithTx() {
	ctx := context.Background()
	accounts, _ := repository.New[Account](db)
	acct := &Account{Owner: "ann", Balance: 100}
	if err := accounts.Create(ctx, acct); err != nil {
		panic(err)
	}

	err := db.Transaction(func(tx *gorm.DB) error {
		ctx, err := repository.WithTx(ctx, tx)
		if err != nil {
			return err
		}
		fmt.Println("in tx:", repository.InTx(ctx))
		acct.Balance = 0
		if err := accounts.Update(ctx, acct); err != nil {
			return err
		}
		return errors.New("changed my mind") // GORM rolls back the Update too
	})
	after, _ := accounts.Get(ctx, acct.ID)
	fmt.Println(err, "balance:", after.Balance)

	_, err = repository.WithTx(ctx, db)
	fmt.Println("not a transaction:", errors.Is(err, locking.ErrInvalidArgument))
	// Prints:
	// in tx: true
	// changed my mind balance: 100
	// not a transaction: true
}
