// Command lease shows two editors sharing one document with leases, the
// get-and-lock flow of a document store such as Couchbase on a SQL
// database: it walks through what each operation does while the document
// is leased to another editor, then what an expired lease no longer allows.
//
// From the examples directory:
//
//	go run ./lease                 # embedded SQLite, in a temporary file
//	go run ./lease -db lease.db    # SQLite, in the file you name
//	go run ./lease -dsn 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable'
//	go run ./lease -dsn 'root@tcp(127.0.0.1:3306)/test'   # MySQL or MariaDB
//
// or from the repository root, go run ./examples/lease with the same flags.
//
// The program creates gormlock's lease table with migrations.Up and its
// documents table with GORM's AutoMigrate, each when it is missing, and
// deletes the document and its lease before it exits. The output is
// deterministic: it prints no tokens, ids or times, and shows the versions
// (clock readings) as v1, v2, ... in the order they appear.
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
	"path/filepath"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/migrations"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/opendb/mysql"
	"github.com/gormlock/gormlock/opendb/postgres"
	"github.com/gormlock/gormlock/opendb/sqlite"
	"github.com/gormlock/gormlock/repository"
)

// Document is the record the editors share: its own string key and a
// title. models.Versioned adds the version that every guarded write checks
// and advances, and the creation and update times.
type Document struct {
	ID    string `gorm:"primaryKey"`
	Title string `gorm:"not null"`
	models.Versioned
}

func main() {
	dbPath := flag.String("db", "", "SQLite database `file` to use (default: a temporary file, removed at exit)")
	dsn := flag.String("dsn", "", "PostgreSQL or MySQL/MariaDB `DSN` to use instead of SQLite: postgres://user@host:5432/db?sslmode=disable, mysql://user@host:3306/db or user@tcp(host:3306)/db")
	flag.Parse()
	if flag.NArg() > 0 || (*dbPath != "" && *dsn != "") || (*dsn != "" && server(*dsn) == "") {
		fmt.Fprintln(os.Stderr, "usage: lease [-db FILE | -dsn postgres://... | -dsn mysql://... | -dsn user@tcp(host:port)/dbname]")
		os.Exit(2)
	}
	target := *dsn
	if *dbPath != "" {
		target = *dbPath
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, target); err != nil {
		fmt.Fprintln(os.Stderr, "lease:", err)
		stop()
		os.Exit(1)
	}
}

// run plays the story on the database target names (see open) and writes
// it to w.
func run(ctx context.Context, w io.Writer, target string) (err error) {
	db, closeDB, err := open(target)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeDB()) }()
	// gormlock's own tables (the lease table), then the program's.
	if err := migrations.Up(ctx, db); err != nil {
		return err
	}
	if err := db.WithContext(ctx).AutoMigrate(&Document{}); err != nil {
		return err
	}
	docs, err := repository.New[Document](db, repository.WithLeases())
	if err != nil {
		return err
	}
	if err := docs.VerifySchema(ctx); err != nil {
		return err
	}
	suffix := make([]byte, 6)
	if _, err := rand.Read(suffix); err != nil {
		return err
	}
	id := "lease-demo-" + hex.EncodeToString(suffix)
	doc := &Document{ID: id, Title: "Quarterly report"}
	if err := docs.Create(ctx, doc); err != nil {
		return err
	}
	defer func() {
		//gormlockvet:ignore the demo's own record, deleted once the demo is over
		err = errors.Join(err, db.WithContext(context.WithoutCancel(ctx)).Where("id = ?", id).Delete(&Document{}).Error,
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

	// Versions are clock readings, different on every run: name them v1,
	// v2, ... in the order they are first printed.
	names := map[int64]string{}
	v := func(version int64) string {
		if _, ok := names[version]; !ok {
			names[version] = fmt.Sprintf("v%d", len(names)+1)
		}
		return names[version]
	}
	// Fences only grow, but on PostgreSQL they are clock readings too:
	// number them 1, 2, ... in the order they were granted, and check
	// that each is larger than the one before.
	var fences []int64
	var fenceErr error
	fence := func(l *repository.Lease) int {
		for i, f := range fences {
			if f == l.Fence {
				return i + 1
			}
		}
		if n := len(fences); n > 0 && l.Fence <= fences[n-1] && fenceErr == nil {
			fenceErr = fmt.Errorf("fence %d granted after fence %d", l.Fence, fences[n-1])
		}
		fences = append(fences, l.Fence)
		return len(fences)
	}
	p("gormlock lease: two editors, one document, on %s", db.Dialector.Name())
	alice, aliceLease, err := docs.Leases().Acquire(ctx, id, "alice", repository.TTL(10*time.Second))
	if err != nil {
		return err
	}
	p("alice  get-and-lock                       -> ok: %q at version %s, fence %d, lease of %v",
		alice.Title, v(aliceLease.Version), fence(aliceLease), aliceLease.ExpiresAt.Sub(aliceLease.AcquiredAt))

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
	p("bob    get-and-lock                       -> ok: %q, fence %d", bob.Title, fence(bobLease))
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
	sleepyFence := fence(sleepy)
	p("bob    get-and-lock after the expiry      -> ok, fence %d (alice had %d)", fence(bobLease), sleepyFence)
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
	return fenceErr
}

// open opens the database target names: PostgreSQL for a postgres:// or
// postgresql:// URL, MySQL or MariaDB for a mysql:// URL or a DSN such as
// user:password@tcp(host:3306)/dbname, and otherwise the SQLite file at
// the path target (created if missing). An empty target is a SQLite file
// in a new temporary directory. closeDB closes the database and removes
// that directory.
func open(target string) (db *gorm.DB, closeDB func() error, err error) {
	removeDir := func() error { return nil }
	if target == "" {
		dir, err := os.MkdirTemp("", "gormlock-lease-")
		if err != nil {
			return nil, nil, err
		}
		removeDir = func() error { return os.RemoveAll(dir) }
		target = filepath.Join(dir, "lease.db")
	}
	switch server(target) {
	case "postgres":
		db, err = postgres.Open(target)
	case "mysql":
		db, err = mysql.Open(target)
	default:
		db, err = sqlite.Open(target)
	}
	if err != nil {
		return nil, nil, errors.Join(err, removeDir())
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, nil, errors.Join(err, removeDir())
	}
	return db, func() error { return errors.Join(sqlDB.Close(), removeDir()) }, nil
}

// server names the database server dsn is for: "postgres" for a postgres://
// or postgresql:// URL, "mysql" for a mysql:// URL or a DSN with a network
// address such as user:password@tcp(host:3306)/dbname, and "" for anything
// else.
func server(dsn string) string {
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		return "postgres"
	case strings.HasPrefix(dsn, "mysql://"), strings.Contains(dsn, "tcp("), strings.Contains(dsn, "unix("):
		return "mysql"
	}
	return ""
}
