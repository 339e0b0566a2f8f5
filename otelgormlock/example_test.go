package otelgormlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/otelgormlock"
	"github.com/gormlock/gormlock/repository"
)

// db is the application's database in the examples: a *gorm.DB opened
// with one of gormlock's openers (opendb/sqlite's Open, opendb/postgres's,
// ...), with gormlock's tables (migrations.Up) and the accounts table
// (db.AutoMigrate(&Account{})). The examples that use it need a database,
// so go test compiles them here without running them; each one's last
// comment says what it prints on a fresh SQLite database.
var db *gorm.DB

// Account is the application's model in the examples.
type Account struct {
	models.Model
	Owner   string
	Balance int64
}

// New records with the global MeterProvider and TracerProvider (those
// otel.SetMeterProvider and otel.SetTracerProvider set). ObserverPlugin
// registers the Observer for every repository of db built afterwards:
// each Mutate is then a span "mutate accounts" and counts its attempts.
func ExampleNew() {
	obs, err := otelgormlock.New()
	if err != nil {
		log.Fatal(err)
	}
	if err := db.Use(repository.ObserverPlugin(obs)); err != nil {
		log.Fatal(err)
	}
	accounts, err := repository.New[Account](db)
	if err != nil {
		log.Fatal(err)
	}

	ctx := context.Background()
	acct := &Account{Owner: "ann"}
	if err := accounts.Create(ctx, acct); err != nil {
		log.Fatal(err)
	}
	got, err := accounts.Mutate(ctx, acct.ID, func(a *Account) error { a.Balance += 10; return nil })
	fmt.Println(got.Balance, err)
	// Prints:
	// 10 <nil>
}

// WithMeterProvider and WithTracerProvider give the Observer providers of
// its own, the application's SDK providers in a program (no-op ones
// here). repository.WithObserver reports one repository's calls only.
func ExampleWithMeterProvider() {
	obs, err := otelgormlock.New(
		otelgormlock.WithMeterProvider(metricnoop.NewMeterProvider()),
		otelgormlock.WithTracerProvider(tracenoop.NewTracerProvider()),
	)
	fmt.Println(err)
	_ = repository.WithObserver(obs) // an Option of repository.New

	_, err = otelgormlock.New(otelgormlock.WithMeterProvider(nil))
	fmt.Println(errors.Is(err, locking.ErrInvalidArgument))
	// Output:
	// <nil>
	// true
}
