package postgres_test

import (
	"fmt"
	"log"
	"os"

	"github.com/gormlock/gormlock/opendb/postgres"
)

// Open connects once to check that the server is reachable, and opens the
// pool with the settings gormlock relies on. The DSN here comes from the
// environment (postgres://app:secret@localhost:5432/shop, say). The
// example needs a server, so go test compiles it without running it; its
// last comment says what it prints.
func ExampleOpen() {
	db, err := postgres.Open(os.Getenv("POSTGRES_DSN"))
	if err != nil {
		log.Fatalf("opening PostgreSQL: %v", err) // unreachable server, bad DSN, ...
	}
	sqlDB, _ := db.DB()
	defer sqlDB.Close()
	// db is a *gorm.DB: pass it to migrations.Up, repository.New, ...
	var mode string
	db.Raw(`SHOW default_transaction_isolation`).Scan(&mode)
	fmt.Println(db.Dialector.Name(), mode)
	// Prints:
	// postgres read committed
}
