// Command rest serves a collection of documents over HTTP with
// gormlock/rest: the version of each document is its ETag, and a PUT, PATCH
// or DELETE must name the version it changes with If-Match.
//
//	go run ./examples/rest                       # embedded SQLite in a temporary file, on 127.0.0.1:8080
//	go run ./examples/rest -addr :9000 -db docs.db
//	go run ./examples/rest -dsn postgres://postgres@127.0.0.1:5432/test?sslmode=disable
//
// It creates the document "welcome" when it is missing. README.md shows a
// curl session against it (checked by this package's test).
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
	"time"

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/exampledb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/repository"
	"github.com/gormlock/gormlock/rest"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "`address` to listen on")
	dbPath := flag.String("db", "", "SQLite database `file` (default: a temporary file, removed at exit)")
	dsn := flag.String("dsn", "", "PostgreSQL `URL` to use instead of SQLite")
	flag.Parse()
	if flag.NArg() > 0 || (*dbPath != "" && *dsn != "") {
		fmt.Fprintln(os.Stderr, "usage: rest [-addr ADDR] [-db FILE | -dsn postgres://...]")
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
		target = "sqlite:" + dbPath
	}
	db, closeDB, err := exampledb.Open(ctx, target, "rest")
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

// newHandler makes sure the document "welcome" exists in the migrated db,
// and returns the server's routes: the documents collection at /documents
// (with or without the trailing slash) and each document at /documents/{id}.
func newHandler(ctx context.Context, db *gorm.DB) (http.Handler, error) {
	docs, err := repository.New[models.Document](db, repository.WithLeases())
	if err != nil {
		return nil, err
	}
	err = docs.Create(ctx, &models.Document{ID: "welcome", Title: "Welcome", Attrs: models.Attributes{"lang": "en"}})
	if err != nil && !errors.Is(err, locking.ErrAlreadyExists) {
		return nil, err
	}
	h, err := rest.New(docs, rest.ErrorLog(func(r *http.Request, err error) {
		log.Printf("%s %s: %v", r.Method, r.URL.Path, err)
	}))
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	rest.Mount(mux, "/documents", h) // "/documents" and "/documents/" alike
	return mux, nil
}
