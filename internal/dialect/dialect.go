// Package dialect is gormlock's one table of what each supported database
// can do for locking, so that the differences live in one place instead of
// in scattered if statements.
package dialect

import (
	"fmt"
	"strings"

	"github.com/gormlock/gormlock/locking"
)

// Names of the supported databases. The first three are what
// gorm.Dialector.Name reports (MySQL is "mysql" for MySQL and MariaDB
// alike); MariaDB and Galera are told apart from MySQL by asking the server
// (see Flavor).
const (
	SQLite   = "sqlite"
	Postgres = "postgres"
	MySQL    = "mysql"
	MariaDB  = "mariadb"
	Galera   = "galera"
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
	// NodeLocal: the database's own SQL, but the lock is held on one node
	// of a multi-primary cluster (Galera) only: writers on other nodes are
	// not kept out. They are still caught: the cluster refuses the
	// conflicting transaction at COMMIT (error 1213, ErrDeadlock), and the
	// retry helpers retry it.
	NodeLocal
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
	// when larger. The write reads it back as VersionBack says. Reading the
	// clock when the statement runs, on one clock for every writer, is
	// what keeps a record created again after a delete above every
	// version the earlier record had, however late the statement ran. ""
	// where the writer computes the version itself (SQLite: in the
	// process that holds the database's one write lock).
	NextVersion string
	// VersionBack is how a write reads back the version NextVersion gave:
	// RETURNING (PostgreSQL), or the LAST_INSERT_ID(expr) the statement set,
	// which the server sends in its answer (MySQL: no UPDATE ... RETURNING).
	VersionBack VersionBack
	// StatementTimeout is a prefix that bounds one statement's run time,
	// the wait for locks included, to a number of seconds written right
	// after it (then " FOR " and the statement): MariaDB's SET STATEMENT
	// max_statement_time. The statement is killed on the server when the
	// time is up (not applied). "" where the database has none.
	StatementTimeout string
	// KeyText is an SQL expression for a one-column primary key as text
	// (the key in place of its ?), as lease rows name records.
	KeyText string
	// ShareClause is the locking clause of a shared row lock.
	ShareClause string
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

// VersionBack is how a write reads the version it gave back.
type VersionBack int

// The ways to read a version back.
const (
	// ComputedInGo: the writer computed it (SQLite).
	ComputedInGo VersionBack = iota
	// Returning: UPDATE ... RETURNING version.
	Returning
	// LastInsertID: the statement set LAST_INSERT_ID(version); the
	// server's answer carries it.
	LastInsertID
)

// table is the capability table. The deployment guide shows the same table
// to users, and a test keeps the two in step.
var table = map[string]Caps{
	Postgres: {Name: Postgres, NowMillis: "FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT",
		// An uncorrelated sub-select runs once, before the scan: the
		// setting is in force when the statement waits for a row lock, and
		// is_local ends it with the statement's own transaction.
		SelfLockTimeout:  "(SELECT set_config('lock_timeout', ?, true)) IS NOT NULL",
		NextVersion:      "GREATEST(?, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT)",
		VersionBack:      Returning,
		KeyText:          "CAST(? AS TEXT)",
		CompositeKeyText: "CAST(json_build_array(?) AS TEXT)",
		ShareClause:      "FOR SHARE",
		features: map[Feature]Support{
			RowLock:     {How: Native},
			SharedLock:  {How: Native},
			NoWait:      {How: Native},
			LockTimeout: {How: Native},
			SkipLocked:  {How: Native},
		}},
	SQLite: {Name: SQLite, NowMillis: "CAST(unixepoch('subsec') * 1000 AS INTEGER)", SingleWriter: true,
		KeyText: "CAST(? AS TEXT)", CompositeKeyText: "json_array(?)", ShareClause: "FOR SHARE", features: map[Feature]Support{
			RowLock:     {How: WriteLock},
			SharedLock:  {How: Unsupported, Why: "SQLite has no row locks; a shared lock cannot keep writers out without also excluding the other shared lockers"},
			NoWait:      {How: WriteLock},
			LockTimeout: {How: WriteLock},
			SkipLocked:  {How: Unsupported, Why: "SQLite has no row locks, so there are no locked rows to skip; its write lock lets one worker at a time claim rows"},
		}},
	// MariaDB (10.6 or later; tested on 10.11). SYSDATE, unlike NOW, is
	// read when the expression is evaluated, after any lock wait.
	MariaDB: mysqlCaps(MariaDB, map[Feature]Support{
		RowLock:     {How: Native},
		SharedLock:  {How: Native},
		NoWait:      {How: Native},
		LockTimeout: {How: Native},
		SkipLocked:  {How: Native},
	}),
	// MySQL 8. Not tested by gormlock's suite.
	MySQL: func() Caps {
		c := mysqlCaps(MySQL, map[Feature]Support{
			RowLock:     {How: Native},
			SharedLock:  {How: Native},
			NoWait:      {How: Native},
			LockTimeout: {How: Unsupported, Why: "MySQL bounds a lock wait in whole seconds only (innodb_lock_wait_timeout); use NoWait, or MariaDB, whose max_statement_time takes fractions"},
			SkipLocked:  {How: Native},
		})
		c.StatementTimeout = "" // MySQL has no SET STATEMENT
		c.ShareClause = "FOR SHARE"
		return c
	}(),
	// A MariaDB Galera cluster: every node takes writes, and row locks are
	// held on the node that took them only.
	Galera: mysqlCaps(Galera, map[Feature]Support{
		RowLock:     {How: NodeLocal},
		SharedLock:  {How: NodeLocal},
		NoWait:      {How: NodeLocal},
		LockTimeout: {How: NodeLocal},
		SkipLocked:  {How: Unsupported, Why: "Galera's row locks are held on one node only, so two nodes can claim the same row: SKIP LOCKED cannot share work out across the cluster; use leases (Leases.Acquire), which the cluster orders"},
	}),
}

// MySQLClockMicros is MySQL's and MariaDB's clock in microseconds since
// the Unix epoch, read when the expression is evaluated (SYSDATE, unlike
// NOW, after any lock wait), whatever the session's time zone: SYSDATE is
// the session zone's wall time, and the statement's UTC offset,
// CURRENT_TIMESTAMP (NOW) minus UTC_TIMESTAMP, both the statement's start,
// turns it into UTC. UNIX_TIMESTAMP(SYSDATE(6)) would convert back through
// the zone's rules instead, which map the hour a daylight saving change
// repeats to one of its two instants: for that hour the clock would read
// an hour early. (It spells NOW as CURRENT_TIMESTAMP: the lease and
// operation statements put the clock where their text says NOW.)
const MySQLClockMicros = "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', SYSDATE(6)) - TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), CURRENT_TIMESTAMP(6)))"

// mysqlCaps are the capabilities MySQL, MariaDB and Galera share.
func mysqlCaps(name string, features map[Feature]Support) Caps {
	return Caps{
		Name:             name,
		NowMillis:        "(" + MySQLClockMicros + " DIV 1000)",
		NextVersion:      "LAST_INSERT_ID(GREATEST(?, " + MySQLClockMicros + "))",
		VersionBack:      LastInsertID,
		StatementTimeout: "SET STATEMENT max_statement_time=",
		HashComments:     true,
		// The lease table's key columns are VARBINARY (a binary
		// collation would still ignore trailing spaces): the key's text is
		// compared as its UTF-8 bytes, which also lets the comparison use
		// the table's primary key instead of scanning (and locking) every
		// row of it.
		KeyText:          "CAST(CAST(? AS CHAR CHARACTER SET utf8mb4) AS BINARY)",
		CompositeKeyText: "CAST(CONVERT(JSON_ARRAY(?) USING utf8mb4) AS BINARY)",
		ShareClause:      "LOCK IN SHARE MODE",
		features:         features,
	}
}

// Lookup returns the capabilities of the database named name (a name
// gorm.Dialector.Name reports, or one of MariaDB and Galera) and whether
// gormlock supports it. For "mysql" the caller should ask the server which
// it is (Flavor); until then MySQL's capabilities are the answer.
func Lookup(name string) (Caps, bool) {
	c, ok := table[name]
	return c, ok
}

// Flavor returns the capabilities of a server the "mysql" dialector talks
// to, from what it says of itself: its VERSION() and its wsrep_on variable
// ("" when it has none).
func Flavor(version, wsrepOn string) Caps {
	switch {
	case strings.EqualFold(wsrepOn, "ON"):
		return table[Galera]
	case strings.Contains(strings.ToLower(version), "mariadb"):
		return table[MariaDB]
	}
	return table[MySQL]
}

// Names returns the supported databases' names, sorted.
func Names() []string { return []string{Galera, MariaDB, MySQL, Postgres, SQLite} }

// Dialector reports whether name is the gorm.Dialector name the
// capabilities of this database are looked up by.
func (c Caps) Dialector() string {
	switch c.Name {
	case MariaDB, Galera:
		return MySQL
	}
	return c.Name
}

// How returns how the database provides f.
func (c Caps) How(f Feature) How { return c.features[f].How }

// Check returns nil when the database provides f, and otherwise an error
// matching locking.ErrNotSupported that names the feature, the database and
// the reason.
func (c Caps) Check(f Feature) error {
	s, ok := c.features[f]
	if ok && s.How != Unsupported {
		return nil
	}
	return fmt.Errorf("%w: %s on %s: %s", locking.ErrNotSupported, f, c.Name, s.Why)
}
