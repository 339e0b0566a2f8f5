// Command lease shows two editors sharing one document with leases — the
// Couchbase get-and-lock flow on a SQL database — and walks through every row
// of the table of what each operation does while a record is leased ("locked"
// in the seed), then an expiry.
//
//	go run ./examples/lease                 # embedded SQLite, in a temporary file
//	go run ./examples/lease -dsn postgres://postgres@127.0.0.1:5432/test?sslmode=disable
//
// The output is deterministic: it prints no tokens, ids or times.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/gormlock/gormlock/internal/exampledb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/repository"
)

func main() {
	dbPath := flag.String("db", "", "SQLite database `file` to use (default: a temporary file, removed at exit)")
	dsn := flag.String("dsn", "", "PostgreSQL `URL` to use instead of SQLite")
	flag.Parse()
	if flag.NArg() > 0 || (*dbPath != "" && *dsn != "") {
		fmt.Fprintln(os.Stderr, "usage: lease [-db FILE | -dsn postgres://...]")
		os.Exit(2)
	}
	target := *dsn
	if *dbPath != "" {
		target = "sqlite:" + *dbPath
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, target); err != nil {
		fmt.Fprintln(os.Stderr, "lease:", err)
		stop()
		os.Exit(1)
	}
}

// run plays the story on the database dsn names (what opendb.Open accepts;
// empty means a SQLite file in a temporary directory) and writes it to w.
func run(ctx context.Context, w io.Writer, dsn string) (err error) {
	db, closeDB, err := exampledb.Open(ctx, dsn, "lease")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeDB()) }()
	docs, err := repository.New[models.Document](db, repository.WithLeases())
	if err != nil {
		return err
	}
	suffix := make([]byte, 6)
	if _, err := rand.Read(suffix); err != nil {
		return err
	}
	id := "lease-demo-" + hex.EncodeToString(suffix)
	doc := &models.Document{ID: id, Title: "Quarterly report"}
	if err := docs.Create(ctx, doc); err != nil {
		return err
	}
	defer func() {
		err = errors.Join(err, db.WithContext(context.WithoutCancel(ctx)).Where("id = ?", id).Delete(&models.Document{}).Error,
			db.WithContext(context.WithoutCancel(ctx)).Exec("DELETE FROM gormlock_leases WHERE resource = 'documents' AND record_key = ?", id).Error)
	}()

	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	kind := func(err error) string {
		switch {
		case err == nil:
			return "ok"
		case errors.Is(err, locking.ErrLeased):
			return "ErrLeased"
		case errors.Is(err, locking.ErrLeaseExpired):
			return "ErrLeaseExpired"
		case errors.Is(err, locking.ErrStaleData):
			return "ErrStaleData"
		}
		return "unexpected: " + err.Error()
	}

	var versions exampledb.Versions // v1, v2, ...: the real ones are clock readings
	v := versions.Name
	p("gormlock lease: two editors, one document, on %s", db.Dialector.Name())
	alice, aliceLease, err := docs.Leases().Acquire(ctx, id, "alice", repository.TTL(10*time.Second))
	if err != nil {
		return err
	}
	p("alice  get-and-lock                       -> ok: %q at version %s, fence %d, lease of %v",
		alice.Title, v(aliceLease.Version), aliceLease.Fence, aliceLease.ExpiresAt.Sub(aliceLease.AcquiredAt))

	_, _, err = docs.Leases().Acquire(ctx, id, "bob")
	var le *locking.LeaseError
	holder := ""
	if errors.As(err, &le) {
		holder = fmt.Sprintf(" (held by %s)", le.Holder)
	}
	p("bob    get-and-lock                       -> %s%s", kind(err), holder)

	bobsCopy, st, err := docs.Leases().Get(ctx, id)
	if err != nil {
		return err
	}
	p("bob    get                                -> ok: %q, leased by %s", bobsCopy.Title, st.Owner)

	forged := *aliceLease
	forged.Token = "not-the-token"
	p("bob    release with a wrong token         -> %s", kind(docs.Leases().Release(ctx, &forged)))

	bobsCopy.Title = "Bob's report"
	p("bob    update without the token           -> %s (even at the right version %s)", kind(docs.Update(ctx, bobsCopy)), v(bobsCopy.Version))
	p("bob    delete without the token           -> %s", kind(docs.Delete(ctx, bobsCopy)))

	alice.Title = "Quarterly report, final"
	p("alice  update with the token              -> %s: now version %s, lease released", kind(docs.Leases().Update(ctx, alice, aliceLease)), v(alice.Version))

	bob, bobLease, err := docs.Leases().Acquire(ctx, id, "bob")
	if err != nil {
		return err
	}
	p("bob    get-and-lock                       -> ok: %q, fence %d", bob.Title, bobLease.Fence)
	p("bob    release with the token             -> %s", kind(docs.Leases().Release(ctx, bobLease)))
	p("alice  release with her used lease        -> %s", kind(docs.Leases().Release(ctx, aliceLease)))

	// Expiry: a holder that never comes back blocks the record only until
	// its lease ends, by the database's clock.
	_, sleepy, err := docs.Leases().Acquire(ctx, id, "alice", repository.TTL(200*time.Millisecond))
	if err != nil {
		return err
	}
	p("alice  get-and-lock for 200ms, then stalls")
	for {
		_, st, err := docs.Leases().Get(ctx, id)
		if err != nil {
			return err
		}
		if st == nil {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	bob, bobLease, err = docs.Leases().Acquire(ctx, id, "bob")
	if err != nil {
		return err
	}
	p("bob    get-and-lock after the expiry      -> ok, fence %d (alice had %d)", bobLease.Fence, sleepy.Fence)
	bob.Title = "Bob's edit"
	if err := docs.Leases().Update(ctx, bob, bobLease); err != nil {
		return err
	}
	alice.Title = "Alice's late edit"
	p("alice  wakes up, update with her lease    -> %s: her lease ended, bob's edit stays", kind(docs.Leases().Update(ctx, alice, sleepy)))
	final, err := docs.Get(ctx, id)
	if err != nil {
		return err
	}
	p("final: %q at version %s", final.Title, v(final.Version))
	return nil
}
