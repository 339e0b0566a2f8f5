// Package otelgormlock reports what gormlock's calls decide — conflicts,
// attempts, escalations to a row lock, give-ups, unknown outcomes, lock
// waits, lease grants, expiries and fencing refusals — as OpenTelemetry
// metrics and spans. It implements [repository.Observer]; the library itself
// imports no telemetry package, so an application that does not import
// this one pays nothing for it.
//
// Register an [Observer] ([New]) for every repository of a *gorm.DB, before
// building them:
//
//	obs, err := otelgormlock.New() // the global providers; see the options
//	if err != nil {
//		log.Fatal(err)
//	}
//	if err := db.Use(repository.ObserverPlugin(obs)); err != nil {
//		log.Fatal(err)
//	}
//	accounts, err := repository.New[Account](db)
//
// or for one repository with [repository.WithObserver](obs).
//
// Every Mutate, Upsert, MutateRowLocked and lease call gets a span, named
// "<operation> <table>" ("mutate accounts"), with the attributes
// db.system.name, db.collection.name and db.operation.name, an event
// "gormlock.attempt" per attempt, and, when it fails, the status Error and
// error.type. The metrics, their units and attributes are listed in
// docs/observability.md, with what enabling them costs.
package otelgormlock
