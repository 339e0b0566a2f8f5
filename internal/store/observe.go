package store

import (
	"context"
	"errors"
	"time"

	"github.com/gormlock/gormlock/internal/dialect"
	"github.com/gormlock/gormlock/locking"
)

// Observer is told what the store sees that its callers cannot: how long a
// write waited at SQLite's gate, and which writes ended with an unknown
// outcome. Package repository adapts its Observer to it, naming the table;
// nil (the usual case) costs a nil check.
type Observer interface {
	// GateWait is called after each wait for SQLite's write lock at the
	// gate (a write outside a transaction, or BEGIN IMMEDIATE): d is from
	// asking to holding the lock, err the wait's error.
	GateWait(ctx context.Context, d time.Duration, err error)
	// UnknownOutcome is called for each write statement outside a
	// transaction, and each COMMIT, whose outcome is unknown
	// (locking.ErrCommitUnknown).
	UnknownOutcome(ctx context.Context, err error)
}

// ObserverPluginName is the name repository.ObserverPlugin registers under
// in gorm.Config.Plugins.
const ObserverPluginName = "gormlock:observer"

// ObserverSource is the plugin registered as ObserverPluginName: Of asks it
// for the Observer of a store on a database of the given system
// (SystemName), so that the calls that take a *gorm.DB (RunInTx, ...) are
// observed too.
type ObserverSource interface {
	StoreObserver(system string) Observer
}

// SystemName is the database as OpenTelemetry's db.system.name names it:
// "postgresql", "mysql", "mariadb" (a Galera cluster's nodes included) or
// "sqlite".
func SystemName(c dialect.Caps) string {
	switch c.Name {
	case dialect.Postgres:
		return "postgresql"
	case dialect.MariaDB, dialect.Galera:
		return "mariadb"
	}
	return c.Name
}

// unknown tells s.Obs about err when it is an unknown outcome, and returns
// err. A query that found no row (sql.ErrNoRows, which ClassifyWrite marks
// unknown as it marks every error it cannot place) had its answer: its
// callers take it for "no row matched", and so does the Observer.
func (s Store) unknown(ctx context.Context, err error) error {
	if s.Obs != nil && err != nil && errors.Is(err, locking.ErrCommitUnknown) && !IsNoRows(err) {
		s.Obs.UnknownOutcome(ctx, err)
	}
	return err
}

// gateWait tells s.Obs how long a wait at SQLite's gate that began at begin
// took, when there is an Observer (begin is then set).
func (s Store) gateWait(ctx context.Context, begin time.Time, err error) {
	if s.Obs != nil {
		s.Obs.GateWait(ctx, time.Since(begin), err)
	}
}

// obsNow returns the time now when s has an Observer, and the zero time
// otherwise: the clock is read only for an Observer.
func (s Store) obsNow() time.Time {
	if s.Obs == nil {
		return time.Time{}
	}
	return time.Now()
}
