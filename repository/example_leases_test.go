package repository_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/repository"
)

// LockRow reads and locks a record for the rest of the RunInTx transaction
// (on SQLite: the database's write lock); it needs a transaction.
func ExampleRepository_LockRow() {
	ctx := context.Background()
	accounts, err := repository.New[Account](db)
	if err != nil {
		panic(err)
	}
	acct := &Account{Owner: "ann", Balance: 100}
	if err := accounts.Create(ctx, acct); err != nil {
		panic(err)
	}

	err = repository.RunInTx(ctx, db, func(ctx context.Context) error {
		a, err := accounts.LockRow(ctx, acct.ID)
		if err != nil {
			return err
		}
		a.Balance += 10 // nobody else can write it until the transaction ends
		return accounts.Update(ctx, a)
	})
	fmt.Println("locked and written:", err)

	_, err = accounts.LockRow(ctx, acct.ID) // no transaction in ctx
	fmt.Println("outside a transaction:", errors.Is(err, locking.ErrInvalidArgument))
	final, _ := accounts.Get(ctx, acct.ID)
	fmt.Println("balance:", final.Balance, "version advanced:", final.Version > acct.Version)
	// Prints:
	// locked and written: <nil>
	// outside a transaction: true
	// balance: 110 version advanced: true
}

// NoWait fails at once with locking.ErrLocked instead of waiting while
// another transaction holds the lock (on SQLite: the database's write lock).
func ExampleNoWait() {
	ctx := context.Background()
	accounts, err := repository.New[Account](db)
	if err != nil {
		panic(err)
	}
	acct := &Account{Owner: "ann", Balance: 100}
	if err := accounts.Create(ctx, acct); err != nil {
		panic(err)
	}

	err = repository.RunInTx(ctx, db, func(txCtx context.Context) error {
		if _, err := accounts.LockRow(txCtx, acct.ID); err != nil {
			return err
		}
		// Another caller, outside this transaction, will not wait for it.
		_, err := accounts.MutateRowLocked(ctx, acct.ID, func(a *Account) error {
			a.Balance = 0
			return nil
		}, repository.NoWait())
		fmt.Println("other caller:", errors.Is(err, locking.ErrLocked))
		return nil
	})
	fmt.Println("transaction:", err)
	final, _ := accounts.Get(ctx, acct.ID)
	fmt.Println("balance:", final.Balance)
	// Prints:
	// other caller: true
	// transaction: <nil>
	// balance: 100
}

// LockTimeout waits a bounded time for a lock another transaction holds and
// then fails with locking.ErrLockTimeout.
func ExampleLockTimeout() {
	ctx := context.Background()
	accounts, err := repository.New[Account](db)
	if err != nil {
		panic(err)
	}
	acct := &Account{Owner: "ann", Balance: 100}
	if err := accounts.Create(ctx, acct); err != nil {
		panic(err)
	}

	err = repository.RunInTx(ctx, db, func(txCtx context.Context) error {
		if _, err := accounts.LockRow(txCtx, acct.ID); err != nil {
			return err
		}
		start := time.Now()
		_, err := accounts.MutateRowLocked(ctx, acct.ID, func(a *Account) error {
			a.Balance = 0
			return nil
		}, repository.LockTimeout(50*time.Millisecond))
		fmt.Println("other caller:", errors.Is(err, locking.ErrLockTimeout), "waited:", time.Since(start) >= 50*time.Millisecond)
		return nil
	})
	fmt.Println("transaction:", err)
	_, err = accounts.MutateRowLocked(ctx, acct.ID, func(*Account) error { return nil }, repository.LockTimeout(0))
	fmt.Println("zero timeout:", errors.Is(err, locking.ErrInvalidArgument))
	// Prints:
	// other caller: true waited: true
	// transaction: <nil>
	// zero timeout: true
}

// SQLite has no shared row locks: ForShare is refused with
// locking.ErrNotSupported rather than silently taking another lock.
func ExampleForShare() {
	ctx := context.Background()
	accounts, err := repository.New[Account](db)
	if err != nil {
		panic(err)
	}
	acct := &Account{Owner: "ann", Balance: 100}
	if err := accounts.Create(ctx, acct); err != nil {
		panic(err)
	}

	err = repository.RunInTx(ctx, db, func(ctx context.Context) error {
		_, err := accounts.LockRow(ctx, acct.ID, repository.ForShare()) // FOR SHARE on PostgreSQL
		return err
	})
	fmt.Println("ForShare on", db.Dialector.Name()+":", errors.Is(err, locking.ErrNotSupported))
	// Prints:
	// ForShare on sqlite: true
}

// Claim is the work-queue read (SELECT ... FOR UPDATE SKIP LOCKED on
// PostgreSQL and MySQL); SQLite has no row locks to skip, so it is refused.
func ExampleRepository_Claim() {
	ctx := context.Background()
	jobs, err := repository.New[Job](db)
	if err != nil {
		panic(err)
	}
	if err := jobs.Create(ctx, &Job{Queue: "mail", Payload: "hello", Status: JobPending}); err != nil {
		panic(err)
	}

	err = repository.RunInTx(ctx, db, func(ctx context.Context) error {
		batch, err := jobs.Claim(ctx, 10, repository.Where("status = ?", JobPending), repository.OrderBy("id", false))
		if err != nil {
			return err
		}
		for i := range batch {
			batch[i].Status = JobDone // ... run the job, then mark it done ...
		}
		return nil
	})
	fmt.Println("not supported:", errors.Is(err, locking.ErrNotSupported))
	// Prints:
	// not supported: true
}

// Acquire is get-and-lock: alice gets the document and a lease on it; until
// it ends, bob can neither lease nor write it, but he can still read it.
func ExampleLeases_Acquire() {
	ctx := context.Background()
	docs, err := repository.New[Document](db, repository.WithLeases())
	if err != nil {
		panic(err)
	}
	if err := docs.Create(ctx, &Document{ID: "doc-1", Title: "Quarterly report"}); err != nil {
		panic(err)
	}

	doc, lease, err := docs.Leases().Acquire(ctx, "doc-1", "alice", repository.TTL(10*time.Second))
	if err != nil {
		panic(err)
	}
	fmt.Printf("alice: %q fence %d, lease of %v\n", doc.Title, lease.Fence, lease.ExpiresAt.Sub(lease.AcquiredAt))

	_, _, err = docs.Leases().Acquire(ctx, "doc-1", "bob")
	var le *locking.LeaseError
	if errors.As(err, &le) {
		fmt.Println("bob: leased by", le.Holder, errors.Is(err, locking.ErrLeased), errors.Is(err, locking.ErrLocked))
	}

	bobs, err := docs.Get(ctx, "doc-1") // reads never wait
	fmt.Println("bob reads:", err)
	bobs.Title = "Bob's report"
	fmt.Println("bob's plain Update:", errors.Is(docs.Update(ctx, bobs), locking.ErrLeased))
	// Prints:
	// alice: "Quarterly report" fence 1, lease of 10s
	// bob: leased by alice true true
	// bob reads: <nil>
	// bob's plain Update: true
}

// The holder writes the record with its lease: the write and the end of the
// lease happen together, and the used lease cannot write again.
func ExampleLeases_Update() {
	ctx := context.Background()
	docs, err := repository.New[Document](db, repository.WithLeases())
	if err != nil {
		panic(err)
	}
	if err := docs.Create(ctx, &Document{ID: "doc-1", Title: "Quarterly report"}); err != nil {
		panic(err)
	}

	doc, lease, err := docs.Leases().Acquire(ctx, "doc-1", "alice")
	if err != nil {
		panic(err)
	}
	doc.Title = "Quarterly report, final"
	fmt.Println("alice writes:", docs.Leases().Update(ctx, doc, lease), "version advanced:", doc.Version > lease.Version)

	_, state, _ := docs.Leases().Get(ctx, "doc-1")
	fmt.Println("still leased:", state != nil)

	doc.Title = "Another edit"
	err = docs.Leases().Update(ctx, doc, lease)
	fmt.Println("used lease again:", errors.Is(err, locking.ErrLeaseExpired))
	final, _ := docs.Get(ctx, "doc-1")
	fmt.Printf("%q\n", final.Title)
	// Prints:
	// alice writes: <nil> version advanced: true
	// still leased: false
	// used lease again: true
	// "Quarterly report, final"
}

// Release gives the lease up without writing: the record can be leased again
// at once, with a larger fence, and the released lease is dead.
func ExampleLeases_Release() {
	ctx := context.Background()
	docs, err := repository.New[Document](db, repository.WithLeases())
	if err != nil {
		panic(err)
	}
	if err := docs.Create(ctx, &Document{ID: "doc-1", Title: "Quarterly report"}); err != nil {
		panic(err)
	}

	_, alice, err := docs.Leases().Acquire(ctx, "doc-1", "alice")
	if err != nil {
		panic(err)
	}
	fmt.Println("alice releases:", docs.Leases().Release(ctx, alice))
	fmt.Println("again:", errors.Is(docs.Leases().Release(ctx, alice), locking.ErrLeaseExpired))

	_, bob, err := docs.Leases().Acquire(ctx, "doc-1", "bob")
	fmt.Println("bob acquires:", err, "fences:", alice.Fence, bob.Fence)

	// A wrong token releases nothing.
	forged := *bob
	forged.Token = "not-the-token"
	fmt.Println("forged:", errors.Is(docs.Leases().Release(ctx, &forged), locking.ErrLeased))
	// Prints:
	// alice releases: <nil>
	// again: true
	// bob acquires: <nil> fences: 1 2
	// forged: true
}

// Renew is the heartbeat of a holder that needs longer: it moves the expiry
// to TTL from now; a lease that has ended cannot be renewed.
func ExampleLeases_Renew() {
	ctx := context.Background()
	docs, err := repository.New[Document](db, repository.WithLeases())
	if err != nil {
		panic(err)
	}
	if err := docs.Create(ctx, &Document{ID: "doc-1", Title: "Quarterly report"}); err != nil {
		panic(err)
	}

	_, lease, err := docs.Leases().Acquire(ctx, "doc-1", "alice", repository.TTL(5*time.Second))
	if err != nil {
		panic(err)
	}
	first := lease.ExpiresAt
	err = docs.Leases().Renew(ctx, lease, repository.TTL(25*time.Second))
	fmt.Println("renewed:", err, "expires later:", lease.ExpiresAt.Sub(first) >= 20*time.Second)

	if err := docs.Leases().Release(ctx, lease); err != nil {
		panic(err)
	}
	err = docs.Leases().Renew(ctx, lease)
	fmt.Println("after release:", errors.Is(err, locking.ErrLeaseExpired))
	// Prints:
	// renewed: <nil> expires later: true
	// after release: true
}

// Get reads the record and tells readers who holds its lease (never the
// token); the state is nil when the record is not leased.
func ExampleLeases_Get() {
	ctx := context.Background()
	docs, err := repository.New[Document](db, repository.WithLeases())
	if err != nil {
		panic(err)
	}
	if err := docs.Create(ctx, &Document{ID: "doc-1", Title: "Quarterly report"}); err != nil {
		panic(err)
	}

	_, state, err := docs.Leases().Get(ctx, "doc-1")
	fmt.Println("before:", err, state == nil)

	if _, _, err := docs.Leases().Acquire(ctx, "doc-1", "alice"); err != nil {
		panic(err)
	}
	doc, state, err := docs.Leases().Get(ctx, "doc-1")
	if err != nil {
		panic(err)
	}
	fmt.Printf("%q leased by %s, fence %d, ends after it began: %v\n",
		doc.Title, state.Owner, state.Fence, state.ExpiresAt.After(state.AcquiredAt))
	// Prints:
	// before: <nil> true
	// "Quarterly report" leased by alice, fence 1, ends after it began: true
}

// The holder deletes the record with its lease; anyone else's Delete is
// refused while the record is leased.
func ExampleLeases_Delete() {
	ctx := context.Background()
	docs, err := repository.New[Document](db, repository.WithLeases())
	if err != nil {
		panic(err)
	}
	if err := docs.Create(ctx, &Document{ID: "doc-1", Title: "Draft"}); err != nil {
		panic(err)
	}

	doc, lease, err := docs.Leases().Acquire(ctx, "doc-1", "alice")
	if err != nil {
		panic(err)
	}
	bobs, _ := docs.Get(ctx, "doc-1")
	fmt.Println("bob's plain Delete:", errors.Is(docs.Delete(ctx, bobs), locking.ErrLeased))

	fmt.Println("alice deletes:", docs.Leases().Delete(ctx, doc, lease))
	_, err = docs.Get(ctx, "doc-1")
	fmt.Println("gone:", errors.Is(err, locking.ErrNotFound))
	// Prints:
	// bob's plain Delete: true
	// alice deletes: <nil>
	// gone: true
}

// Sweep deletes the lease rows left by records that no longer exist; the
// rows of existing records stay, so their fences keep growing.
func ExampleLeases_Sweep() {
	ctx := context.Background()
	docs, err := repository.New[Document](db, repository.WithLeases())
	if err != nil {
		panic(err)
	}
	for _, id := range []string{"doc-1", "doc-2"} {
		if err := docs.Create(ctx, &Document{ID: id, Title: id}); err != nil {
			panic(err)
		}
		doc, lease, err := docs.Leases().Acquire(ctx, id, "alice")
		if err != nil {
			panic(err)
		}
		if id == "doc-1" {
			err = docs.Leases().Delete(ctx, doc, lease) // the record goes, its lease row stays
		} else {
			err = docs.Leases().Release(ctx, lease)
		}
		if err != nil {
			panic(err)
		}
	}

	n, err := docs.Leases().Sweep(ctx)
	fmt.Println("swept:", n, err)
	_, lease, _ := docs.Leases().Acquire(ctx, "doc-2", "bob")
	fmt.Println("doc-2's next fence:", lease.Fence)
	// Prints:
	// swept: 1 <nil>
	// doc-2's next fence: 2
}

// ReleaseOwnerLeases ends every lease one owner holds, on every table (a
// session ended, a worker shut down); other owners' leases stay.
func ExampleReleaseOwnerLeases() {
	ctx := context.Background()
	docs, err := repository.New[Document](db, repository.WithLeases())
	if err != nil {
		panic(err)
	}
	var held []*repository.Lease
	for i, owner := range []string{"alice", "alice", "bob"} {
		id := fmt.Sprintf("doc-%d", i+1)
		if err := docs.Create(ctx, &Document{ID: id, Title: id}); err != nil {
			panic(err)
		}
		_, lease, err := docs.Leases().Acquire(ctx, id, owner)
		if err != nil {
			panic(err)
		}
		held = append(held, lease)
	}

	n, err := repository.ReleaseOwnerLeases(ctx, db, "alice")
	fmt.Println("released:", n, err)
	for _, l := range held {
		_, state, _ := docs.Leases().Get(ctx, l.ID)
		fmt.Println(l.ID, l.Owner, "still leased:", state != nil)
	}
	fmt.Println("alice's lease is dead:", errors.Is(docs.Leases().Release(ctx, held[0]), locking.ErrLeaseExpired))
	// Prints:
	// released: 2 <nil>
	// doc-1 alice still leased: false
	// doc-2 alice still leased: false
	// doc-3 bob still leased: true
	// alice's lease is dead: true
}

// WithLeaseTTL sets a repository's default and maximum lease times; a call
// asking for more than the maximum is refused, never shortened.
func ExampleWithLeaseTTL() {
	ctx := context.Background()
	docs, err := repository.New[Document](db, repository.WithLeaseTTL(2*time.Second, 5*time.Second))
	if err != nil {
		panic(err)
	}
	if err := docs.Create(ctx, &Document{ID: "doc-1", Title: "Draft"}); err != nil {
		panic(err)
	}

	_, lease, err := docs.Leases().Acquire(ctx, "doc-1", "alice") // the default: 2s
	fmt.Println("default:", err, lease.ExpiresAt.Sub(lease.AcquiredAt))
	err = docs.Leases().Renew(ctx, lease, repository.TTL(10*time.Second))
	fmt.Println("above the maximum:", errors.Is(err, locking.ErrInvalidArgument))

	_, err = repository.New[Document](db, repository.WithLeaseTTL(time.Minute, time.Second))
	fmt.Println("default above max:", errors.Is(err, locking.ErrInvalidArgument))
	// Prints:
	// default: <nil> 2s
	// above the maximum: true
	// default above max: true
}

// TTL asks for a lease time: positive and at most the repository's maximum
// (MaxLeaseTTL with WithLeases); anything else is refused.
func ExampleTTL() {
	ctx := context.Background()
	docs, err := repository.New[Document](db, repository.WithLeases())
	if err != nil {
		panic(err)
	}
	if err := docs.Create(ctx, &Document{ID: "doc-1", Title: "Draft"}); err != nil {
		panic(err)
	}

	for _, ttl := range []time.Duration{0, repository.MaxLeaseTTL + time.Millisecond, repository.MaxLeaseTTL} {
		_, lease, err := docs.Leases().Acquire(ctx, "doc-1", "alice", repository.TTL(ttl))
		if err != nil {
			fmt.Println(ttl, "refused:", errors.Is(err, locking.ErrInvalidArgument))
			continue
		}
		fmt.Println(ttl, "granted:", lease.ExpiresAt.Sub(lease.AcquiredAt))
	}
	// Prints:
	// 0s refused: true
	// 30.001s refused: true
	// 30s granted: 30s
}

// ParseID turns a key as text (a URL path segment) into the key's type, and
// refuses text that is not the key's one canonical form.
func ExampleAdapter_ParseID() {
	accounts, err := repository.New[Account](db)
	if err != nil {
		panic(err)
	}
	docs, err := repository.New[Document](db)
	if err != nil {
		panic(err)
	}

	id, err := accounts.Adapter().ParseID("42")
	fmt.Printf("%T %v %v\n", id, id, err)
	for _, s := range []string{"042", "+42", "forty-two"} {
		_, err := accounts.Adapter().ParseID(s)
		fmt.Printf("%q refused: %v\n", s, errors.Is(err, locking.ErrInvalidArgument))
	}
	id, err = docs.Adapter().ParseID("doc-1")
	fmt.Printf("%T %v %v\n", id, id, err)
	// Prints:
	// int64 42 <nil>
	// "042" refused: true
	// "+42" refused: true
	// "forty-two" refused: true
	// string doc-1 <nil>
}

// Identity reads an entity's key and version (for a URL and an ETag), and
// tells whether the key is still unset.
func ExampleAdapter_Identity() {
	ctx := context.Background()
	accounts, err := repository.New[Account](db)
	if err != nil {
		panic(err)
	}
	acct := &Account{Owner: "ann", Balance: 100}

	_, version, zeroID := accounts.Adapter().Identity(acct)
	fmt.Println("before Create:", version, zeroID)
	if err := accounts.Create(ctx, acct); err != nil {
		panic(err)
	}
	id, version, zeroID := accounts.Adapter().Identity(acct)
	fmt.Println("after Create:", id == any(acct.ID), version == acct.Version, zeroID)
	// Prints:
	// before Create: 0 true
	// after Create: true true false
}

// SetIdentity puts the key from the URL and the version from If-Match into
// an entity built from a request body, whatever the body said.
func ExampleAdapter_SetIdentity() {
	ctx := context.Background()
	docs, err := repository.New[Document](db)
	if err != nil {
		panic(err)
	}
	stored := &Document{ID: "doc-1", Title: "Draft"}
	if err := docs.Create(ctx, stored); err != nil {
		panic(err)
	}

	body := &Document{ID: "someone-elses-doc", Title: "Final", Versioned: models.Versioned{Version: 1}}
	if err := docs.Adapter().SetIdentity(body, "doc-1", stored.Version); err != nil {
		panic(err)
	}
	fmt.Println(body.ID, docs.Update(ctx, body))

	err = docs.Adapter().SetIdentity(body, 42, 1) // not a string key
	fmt.Println("wrong key type:", errors.Is(err, locking.ErrInvalidArgument))
	// Prints:
	// doc-1 <nil>
	// wrong key type: true
}

// CopyWritable is the "replace" of a PUT: it copies the writable columns of
// the request into the record as loaded, keeping its key and version.
func ExampleAdapter_CopyWritable() {
	ctx := context.Background()
	docs, err := repository.New[Document](db)
	if err != nil {
		panic(err)
	}
	if err := docs.Create(ctx, &Document{ID: "doc-1", Title: "Draft"}); err != nil {
		panic(err)
	}

	loaded, _ := docs.Get(ctx, "doc-1")
	version := loaded.Version
	body := &Document{ID: "other", Title: "Final", Attrs: Attributes{"status": "done"}}
	if err := docs.Adapter().CopyWritable(loaded, body); err != nil {
		panic(err)
	}
	fmt.Println(loaded.ID, loaded.Title, loaded.Attrs, "version kept:", loaded.Version == version)
	fmt.Println("update:", docs.Update(ctx, loaded))
	// Prints:
	// doc-1 Final map[status:done] version kept: true
	// update: <nil>
}

// KeyAssignedByDatabase tells an adapter whether clients may choose keys:
// not for an auto-increment key, yes for a model's own key.
func ExampleAdapter_KeyAssignedByDatabase() {
	accounts, err := repository.New[Account](db)
	if err != nil {
		panic(err)
	}
	docs, err := repository.New[Document](db)
	if err != nil {
		panic(err)
	}
	fmt.Println("accounts:", accounts.Adapter().KeyAssignedByDatabase())
	fmt.Println("documents:", docs.Adapter().KeyAssignedByDatabase())
	// Prints:
	// accounts: true
	// documents: false
}
