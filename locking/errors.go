package locking

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Sentinel errors. Match them with errors.Is; the concrete error returned is
// usually one of the typed errors below, which carries the details.
var (
	// ErrStaleData means a guarded write found the record at another version
	// than the one the caller read: someone else changed it first.
	ErrStaleData = errors.New("gormlock: stale data")

	// ErrNotFound means the record does not exist (or no longer exists).
	ErrNotFound = errors.New("gormlock: record not found")

	// ErrAlreadyExists means a create collided with an existing record's key.
	ErrAlreadyExists = errors.New("gormlock: record already exists")

	// ErrInvalidArgument means the call was refused before any I/O because an
	// argument was unusable (nil entity, zero version, zero id, bad option).
	ErrInvalidArgument = errors.New("gormlock: invalid argument")

	// ErrLocked means the record is locked by someone else and the
	// operation did not get it: a row lock or the database's write lock it
	// chose not to wait for (NOWAIT) or whose wait ran out (SQLITE_BUSY
	// after the busy timeout, PostgreSQL 55P03, MySQL/MariaDB 1205 and
	// MySQL 8's 3572), or a lease someone else holds — which also matches
	// ErrLeased, so errors.Is(err, ErrLeased) tells the two apart, and a
	// row lock alone is errors.Is(err, ErrLocked) && !errors.Is(err,
	// ErrLeased). A lease matches ErrLocked because a leased record is
	// locked for everyone but its holder.
	ErrLocked = errors.New("gormlock: locked")

	// ErrLeased means someone else holds an unexpired lease on the record
	// (repository.Leases): the operation was refused, and may succeed once
	// the lease ends. A *LeaseError says who holds it and until when. It is
	// the lease form of ErrLocked, and also matches ErrLocked: check
	// ErrLeased to tell a lease from a row lock.
	ErrLeased = errors.New("gormlock: leased")

	// ErrLeaseExpired means a lease is no longer held by the caller: its
	// time ran out (by the database's clock), it was released, or its
	// owner's leases were released. A write or release with it is refused.
	// When someone else holds a newer lease on the record, the error is
	// ErrLeased instead.
	ErrLeaseExpired = errors.New("gormlock: lease expired")

	// ErrLockTimeout means waiting for a lock took longer than the timeout
	// the operation itself set. Only operations that take a lock timeout
	// option return it; a driver-level wait that runs out is ErrLocked. So
	// does a MySQL or MariaDB statement whose own time limit ran out
	// (MariaDB's max_statement_time, 1969; MySQL's MAX_EXECUTION_TIME,
	// 3024): the server killed it before it committed.
	ErrLockTimeout = errors.New("gormlock: lock timeout")

	// ErrDeadlock means the database aborted the transaction to break a
	// deadlock; the whole transaction may be retried. A Galera cluster
	// reports a transaction that lost certification to a write on another
	// node the same way (1213). On MySQL and MariaDB the transaction is
	// over when it is returned: a statement sent after it on the same
	// connection runs outside any transaction and commits by itself.
	ErrDeadlock = errors.New("gormlock: deadlock detected")

	// ErrSerialization means the database could not serialize the transaction
	// (SQLSTATE 40001); the whole transaction may be retried.
	ErrSerialization = errors.New("gormlock: serialization failure")

	// ErrNotSupported means gormlock cannot honour the request: the
	// database in use lacks the feature (SKIP LOCKED on SQLite), or a model
	// uses something gormlock does not handle. The error names which, and
	// what to do instead; gormlock never silently degrades such a request.
	ErrNotSupported = errors.New("gormlock: not supported")

	// ErrRetriesExhausted means a retrying helper ran out of attempts; the
	// error also matches the last attempt's error.
	ErrRetriesExhausted = errors.New("gormlock: retries exhausted")

	// ErrOperationKeyReused means an operation key (repository.OpKey) was
	// given with another write than the one it was first used for: another
	// table, record, kind of write or fingerprint. Errors matching it match
	// ErrInvalidArgument too.
	ErrOperationKeyReused = errors.New("gormlock: operation key reused for another write")

	// ErrCommitUnknown means a write's outcome is unknown: its COMMIT, or
	// its statement outside a transaction (which commits by itself), was
	// sent, and then the connection broke or the context ended before the
	// database answered. It may or may not have been applied. gormlock
	// never retries it blindly; a write made with an operation key
	// (repository.OpKey) can be repeated safely or looked up
	// (repository.LookupOperation). The error also matches its cause
	// (context.DeadlineExceeded, io.ErrUnexpectedEOF, ...).
	ErrCommitUnknown = errors.New("gormlock: outcome unknown")

	// ErrConditionFailed: Apply's If condition did not hold on the record
	// when its statement ran; nothing was written.
	ErrConditionFailed = errors.New("gormlock: condition not met")

	// ErrUnguardedWrite means a plain GORM update or delete of a versioned
	// model was refused, and nothing was sent, because no version guarded
	// it: the strict mode of gormlock's GORM plugin
	// (repository.StrictGORMWrites) refuses such writes, so that tests find
	// the call sites that could erase a concurrent change; its
	// GuardGORMUpdates refuses an update whose own condition could undo the
	// guard it adds.
	ErrUnguardedWrite = errors.New("gormlock: unguarded write")

	// ErrConstraintViolation means a write broke an integrity constraint
	// other than a unique key (which is ErrAlreadyExists): a foreign key
	// (a reference to a row that does not exist, or the delete of a row
	// still referenced), a CHECK constraint, or NOT NULL. The database
	// refused the statement: nothing of it was applied. The error is a
	// *DatabaseError whose Constraint (or Column, for NOT NULL) names what
	// was broken when the database says.
	ErrConstraintViolation = errors.New("gormlock: constraint violation")

	// ErrSchemaMismatch means a table does not have what gormlock needs:
	// repository.VerifySchema and VerifyOperationSchema found a column,
	// key or NOT NULL missing (a *repository.SchemaError lists them), or
	// migrations.Up found a table of one of its migrations with other
	// columns.
	ErrSchemaMismatch = errors.New("gormlock: schema mismatch")
)

// StaleDataError reports a guarded write that matched no row because the
// record is at another version. errors.Is(err, ErrStaleData) is true for it.
type StaleDataError struct {
	Table    string // table of the record
	ID       any    // primary key of the record
	Expected int64  // version the caller held
	Actual   int64  // version found in the database when the write failed
	Op       string // "update" or "delete"
}

// Error implements error.
func (e *StaleDataError) Error() string {
	op := e.Op
	if op == "" {
		op = "write"
	}
	switch {
	case e.Expected == 0 && e.Actual != 0:
		return fmt.Sprintf("gormlock: stale data: version missing: %s %s id=%v: the entity carries no version (0), and the record is at version %d; send the version it was read at",
			op, e.Table, e.ID, e.Actual)
	}
	return fmt.Sprintf("gormlock: stale data: %s %s id=%v expected version %d, found %d",
		op, e.Table, e.ID, e.Expected, e.Actual)
}

// Is reports whether target is ErrVersionMissing and the write carried no
// version (Expected 0) against a record at a real one.
func (e *StaleDataError) Is(target error) bool {
	return target == ErrVersionMissing && e.Expected == 0 && e.Actual != 0
}

// Unwrap returns ErrStaleData.
func (e *StaleDataError) Unwrap() error { return ErrStaleData }

// NotFoundError reports a record that does not exist. errors.Is(err,
// ErrNotFound) is true for it.
type NotFoundError struct {
	Table string
	ID    any
}

// Error implements error.
func (e *NotFoundError) Error() string {
	return fmt.Sprintf("gormlock: record not found: %s id=%v", e.Table, e.ID)
}

// Unwrap returns ErrNotFound.
func (e *NotFoundError) Unwrap() error { return ErrNotFound }

// RetryExhaustedError is returned by the retrying helpers when every attempt
// failed with a retryable error. errors.Is(err, ErrRetriesExhausted) is true,
// and so is errors.Is(err, X) for whatever X the last attempt's error matches
// (typically ErrStaleData).
type RetryExhaustedError struct {
	Attempts int   // how many attempts ran
	Last     error // the last attempt's error
}

// Error implements error.
func (e *RetryExhaustedError) Error() string {
	return fmt.Sprintf("gormlock: gave up after %d attempts: %v", e.Attempts, e.Last)
}

// Unwrap returns ErrRetriesExhausted and the last attempt's error.
func (e *RetryExhaustedError) Unwrap() []error { return []error{ErrRetriesExhausted, e.Last} }

// DatabaseError is a driver error that gormlock recognised. Kind is one of the
// sentinels (ErrAlreadyExists, ErrLocked, ErrDeadlock, ...), Code the
// database's own code (a SQLSTATE such as "23505", or a SQLite extended result
// code such as "SQLITE_CONSTRAINT_PRIMARYKEY"), and Err the driver's error.
// errors.Is matches Kind; errors.As reaches the driver error.
//
// For a violated constraint (ErrAlreadyExists, ErrConstraintViolation),
// Constraint is its name and Column the column, when the database names
// them: PostgreSQL names the constraint (and, for NOT NULL, the column);
// MySQL and MariaDB name a foreign key, a CHECK constraint, a unique key
// and a NOT NULL column in their messages; SQLite names a CHECK
// constraint, and the columns of a NOT NULL or unique constraint
// ("table.column"), but not a foreign key.
type DatabaseError struct {
	Kind       error
	Code       string
	Err        error
	Constraint string // the violated constraint's name, when known
	Column     string // the column of a NOT NULL violation, when known
}

// Error implements error.
func (e *DatabaseError) Error() string {
	switch {
	case e.Constraint != "" && e.Column != "":
		return fmt.Sprintf("%v (%s, constraint %s, column %s): %v", e.Kind, e.Code, e.Constraint, e.Column, e.Err)
	case e.Constraint != "":
		return fmt.Sprintf("%v (%s, constraint %s): %v", e.Kind, e.Code, e.Constraint, e.Err)
	case e.Column != "":
		return fmt.Sprintf("%v (%s, column %s): %v", e.Kind, e.Code, e.Column, e.Err)
	}
	return fmt.Sprintf("%v (%s): %v", e.Kind, e.Code, e.Err)
}

// Unwrap returns Kind and the driver error.
func (e *DatabaseError) Unwrap() []error { return []error{e.Kind, e.Err} }

// BatchError reports a batch of guarded writes in which some records did not
// match: nothing of the batch was written. Failed holds one error per failing
// record, in the order the batch wrote them (primary-key order): a
// *StaleDataError for a record at another version, a *NotFoundError for one
// that is gone. errors.Is(err, ErrStaleData) is true when any record was
// stale, errors.Is(err, ErrNotFound) when any was gone, and errors.As reaches
// each record's error.
type BatchError struct {
	Table  string
	Op     string  // "update"
	Total  int     // records in the batch
	Failed []error // the failing records' errors, in write order
}

// IDs returns the primary keys of the failing records, in write order.
func (e *BatchError) IDs() []any {
	ids := make([]any, 0, len(e.Failed))
	for _, err := range e.Failed {
		var stale *StaleDataError
		var missing *NotFoundError
		switch {
		case errors.As(err, &stale):
			ids = append(ids, stale.ID)
		case errors.As(err, &missing):
			ids = append(ids, missing.ID)
		}
	}
	return ids
}

// Error implements error.
func (e *BatchError) Error() string {
	msgs := make([]string, len(e.Failed))
	for i, err := range e.Failed {
		msgs[i] = err.Error()
	}
	return fmt.Sprintf("gormlock: batch %s of %d %s records wrote nothing: %d did not match (ids %v): %s",
		e.Op, e.Total, e.Table, len(e.Failed), e.IDs(), strings.Join(msgs, "; "))
}

// Unwrap returns the failing records' errors.
func (e *BatchError) Unwrap() []error { return e.Failed }

// LeaseError reports an operation refused because of a lease: the record is
// leased by someone else (Kind ErrLeased, which errors.Is also matches as
// ErrLocked), or the caller's lease is no longer held (Kind
// ErrLeaseExpired). errors.Is matches Kind. Holder and Until describe the
// current holder's lease when there is one; the token is never reported.
type LeaseError struct {
	Kind   error     // ErrLeased or ErrLeaseExpired
	Table  string    // table of the record
	ID     any       // primary key of the record
	Op     string    // what was refused: "get-and-lock" (Leases.Acquire), "update", "delete", "release", "renew"
	Holder string    // owner of the current lease, if any
	Fence  int64     // fencing number of the current lease, if any
	Until  time.Time // expiry of the current lease (database clock), if any
}

// Error implements error.
func (e *LeaseError) Error() string {
	if e.Holder != "" || !e.Until.IsZero() {
		return fmt.Sprintf("%v: %s %s id=%v: leased by %q (fence %d) until %s",
			e.Kind, e.Op, e.Table, e.ID, e.Holder, e.Fence, e.Until.UTC().Format(time.RFC3339Nano))
	}
	return fmt.Sprintf("%v: %s %s id=%v", e.Kind, e.Op, e.Table, e.ID)
}

// Unwrap returns Kind.
func (e *LeaseError) Unwrap() error { return e.Kind }

// Is makes a lease held by someone else (Kind ErrLeased) match ErrLocked
// too: the record is locked, by a lease.
func (e *LeaseError) Is(target error) bool { return target == ErrLocked && e.Kind == ErrLeased }

// ErrVersionMissing means a guarded write carried no version (0) while the
// record is at a real one: the caller never sent the version it read (a
// client that does not send one yet, a form built from the request). The
// error is a *StaleDataError with Expected 0, and matches ErrStaleData
// too; an HTTP API answers it 428 Precondition Required.
var ErrVersionMissing = errors.New("gormlock: version missing")

// ErrRecordGone means an operation-keyed call (repository.OpKey) was
// answered from its key: the operation was applied — by an earlier call
// with the key, or an earlier attempt of this one — and the record it
// wrote has been deleted (or soft-deleted) since, so there is no record to
// return. It is an outcome, not a failure: the write was applied, once. It
// matches no other sentinel (not ErrNotFound, which would read as "not
// applied"). A *RecordGoneError says which operation and the version it
// gave the record.
var ErrRecordGone = errors.New("gormlock: applied; the record has been deleted since")

// RecordGoneError answers a repeat of an applied operation whose record has
// been deleted since (see ErrRecordGone). errors.Is(err, ErrRecordGone) is
// true for it.
type RecordGoneError struct {
	Table string // table of the record
	ID    any    // primary key of the record
	Key   string // the operation key
	Kind  string // the kind of write recorded with the key ("update", "mutate", "apply", ...)
	// Version is the version the operation gave the record; 0 when its
	// key does not record it (an UpdateMany records its first record's).
	Version int64
}

// Error implements error.
func (e *RecordGoneError) Error() string {
	return fmt.Sprintf("gormlock: operation %q (%s of %s id=%v) was applied, giving version %d; the record has been deleted since",
		e.Key, e.Kind, e.Table, e.ID, e.Version)
}

// Unwrap returns ErrRecordGone.
func (e *RecordGoneError) Unwrap() error { return ErrRecordGone }
