package opendb_test

import (
	"errors"
	"log"

	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/opendb"
)

// Postgres opens PostgreSQL through pgx from a URL (or key=value pairs) and
// connects once to check that the server is reachable. The example has no
// output: it needs a server, so go test compiles it without running it.
func ExamplePostgres() {
	db, err := opendb.Postgres("postgres://app:secret@localhost:5432/shop?sslmode=disable")
	if err != nil {
		log.Fatalf("opening PostgreSQL: %v", err) // unreachable server, bad DSN, ...
	}
	defer opendb.Close(db)
	// db is a *gorm.DB: pass it to migrations.Up, repository.New, ...
}

// MySQL opens MySQL or MariaDB with the settings MySQLDSN adds to the DSN,
// and checks them on a first connection: a DSN that contradicts them is
// refused with an error matching locking.ErrInvalidArgument, before or
// after connecting. The example has no output: it needs a server, so go
// test compiles it without running it.
func ExampleMySQL() {
	db, err := opendb.MySQL("app:secret@tcp(localhost:3306)/shop")
	if errors.Is(err, locking.ErrInvalidArgument) {
		log.Fatalf("fix the DSN: %v", err) // e.g. clientFoundRows=false, a non-strict sql_mode
	}
	if err != nil {
		log.Fatalf("opening MySQL: %v", err)
	}
	defer opendb.Close(db)
	// db is a *gorm.DB: pass it to migrations.Up, repository.New, ...
}
