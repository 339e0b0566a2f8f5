package locking

import (
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/mattn/go-sqlite3"
)

// sqlStater is implemented by PostgreSQL driver errors (*pgconn.PgError) and
// by other drivers that expose a SQLSTATE.
type sqlStater interface{ SQLState() string }

// pgKinds maps the SQLSTATEs gormlock understands to its sentinels.
var pgKinds = map[string]error{
	"23505": ErrAlreadyExists, // unique_violation
	"55P03": ErrLocked,        // lock_not_available (NOWAIT, lock_timeout)
	"40P01": ErrDeadlock,      // deadlock_detected
	"40001": ErrSerialization, // serialization_failure
	// program_limit_exceeded: a value too large for an index (a very long
	// key), a statement too complex. Caused by the input, so bad input.
	"54000": ErrInvalidArgument,
}

// sqliteKinds maps SQLite extended result codes to gormlock's sentinels.
var sqliteKinds = map[sqlite3.ErrNoExtended]struct {
	kind error
	name string
}{
	sqlite3.ErrConstraintPrimaryKey: {ErrAlreadyExists, "SQLITE_CONSTRAINT_PRIMARYKEY"},
	sqlite3.ErrConstraintUnique:     {ErrAlreadyExists, "SQLITE_CONSTRAINT_UNIQUE"},
	// A deferred transaction whose read snapshot went stale before it wrote:
	// only re-running the whole transaction can succeed, as with 40001.
	sqlite3.ErrBusySnapshot:      {ErrSerialization, "SQLITE_BUSY_SNAPSHOT"},
	sqlite3.ErrBusyRecovery:      {ErrLocked, "SQLITE_BUSY_RECOVERY"},
	sqlite3.ErrLockedSharedCache: {ErrLocked, "SQLITE_LOCKED_SHAREDCACHE"},
}

// Classify returns err wrapped in a *DatabaseError when it carries a database
// condition gormlock recognises (unique violation, lock not available,
// deadlock, serialization failure, SQLITE_BUSY/SQLITE_LOCKED, and PostgreSQL's
// data exceptions, SQLSTATE class 22, as ErrInvalidArgument); otherwise it
// returns err unchanged. A nil err gives nil. The driver error stays reachable
// with errors.As. Classification uses SQLSTATEs and SQLite result codes, never
// message text.
func Classify(err error) error {
	if err == nil {
		return nil
	}
	var already *DatabaseError
	if errors.As(err, &already) {
		return err
	}
	var st sqlStater
	if errors.As(err, &st) {
		code := st.SQLState()
		if kind, ok := pgKinds[code]; ok {
			return &DatabaseError{Kind: kind, Code: code, Err: err}
		}
		if strings.HasPrefix(code, "22") {
			// Class 22, data exception: the value itself is unacceptable
			// (a NUL byte in text, a number out of range). Bad input.
			return &DatabaseError{Kind: ErrInvalidArgument, Code: code, Err: err}
		}
		return err
	}
	var se sqlite3.Error
	if errors.As(err, &se) {
		if k, ok := sqliteKinds[se.ExtendedCode]; ok {
			return &DatabaseError{Kind: k.kind, Code: k.name, Err: err}
		}
		switch se.Code {
		case sqlite3.ErrBusy:
			return &DatabaseError{Kind: ErrLocked, Code: "SQLITE_BUSY", Err: err}
		case sqlite3.ErrLocked:
			return &DatabaseError{Kind: ErrLocked, Code: "SQLITE_LOCKED", Err: err}
		}
		return err
	}
	return err
}

// IsRetryable reports whether err is a condition after which re-running the
// whole unit of work (a fresh read included) may succeed: stale data, a
// deadlock or a serialization failure. Lock contention (ErrLocked) and an
// unknown commit outcome are not retryable by this definition.
func IsRetryable(err error) bool {
	if errors.Is(err, ErrCommitUnknown) {
		return false
	}
	return errors.Is(err, ErrStaleData) || errors.Is(err, ErrDeadlock) || errors.Is(err, ErrSerialization)
}

// Code returns the database code (SQLSTATE or SQLite extended result code)
// carried by err, or "" when err has none. It is meant for logs and metrics.
func Code(err error) string {
	var de *DatabaseError
	if errors.As(err, &de) {
		return de.Code
	}
	var st sqlStater
	if errors.As(err, &st) {
		return st.SQLState()
	}
	var se sqlite3.Error
	if errors.As(err, &se) {
		return "SQLITE_" + strconv.Itoa(int(se.ExtendedCode))
	}
	return ""
}

// Invalid returns an error matching ErrInvalidArgument with the given message;
// gormlock's packages use it so every refused argument reads the same way.
func Invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidArgument}, args...)...)
}

// ClassifyCommit classifies an error returned by COMMIT. An error the
// database itself reported (a SQLSTATE, a SQLite result code), sql.ErrTxDone,
// or pgx's ErrTxCommitRollback (the server answered COMMIT with ROLLBACK
// because a statement had failed) means the transaction did not commit, and
// is classified like any other error. Anything else (a broken connection, an I/O error) leaves the
// outcome unknown: the result matches ErrCommitUnknown as well as the cause,
// and must not be retried blindly.
func ClassifyCommit(err error) error {
	if err == nil {
		return nil
	}
	var st sqlStater
	var se sqlite3.Error
	if errors.As(err, &st) || errors.As(err, &se) || errors.Is(err, sql.ErrTxDone) || errors.Is(err, pgx.ErrTxCommitRollback) {
		return Classify(err)
	}
	return fmt.Errorf("%w: %w", ErrCommitUnknown, err)
}
