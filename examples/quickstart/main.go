// Command quickstart shows the lost update that gormlock's version guard
// prevents: two writers do a read-modify-write of the same document (the
// "CAS flow" of a document store such as Couchbase, here on a SQL database),
// first with plain GORM writes, where one writer's change is silently lost,
// then with gormlock.
//
// From the examples directory:
//
//	go run ./quickstart                  # embedded SQLite, in a temporary file
//	go run ./quickstart -db demo.db      # SQLite, in the file you name
//	go run ./quickstart -dsn 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable'
//	go run ./quickstart -dsn 'root@tcp(127.0.0.1:3306)/test'   # MySQL or MariaDB
//
// or from the repository root, go run ./examples/quickstart with the same
// flags.
//
// It runs three acts on a Document (a string id, a title and a map of
// attributes), each on a document of its own that starts as
// {a_field: a_value}:
//
//  1. plain read-modify-write: both writers read, change and write back with
//     a plain GORM update that ignores the version; writer 2's write-back
//     overwrites writer 1's, and field1 is lost.
//  2. guarded Update: the same interleaving with Repository.Update; writer 1
//     succeeds and writer 2 gets an error matching locking.ErrStaleData (a
//     *locking.StaleDataError naming the versions), so nothing is lost.
//  3. Mutate: both writers call Repository.Mutate concurrently; the writer
//     that loses the race re-reads and retries, and both fields are kept.
//
// The program creates the documents table with GORM's AutoMigrate when it is
// missing and checks it with Repository.VerifySchema. Document ids carry a
// random suffix so runs never collide, and the rows the program creates are
// deleted before it exits. The output is deterministic: it prints no ids and
// no timings, and shows the versions (clock readings such as
// 1795401280989319) as v1, v2, ... in the order they appear.
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
	"sync"

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/opendb/mysql"
	"github.com/gormlock/gormlock/opendb/postgres"
	"github.com/gormlock/gormlock/opendb/sqlite"
	"github.com/gormlock/gormlock/repository"
)

// Document is the record the two writers share: its own string key, a title
// and free-form attributes, stored as a JSON object. models.Versioned adds
// the version that every guarded write checks and advances, and the
// creation and update times.
type Document struct {
	ID    string            `gorm:"primaryKey"`
	Title string            `gorm:"not null"`
	Attrs map[string]string `gorm:"serializer:json"`
	models.Versioned
}

func main() {
	dbPath := flag.String("db", "", "SQLite database `file` to use (default: a temporary file, removed at exit)")
	dsn := flag.String("dsn", "", "PostgreSQL or MySQL/MariaDB `DSN` to use instead of SQLite: postgres://user@host:5432/db?sslmode=disable, mysql://user@host:3306/db or user@tcp(host:3306)/db")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: quickstart [-db FILE | -dsn DSN]\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}

	var target string
	switch {
	case *dbPath != "" && *dsn != "":
		fmt.Fprintln(os.Stderr, "quickstart: give -db or -dsn, not both")
		os.Exit(2)
	case *dsn != "":
		if server(*dsn) == "" {
			fmt.Fprintln(os.Stderr, "quickstart: -dsn must be a postgres:// or postgresql:// URL, a mysql:// URL or a user@tcp(host:port)/dbname DSN (use -db for a SQLite file)")
			os.Exit(2)
		}
		target = *dsn
	case *dbPath != "":
		target = *dbPath
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, target); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		stop()
		os.Exit(1)
	}
}

// run plays the three acts on the database target names (see open) and
// writes the story to w.
func run(ctx context.Context, w io.Writer, target string) (err error) {
	db, closeDB, err := open(target)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeDB()) }()
	if err := db.WithContext(ctx).AutoMigrate(&Document{}); err != nil {
		return err
	}
	docs, err := repository.New[Document](db)
	if err != nil {
		return err
	}
	if err := docs.VerifySchema(ctx); err != nil {
		return err
	}

	suffix, err := randomSuffix()
	if err != nil {
		return err
	}
	s := &story{w: w, db: db, docs: docs, suffix: suffix}
	defer func() {
		// Delete what this run created, even when ctx was cancelled.
		if cErr := s.cleanup(context.WithoutCancel(ctx)); cErr != nil {
			err = errors.Join(err, cErr)
		}
	}()

	s.printf("gormlock quickstart: the two-writer \"CAS flow\" on %s\n", db.Dialector.Name())
	s.printf("(versions are clock readings; shown as v1, v2, ... in the order they appear)\n")
	for _, act := range []func(context.Context) error{s.plain, s.guarded, s.mutate} {
		s.printf("\n")
		if err := act(ctx); err != nil {
			return err
		}
	}
	return nil
}

// story holds what the three acts share.
type story struct {
	w       io.Writer
	db      *gorm.DB
	docs    *repository.Repository[Document]
	suffix  string
	created []string // ids of the documents created, for cleanup
	names   versions
}

// v names a version for the output.
func (s *story) v(version int64) string { return s.names.name(version) }

func (s *story) printf(format string, args ...any) { fmt.Fprintf(s.w, format, args...) }

// newDocument creates the act's document, {a_field: a_value}, and returns
// its id.
func (s *story) newDocument(ctx context.Context, act string) (string, error) {
	d := &Document{
		ID:    "docid-" + act + "-" + s.suffix,
		Title: "quickstart " + act,
		Attrs: map[string]string{"a_field": "a_value"},
	}
	if err := s.docs.Create(ctx, d); err != nil {
		return "", err
	}
	s.created = append(s.created, d.ID)
	return d.ID, nil
}

// read is one writer's read of the document.
func (s *story) read(ctx context.Context, who, id string) (*Document, error) {
	d, err := s.docs.Get(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", who, err)
	}
	s.printf("  %s reads:   %v (version %s)\n", who, d.Attrs, s.v(d.Version))
	return d, nil
}

// final re-reads the document and prints it.
func (s *story) final(ctx context.Context, id string) (*Document, error) {
	d, err := s.docs.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	s.printf("  re-read:          %v (version %s)\n", d.Attrs, s.v(d.Version))
	return d, nil
}

// twoReaders creates the act's document and lets both writers read it.
func (s *story) twoReaders(ctx context.Context, act string) (id string, d1, d2 *Document, err error) {
	if id, err = s.newDocument(ctx, act); err != nil {
		return "", nil, nil, err
	}
	if d1, err = s.read(ctx, "writer 1", id); err != nil {
		return "", nil, nil, err
	}
	if d2, err = s.read(ctx, "writer 2", id); err != nil {
		return "", nil, nil, err
	}
	return id, d1, d2, nil
}

// plain is act 1: both writers write back without the guard, and writer 1's
// field1 is lost.
func (s *story) plain(ctx context.Context) error {
	s.printf("Act 1: plain read-modify-write (no version guard)\n")
	id, d1, d2, err := s.twoReaders(ctx, "plain")
	if err != nil {
		return err
	}
	d1.Attrs["field1"] = "value1"
	d2.Attrs["field2"] = "value2"
	for _, step := range []struct {
		who, change string
		d           *Document
	}{{"writer 1", "field1=value1", d1}, {"writer 2", "field2=value2", d2}} {
		// The unguarded write: UPDATE documents SET title=?, attrs=? WHERE
		// id=?, the whole document replaced and the version ignored: a
		// replace without a compare-and-swap.
		res := s.db.WithContext(ctx).Model(step.d).Select("title", "attrs").Updates(step.d) //gormlockvet:ignore act 1 shows this write losing an update
		if res.Error != nil {
			return fmt.Errorf("%s: plain write: %w", step.who, res.Error)
		}
		s.printf("  %s sets %s, plain write: ok (%d row updated)\n", step.who, step.change, res.RowsAffected)
	}
	d, err := s.final(ctx, id)
	if err != nil {
		return err
	}
	if _, ok := d.Attrs["field1"]; ok {
		return errors.New("act 1: field1 survived the unguarded writes; the demonstration did not reproduce the lost update")
	}
	s.printf("  => field1 LOST: writer 2 wrote back its copy, read before writer 1's write;\n")
	s.printf("     the version was ignored and is still %s\n", s.v(d.Version))
	return nil
}

// guarded is act 2: the same interleaving with Repository.Update; writer 2 is
// refused with ErrStaleData.
func (s *story) guarded(ctx context.Context) error {
	s.printf("Act 2: guarded Update (UPDATE ... WHERE id = ? AND version = ?)\n")
	id, d1, d2, err := s.twoReaders(ctx, "guarded")
	if err != nil {
		return err
	}
	d1.Attrs["field1"] = "value1"
	if err := s.docs.Update(ctx, d1); err != nil {
		return fmt.Errorf("writer 1: %w", err)
	}
	s.printf("  writer 1 sets field1=value1, Update: ok, now at version %s\n", s.v(d1.Version))

	d2.Attrs["field2"] = "value2"
	err = s.docs.Update(ctx, d2)
	if err == nil {
		return errors.New("act 2: writer 2's stale Update succeeded")
	}
	if !errors.Is(err, locking.ErrStaleData) {
		return fmt.Errorf("writer 2: %w", err)
	}
	s.printf("  writer 2 sets field2=value2, Update: refused\n")
	s.printf("    errors.Is(err, locking.ErrStaleData) = %t\n", errors.Is(err, locking.ErrStaleData))
	var stale *locking.StaleDataError
	if !errors.As(err, &stale) {
		return fmt.Errorf("writer 2: the error is not a *locking.StaleDataError: %w", err)
	}
	s.printf("    *locking.StaleDataError: Expected version %s, Actual version %s\n", s.v(stale.Expected), s.v(stale.Actual))
	s.printf("    writer 2's entity is left as it was: still at version %s\n", s.v(d2.Version))

	d, err := s.final(ctx, id)
	if err != nil {
		return err
	}
	if d.Attrs["field1"] != "value1" || d.Attrs["field2"] != "" {
		return fmt.Errorf("act 2: unexpected final attrs %v", d.Attrs)
	}
	s.printf("  => field1 kept, field2 not written: writer 2 must re-read and retry (act 3)\n")
	return nil
}

// mutate is act 3: two concurrent writers use Repository.Mutate and both
// fields are kept.
func (s *story) mutate(ctx context.Context) error {
	s.printf("Act 3: Mutate (retrying read-modify-write), two concurrent writers\n")
	id, err := s.newDocument(ctx, "mutate")
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// Two clients, as two processes would be: each its own Repository. (One
	// Repository would queue its own two callers instead of letting them
	// race, and there would be nothing to retry.)
	second, err := repository.New[Document](s.db)
	if err != nil {
		return err
	}
	clients := []*repository.Repository[Document]{s.docs, second}

	writers := []struct{ who, key, value string }{
		{"writer 1", "field1", "value1"},
		{"writer 2", "field2", "value2"},
	}
	var (
		start    = make(chan struct{}) // released once both goroutines run
		ready    sync.WaitGroup
		bothRead = make(chan struct{}) // closed when both first reads are done
		reads    sync.WaitGroup
		done     sync.WaitGroup
		errs     = make([]error, len(writers))
		reports  = make([]repository.MutateReport, len(writers))
	)
	ready.Add(len(writers))
	reads.Add(len(writers))
	done.Add(len(writers))
	go func() { reads.Wait(); close(bothRead) }()
	for i, wr := range writers {
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			first := true
			_, err := clients[i].Mutate(ctx, id, func(d *Document) error {
				if first {
					// Make the interleaving certain: each writer changes
					// its copy only after both have read, so both first
					// attempts start from the same version and one of them
					// must lose and retry.
					first = false
					reads.Done()
					select {
					case <-bothRead:
					case <-ctx.Done():
						return ctx.Err()
					}
				}
				if d.Attrs == nil {
					d.Attrs = map[string]string{}
				}
				d.Attrs[wr.key] = wr.value
				return nil
			}, repository.Report(&reports[i]))
			if err != nil {
				errs[i] = fmt.Errorf("%s: Mutate: %w", wr.who, err)
				cancel() // release the other writer if it is waiting
			}
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}

	total := 0
	for i, wr := range writers {
		s.printf("  %s Mutate sets %s=%s: ok\n", wr.who, wr.key, wr.value)
		total += reports[i].Attempts
	}
	s.printf("  attempts in all: %d (both first attempts read the same version; the one that lost re-read and retried)\n", total)
	d, err := s.final(ctx, id)
	if err != nil {
		return err
	}
	if d.Attrs["field1"] != "value1" || d.Attrs["field2"] != "value2" {
		return fmt.Errorf("act 3: unexpected final attrs %v", d.Attrs)
	}
	s.printf("  => both field1 and field2 kept; final version %s\n", s.v(d.Version))
	return nil
}

// cleanup deletes the documents this run created.
func (s *story) cleanup(ctx context.Context) error {
	if len(s.created) == 0 {
		return nil
	}
	err := s.docs.DB(ctx).Where("id IN ?", s.created).Delete(&Document{}).Error //gormlockvet:ignore the run's own documents, once the story is over
	if err != nil {
		return fmt.Errorf("cleanup: delete the quickstart documents: %w", err)
	}
	return nil
}

// randomSuffix returns 8 random hex digits, so that documents of different
// runs on the same database never share an id.
func randomSuffix() (string, error) {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// versions names versions v1, v2, ... in the order they are first printed,
// so the output reads the same on every run: a real version is a clock
// reading (such as 1795401280989319), different every time.
type versions map[int64]string

// name returns v's name: the same every time, a new one the first time.
func (n *versions) name(v int64) string {
	if *n == nil {
		*n = versions{}
	}
	if _, ok := (*n)[v]; !ok {
		(*n)[v] = fmt.Sprintf("v%d", len(*n)+1)
	}
	return (*n)[v]
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
		dir, err := os.MkdirTemp("", "gormlock-quickstart-")
		if err != nil {
			return nil, nil, err
		}
		removeDir = func() error { return os.RemoveAll(dir) }
		target = filepath.Join(dir, "quickstart.db")
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
