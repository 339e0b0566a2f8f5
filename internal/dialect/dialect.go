// Package dialect is gormlock's one table of what each supported database
// can do for locking, so that the differences live in one place instead of
// in scattered if statements.
package dialect

import (
	"fmt"

	"github.com/gormlock/gormlock/locking"
)

// Names of the supported databases, as gorm.Dialector.Name reports them.
const (
	SQLite   = "sqlite"
	Postgres = "postgres"
)

// Feature is one locking feature a caller can ask for.
type Feature int

// The locking features.
const (
	// RowLock is an exclusive lock on the rows a read returns, held until
	// the transaction ends (SELECT ... FOR UPDATE).
	RowLock Feature = iota
	// SharedLock is a lock that lets other readers lock the rows shared
	// but keeps writers out (SELECT ... FOR SHARE).
	SharedLock
	// NoWait fails at once instead of waiting for a lock another
	// transaction holds.
	NoWait
	// LockTimeout waits for a lock at most a given time.
	LockTimeout
	// SkipLocked leaves out the rows other transactions have locked
	// (SELECT ... FOR UPDATE SKIP LOCKED), for work queues.
	SkipLocked
)

var featureNames = [...]string{
	RowLock:     "FOR UPDATE",
	SharedLock:  "FOR SHARE",
	NoWait:      "NOWAIT",
	LockTimeout: "lock timeout",
	SkipLocked:  "SKIP LOCKED",
}

// String returns the feature's SQL name.
func (f Feature) String() string {
	if f < 0 || int(f) >= len(featureNames) {
		return fmt.Sprintf("Feature(%d)", int(f))
	}
	return featureNames[f]
}

// How is the way a database provides a feature.
type How int

const (
	// Unsupported: asking for the feature is an error matching
	// locking.ErrNotSupported; it is never silently dropped.
	Unsupported How = iota
	// Native: the database's own SQL (a locking clause, lock_timeout).
	Native
	// WriteLock: the database has no row locks; the transaction takes the
	// database-wide write lock instead, which excludes every other writer
	// (and so is at least as strong as the row lock). NoWait and
	// LockTimeout then bound the wait for that write lock.
	WriteLock
)

// Support is how one database provides one feature, and why when it does
// not.
type Support struct {
	How How
	Why string // for Unsupported: the reason, shown in the error
}

// Caps are one database's locking capabilities.
type Caps struct {
	Name string
	// NowMillis is an SQL expression for the database clock's current time
	// in milliseconds since the Unix epoch (the actual time, not the
	// transaction's start), used to judge lease expiry.
	NowMillis string
	// SelfLockTimeout is an SQL condition that, added to a write's WHERE,
	// sets the statement's own lock wait limit from one parameter (a
	// PostgreSQL interval text such as "250ms") before the statement waits
	// for any row; "" where the database has no such form. gormlock uses
	// it to end a write's wait on the database before the caller's
	// deadline, so that the outcome is "not applied" rather than unknown.
	SelfLockTimeout string
	// NextVersion is an SQL expression for the version a write gives a
	// record, from one parameter, the least it may be (the previous
	// version + 1): the database's clock in microseconds, or that floor
	// when larger. The write reads it back with RETURNING. Reading the
	// clock when the statement runs, on one clock for every writer, is
	// what keeps a record created again after a delete above every
	// version the earlier record had, however late the statement ran. ""
	// where the writer computes the version itself (SQLite: in the
	// process that holds the database's one write lock).
	NextVersion string
	// SingleWriter means the database lets one connection write at a
	// time (SQLite): gormlock's writes queue for it in the process and
	// wait for it in Go, where the context can end the wait.
	SingleWriter bool
	// HashComments means '#' starts a comment (MySQL).
	HashComments bool
	// CompositeKeyText is an SQL expression for a composite primary key as
	// text, the key's columns in place of its one ?: a JSON array, whose
	// text the database writes the same way for the same key.
	CompositeKeyText string
	features         map[Feature]Support
}

// table is the capability table. README.md ("Pessimistic locking") shows
// the same table to users; TestREADMEMatchesTable keeps the two in step.
var table = map[string]Caps{
	Postgres: {Name: Postgres, NowMillis: "FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT",
		// An uncorrelated sub-select runs once, before the scan: the
		// setting is in force when the statement waits for a row lock, and
		// is_local ends it with the statement's own transaction.
		SelfLockTimeout:  "(SELECT set_config('lock_timeout', ?, true)) IS NOT NULL",
		NextVersion:      "GREATEST(?, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT)",
		CompositeKeyText: "CAST(json_build_array(?) AS TEXT)",
		features: map[Feature]Support{
			RowLock:     {How: Native},
			SharedLock:  {How: Native},
			NoWait:      {How: Native},
			LockTimeout: {How: Native},
			SkipLocked:  {How: Native},
		}},
	SQLite: {Name: SQLite, NowMillis: "CAST(unixepoch('subsec') * 1000 AS INTEGER)", SingleWriter: true, CompositeKeyText: "json_array(?)", features: map[Feature]Support{
		RowLock:     {How: WriteLock},
		SharedLock:  {How: Unsupported, Why: "SQLite has no row locks; a shared lock cannot keep writers out without also excluding the other shared lockers"},
		NoWait:      {How: WriteLock},
		LockTimeout: {How: WriteLock},
		SkipLocked:  {How: Unsupported, Why: "SQLite has no row locks, so there are no locked rows to skip; its write lock lets one worker at a time claim rows"},
	}},
}

// Lookup returns the capabilities of the database named name and whether
// gormlock supports it.
func Lookup(name string) (Caps, bool) {
	c, ok := table[name]
	return c, ok
}

// Names returns the supported databases' names, sorted.
func Names() []string { return []string{Postgres, SQLite} }

// How returns how the database provides f.
func (c Caps) How(f Feature) How { return c.features[f].How }

// Check returns nil when the database provides f, and otherwise an error
// matching locking.ErrNotSupported that names the feature, the database and
// the reason.
func (c Caps) Check(f Feature) error {
	s := c.features[f]
	if s.How != Unsupported {
		return nil
	}
	return fmt.Errorf("%w: %s on %s: %s", locking.ErrNotSupported, f, c.Name, s.Why)
}
