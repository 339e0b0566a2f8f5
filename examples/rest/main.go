// Command rest serves a collection of documents over HTTP with package
// rest: the version of each document is its ETag, and a PUT, PATCH or
// DELETE must name the version it changes with If-Match, so two clients
// that edit the same document never overwrite each other unknowingly.
//
// From the examples directory:
//
//	go run ./rest                       # embedded SQLite in a temporary file, on 127.0.0.1:8080
//	go run ./rest -addr :9000 -db docs.db
//	go run ./rest -dsn 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable'
//	go run ./rest -dsn 'root@tcp(127.0.0.1:3306)/test'   # MySQL or MariaDB
//
// or from the repository root, go run ./examples/rest with the same flags.
// Then, with curl:
//
//	$ curl -si localhost:8080/documents/welcome | grep -i etag
//	Etag: "1795403112000001"
//	$ curl -s -o /dev/null -w '%{http_code}\n' -X PUT -H 'If-Match: "1795403112000001"' \
//	    -H 'Content-Type: application/json' -d '{"title":"Hello"}' localhost:8080/documents/welcome
//	200
//
// and the same PUT again is answered 412 Precondition Failed: the document
// is no longer at that version.
//
// The program creates gormlock's tables (leases, and the operations that
// Idempotency-Key requests record) with migrations.Up and its documents
// table with GORM's AutoMigrate, each when it is missing, and creates the
// document "welcome" when it is missing.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
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
	"github.com/gormlock/gormlock/rest"
)

// Document is the resource: its own string key (the last segment of its
// URL), a title and free-form attributes, stored as a JSON object.
// models.Versioned adds the version (the ETag) that every guarded write
// checks and advances, and the creation and update times.
type Document struct {
	ID    string            `gorm:"primaryKey" json:"id"`
	Title string            `gorm:"not null" json:"title"`
	Attrs map[string]string `gorm:"serializer:json" json:"attrs"`
	models.Versioned
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "`address` to listen on")
	dbPath := flag.String("db", "", "SQLite database `file` (default: a temporary file, removed at exit)")
	dsn := flag.String("dsn", "", "PostgreSQL or MySQL/MariaDB `DSN` to use instead of SQLite: postgres://user@host:5432/db?sslmode=disable, mysql://user@host:3306/db or user@tcp(host:3306)/db")
	flag.Parse()
	if flag.NArg() > 0 || (*dbPath != "" && *dsn != "") || (*dsn != "" && server(*dsn) == "") {
		fmt.Fprintln(os.Stderr, "usage: rest [-addr ADDR] [-db FILE | -dsn postgres://... | -dsn mysql://... | -dsn user@tcp(host:port)/dbname]")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := serve(ctx, *addr, *dbPath, *dsn); err != nil {
		fmt.Fprintln(os.Stderr, "rest:", err)
		stop()
		os.Exit(1)
	}
}

func serve(ctx context.Context, addr, dbPath, dsn string) (err error) {
	target := dsn
	if dbPath != "" {
		target = dbPath
	}
	db, closeDB, err := open(target)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeDB()) }()
	h, err := newHandler(ctx, db)
	if err != nil {
		return err
	}
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	log.Printf("serving documents on http://%s/documents/ (%s)", addr, db.Dialector.Name())
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// newHandler creates the tables in db and the document "welcome", each when
// it is missing, and returns the server's routes: the documents collection
// at /documents (with or without the trailing slash) and each document at
// /documents/{id}.
func newHandler(ctx context.Context, db *gorm.DB) (http.Handler, error) {
	// gormlock's own tables (leases, operations), then the program's.
	if err := migrations.Up(ctx, db); err != nil {
		return nil, err
	}
	if err := db.WithContext(ctx).AutoMigrate(&Document{}); err != nil {
		return nil, err
	}
	docs, err := repository.New[Document](db, repository.WithLeases())
	if err != nil {
		return nil, err
	}
	if err := docs.VerifySchema(ctx); err != nil {
		return nil, err
	}
	if err := repository.VerifyOperationSchema(ctx, db); err != nil {
		return nil, err
	}
	err = docs.Create(ctx, &Document{ID: "welcome", Title: "Welcome", Attrs: map[string]string{"lang": "en"}})
	if err != nil && !errors.Is(err, locking.ErrAlreadyExists) {
		return nil, err
	}
	h, err := rest.New(docs, rest.WithErrorLog(func(r *http.Request, err error) {
		log.Printf("%s %s: %v", r.Method, r.URL.Path, err)
	}))
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	rest.Mount(mux, "/documents", h) // "/documents" and "/documents/" alike
	return mux, nil
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
		dir, err := os.MkdirTemp("", "gormlock-rest-")
		if err != nil {
			return nil, nil, err
		}
		removeDir = func() error { return os.RemoveAll(dir) }
		target = filepath.Join(dir, "rest.db")
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
