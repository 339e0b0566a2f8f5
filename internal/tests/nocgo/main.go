// Command nocgo is a PostgreSQL-only service built from gormlock's packages,
// the shape of a program shipped as a static binary. `make nocgo` builds it
// with CGO_ENABLED=0 to prove that gormlock needs no C compiler when SQLite
// is not used.
//
//	nocgo -dsn postgres://postgres@127.0.0.1:5432/test?sslmode=disable -addr :8080
package main

import (
	"flag"
	"log"
	"net/http"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	pgopen "github.com/gormlock/gormlock/opendb/postgres"

	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
	"github.com/gormlock/gormlock/rest"
)

func main() {
	dsn := flag.String("dsn", "", "PostgreSQL connection string")
	addr := flag.String("addr", "127.0.0.1:8080", "address to serve the accounts API on")
	flag.Parse()
	if err := run(*dsn, *addr); err != nil {
		log.Fatal(err)
	}
}

func run(dsn, addr string) error {
	db, err := pgopen.Open(dsn)
	if err != nil {
		return err
	}
	defer fixtures.Close(db)
	accounts, err := repository.New[fixtures.Account](db)
	if err != nil {
		return err
	}
	h, err := rest.New(accounts, rest.WithErrorLog(func(r *http.Request, err error) {
		log.Printf("%s %s: %v (code %q)", r.Method, r.URL.Path, err, locking.Code(err))
	}))
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	rest.Mount(mux, "/accounts", h)
	return http.ListenAndServe(addr, mux)
}
