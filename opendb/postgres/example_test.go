package postgres_test

import (
	"log"

	"github.com/gormlock/gormlock/opendb/postgres"
)

// Open connects once to check that the server is reachable. The example
// has no output: it needs a server, so go test compiles it without running
// it.
func ExampleOpen() {
	db, err := postgres.Open("postgres://app:secret@localhost:5432/shop?sslmode=disable")
	if err != nil {
		log.Fatalf("opening PostgreSQL: %v", err) // unreachable server, bad DSN, ...
	}
	sqlDB, _ := db.DB()
	defer sqlDB.Close()
	// db is a *gorm.DB: pass it to migrations.Up, repository.New, ...
}
