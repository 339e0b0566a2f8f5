package locking

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/notcommitted"
)

// sqlStater is implemented by PostgreSQL driver errors (*pgconn.PgError) and
// by other drivers that expose a SQLSTATE.
type sqlStater interface{ SQLState() string }

// pgKinds maps the SQLSTATEs gormlock understands to its sentinels.
var pgKinds = map[string]error{
	"55P03": ErrLocked,        // lock_not_available (NOWAIT, lock_timeout)
	"40P01": ErrDeadlock,      // deadlock_detected
	"40001": ErrSerialization, // serialization_failure
	// program_limit_exceeded: a value too large for an index (a very long
	// key), a statement too complex. Caused by the input, so bad input.
	"54000": ErrInvalidArgument,
	// A caller's condition (Find's Where, Apply's If, a GORM scope) that
	// is not valid SQL for the table: a syntax error, a column that does
	// not exist or is ambiguous, a function that does not exist, an
	// operator between types that have none. Bad input: nothing ran.
	"42601": ErrInvalidArgument, // syntax_error
	"42703": ErrInvalidArgument, // undefined_column
	"42702": ErrInvalidArgument, // ambiguous_column
	"42883": ErrInvalidArgument, // undefined_function (also a missing operator)
	"42804": ErrInvalidArgument, // datatype_mismatch
}

// pgConstraintKind is the sentinel of a SQLSTATE of class 23, integrity
// constraint violation: every one but unique_violation (23505,
// ErrAlreadyExists) is ErrConstraintViolation — foreign key (23503),
// CHECK (23514), NOT NULL (23502), exclusion (23P01), restrict (23001).
func pgConstraintKind(code string) error {
	if strings.HasPrefix(code, "23") && code != "23505" {
		return ErrConstraintViolation
	}
	return nil
}

// Classify returns err wrapped in a *DatabaseError when it carries a database
// condition gormlock recognises (unique violation, lock not available,
// deadlock, serialization failure, SQLITE_BUSY/SQLITE_LOCKED, and PostgreSQL's
// data exceptions, SQLSTATE class 22, as ErrInvalidArgument); otherwise it
// returns err unchanged. A nil err gives nil. The driver error stays reachable
// with errors.As. Classification uses SQLSTATEs, SQLite result codes and
// MySQL/MariaDB error numbers, never message text. GORM's translated errors
// (gorm.Config{TranslateError: true}) are recognised too:
// gorm.ErrDuplicatedKey is ErrAlreadyExists, gorm.ErrForeignKeyViolated and
// gorm.ErrCheckConstraintViolated are ErrConstraintViolation.
//
// SQLite errors are recognised from github.com/mattn/go-sqlite3 (cgo) and
// from the pure-Go drivers (modernc.org/sqlite, and its fork
// github.com/glebarez/go-sqlite behind github.com/glebarez/sqlite) without
// importing any driver, so gormlock builds without cgo.
//
// MySQL and MariaDB errors are recognised from github.com/go-sql-driver/mysql
// (*mysql.MySQLError, the driver of gorm.io/driver/mysql), by error number,
// again without importing the driver; the Code of such an error is its
// number ("1213"):
//
//	1062, 1586    ErrAlreadyExists    duplicate key
//	1205          ErrLocked           lock wait timeout; MariaDB's NOWAIT and WAIT n
//	3572          ErrLocked           MySQL 8's NOWAIT
//	1213          ErrDeadlock         deadlock; Galera's certification failure and
//	                                  brute-force abort: retry the whole transaction
//	1020          ErrSerialization    MariaDB's innodb_snapshot_isolation conflict
//	1969, 3024    ErrLockTimeout      the statement's own time limit (max_statement_time,
//	                                  MAX_EXECUTION_TIME) ran out: killed, not applied
//	1235          ErrNotSupported     the server does not support it
//	1406, 1366    ErrInvalidArgument  value too long for its column, incorrect value
//	                                  (invalid UTF-8); so is every SQLSTATE of class 22
//	1054, 1052,   ErrInvalidArgument  unknown or ambiguous column, SQL syntax error,
//	1064, 1149,                       unknown function: a caller's condition that
//	1305, 1630                        is not valid SQL
//	1451, 1452,   ErrConstraintViolation  foreign key (a missing parent, a parent
//	1216, 1217                        still referenced)
//	4025, 3819    ErrConstraintViolation  CHECK (MariaDB, MySQL)
//	1048, 1364    ErrConstraintViolation  NOT NULL: a NULL value, or none given for
//	                                  a column without a default
//
// PostgreSQL's integrity violations (SQLSTATE class 23: 23503 foreign key,
// 23514 check, 23502 not null, 23P01 exclusion) other than 23505 are
// ErrConstraintViolation, and so are SQLite's SQLITE_CONSTRAINT_FOREIGNKEY,
// _CHECK, _NOTNULL and _TRIGGER (a RESTRICT foreign key, a trigger's
// RAISE); a syntax error, an unknown or ambiguous column, an
// unknown function and a type mismatch (42601, 42703, 42702, 42883, 42804)
// are ErrInvalidArgument. SQLite reports a statement that is not valid SQL
// only as SQLITE_ERROR, the code of every other kind of failure too; there,
// and only there, the message decides: "no such column", "ambiguous
// column name", "no such function", "wrong number of arguments to
// function", "syntax error", "unrecognized token" and "incomplete input"
// are ErrInvalidArgument. For a violated constraint the
// *DatabaseError carries the constraint's and column's names the database
// gives (see DatabaseError).
//
// What Classify leaves unchanged, because gormlock cannot tell what the
// caller should do about it: a missing table (42P01, MySQL 1146, SQLite
// "no such table"), a missing privilege, a server out of resources, a
// broken connection (which the writes report as ErrCommitUnknown when the
// outcome is unknown), and errors that come from no database (a context's
// error, a hook's or a callback's own error).
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
		if kind := pgConstraintKind(code); kind != nil || code == "23505" {
			if kind == nil {
				kind = ErrAlreadyExists
			}
			constraint, column := pgConstraint(err)
			return &DatabaseError{Kind: kind, Code: code, Err: err, Constraint: constraint, Column: column}
		}
		if strings.HasPrefix(code, "22") {
			// Class 22, data exception: the value itself is unacceptable
			// (a NUL byte in text, a number out of range). Bad input.
			return &DatabaseError{Kind: ErrInvalidArgument, Code: code, Err: err}
		}
		return err
	}
	if my, ok := asMySQLError(err); ok {
		if kind := my.kind(); kind != nil {
			de := &DatabaseError{Kind: kind, Code: my.code(), Err: err}
			if kind == ErrConstraintViolation || kind == ErrAlreadyExists {
				de.Constraint, de.Column = my.constraint()
			}
			return de
		}
		return err
	}
	if ext, ok := sqliteCode(err); ok {
		if name, kind := sqliteKind(ext); kind != nil {
			de := &DatabaseError{Kind: kind, Code: name, Err: err}
			if kind == ErrConstraintViolation || kind == ErrAlreadyExists {
				de.Constraint, de.Column = sqliteConstraintNames(ext, err)
			}
			return de
		}
		if ext == sqliteError && sqliteBadSQL(err) {
			return &DatabaseError{Kind: ErrInvalidArgument, Code: "SQLITE_ERROR", Err: err}
		}
		return err
	}
	if t, ok := gormTranslation(err); ok {
		return &DatabaseError{Kind: t.kind, Code: t.code, Err: err}
	}
	return err
}

// gormTranslations are GORM's translations of a database's error
// (gorm.Config{TranslateError: true}) and their kinds. GORM's dialectors
// translate only the server's reports of a violated constraint, so a
// statement that returned one was refused.
var gormTranslations = []gormTranslated{
	{gorm.ErrDuplicatedKey, ErrAlreadyExists, "gorm.ErrDuplicatedKey"},
	{gorm.ErrForeignKeyViolated, ErrConstraintViolation, "gorm.ErrForeignKeyViolated"},
	{gorm.ErrCheckConstraintViolated, ErrConstraintViolation, "gorm.ErrCheckConstraintViolated"},
}

// gormTranslated is one of GORM's translated errors, its kind and the
// Code a DatabaseError gives it.
type gormTranslated struct {
	err, kind error
	code      string
}

// gormTranslation returns the entry of gormTranslations err matches.
func gormTranslation(err error) (gormTranslated, bool) {
	for _, t := range gormTranslations {
		if errors.Is(err, t.err) {
			return t, true
		}
	}
	return gormTranslated{}, false
}

// IsRetryable reports whether err is a condition after which re-running the
// whole unit of work (a fresh read included) may succeed: stale data, a
// deadlock or a serialization failure. Lock contention (ErrLocked) and an
// unknown outcome (ErrCommitUnknown) are not retryable by this definition.
func IsRetryable(err error) bool {
	if errors.Is(err, ErrCommitUnknown) {
		return false
	}
	return errors.Is(err, ErrStaleData) || errors.Is(err, ErrDeadlock) || errors.Is(err, ErrSerialization)
}

// Code returns the database code carried by err — a SQLSTATE ("23505"), a
// SQLite extended result code ("SQLITE_BUSY", or "SQLITE_1" for one
// without a name here), or a MySQL/MariaDB error number ("1213") — or ""
// when err has none. It is meant for logs and metrics.
func Code(err error) string {
	var de *DatabaseError
	if errors.As(err, &de) {
		return de.Code
	}
	var st sqlStater
	if errors.As(err, &st) {
		return st.SQLState()
	}
	if my, ok := asMySQLError(err); ok {
		return my.code()
	}
	if ext, ok := sqliteCode(err); ok {
		if name, _ := sqliteKind(ext); name != "" {
			return name
		}
		return "SQLITE_" + strconv.Itoa(ext)
	}
	return ""
}

// Invalid returns an error matching ErrInvalidArgument with the given message;
// gormlock's packages use it so every refused argument reads the same way.
func Invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidArgument}, args...)...)
}

// ClassifyCommit classifies the error of a COMMIT. Its outcome is one of
// three:
//
//   - not committed, and the error says why: an error the database itself
//     reported (a SQLSTATE, a SQLite result code or a MySQL/MariaDB error
//     number, except the ones below), pgx's ErrTxCommitRollback (the server
//     answered COMMIT with ROLLBACK because a statement had failed; known
//     when the database was opened with package opendb/postgres, reported
//     as unknown otherwise),
//     sql.ErrTxDone and sql.ErrConnDone. These are classified like any
//     other error. A Galera cluster's certification failure at COMMIT
//     (1213) is one: the transaction was rolled back.
//   - unknown: the COMMIT may have been sent, but the answer never came —
//     the connection broke (io.ErrUnexpectedEOF, go-sql-driver/mysql's
//     ErrInvalidConn), the context ended while waiting, the server
//     reported losing the connection or shutting down (SQLSTATE classes 08,
//     57P01/57P02, 58, XX; MySQL/MariaDB 1053, 1927, class 08) or failing
//     during the commit (1180), or the COMMIT was killed (1317, 1969, 3024:
//     the kill may land after the commit was made). The result matches
//     ErrCommitUnknown as well as the cause (so a context error is still
//     matched with errors.Is), and must not be retried blindly. A driver's
//     own "not sent" mark (driver.ErrBadConn, pgconn's SafeToRetry) is not
//     trusted here: pgx sends COMMIT with the simple protocol and reports a
//     connection cut after sending it as safe to retry.
//
// A nil err gives nil.
func ClassifyCommit(err error) error {
	switch {
	case err == nil:
		return nil
	case reported(err, true):
		return Classify(err)
	}
	return Unknown(err)
}

// ClassifyWrite classifies the error of a write statement with parameters
// sent outside a transaction, which commits by itself. It is ClassifyCommit,
// except that an error raised before the statement was sent
// (driver.ErrBadConn, pgconn's SafeToRetry: see NotSent) is definite too:
// the statement did not run; and so is a MySQL/MariaDB statement killed
// while it ran (1317, 1969, 3024): the server checks for the kill before it
// commits the statement, and rolls it back.
func ClassifyWrite(err error) error {
	switch {
	case err == nil:
		return nil
	case reported(err, false), NotSent(err):
		return Classify(err)
	}
	return Unknown(err)
}

// reported reports whether err, returned by a statement that commits (a
// COMMIT when commit is set), says for certain that the statement did not
// take effect because the database reported an error or the transaction
// was already over.
func reported(err error, commit bool) bool {
	if errors.Is(err, ErrCommitUnknown) {
		return false
	}
	var st sqlStater
	if errors.As(err, &st) {
		return !uncertainSQLState(st.SQLState())
	}
	if my, ok := asMySQLError(err); ok {
		return !my.uncertain(commit)
	}
	if _, ok := sqliteCode(err); ok {
		// SQLite runs in the process: a statement that returned an error
		// (an interrupted one included) was rolled back.
		return true
	}
	if errors.Is(err, sql.ErrTxDone) || errors.Is(err, sql.ErrConnDone) || notcommitted.Is(err) {
		return true
	}
	if _, ok := gormTranslation(err); ok {
		return true
	}
	var de *DatabaseError
	return errors.As(err, &de)
}

// NotSent reports whether err was raised before a statement with
// parameters reached the database, so the statement certainly did not run:
// driver.ErrBadConn (database/sql's contract: a driver returns it only when
// the server cannot have performed the operation; go-sql-driver/mysql
// returns it only when not a byte of the command was written), sql.ErrConnDone, and
// errors that say so themselves (pgconn's SafeToRetry, reliable for pgx's
// extended protocol, which every statement with parameters uses).
func NotSent(err error) bool {
	var safe interface{ SafeToRetry() bool }
	if errors.As(err, &safe) && safe.SafeToRetry() {
		return true
	}
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone)
}

// uncertainSQLState reports the SQLSTATEs a server may send although the
// statement's transaction committed: a lost connection (class 08), the
// session terminated by an administrator or a crash (57P01, 57P02, e.g.
// pg_terminate_backend during a synchronous-replication wait, after the
// local commit), and system or internal errors (classes 58, XX).
func uncertainSQLState(code string) bool {
	switch {
	case strings.HasPrefix(code, "08"), strings.HasPrefix(code, "58"), strings.HasPrefix(code, "XX"):
		return true
	}
	return code == "57P01" || code == "57P02"
}

// Unknown returns cause marked as an unknown outcome: an error matching
// ErrCommitUnknown and cause. Use it for a write whose statement was sent
// when the caller stopped waiting for its answer.
func Unknown(cause error) error {
	if errors.Is(cause, ErrCommitUnknown) {
		return cause
	}
	return fmt.Errorf("%w: %w", ErrCommitUnknown, cause)
}

// IsContextError reports whether err is (or wraps) the error of a context
// that ended: context.Canceled or context.DeadlineExceeded.
func IsContextError(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// pgConstraint returns the constraint and column a PostgreSQL error names:
// the ConstraintName and ColumnName fields of pgx's *pgconn.PgError (v5,
// and github.com/jackc/pgconn of pgx v4), or Constraint and Column of
// lib/pq's *pq.Error, read by name so that no driver is imported.
func pgConstraint(err error) (constraint, column string) {
	for _, e := range chain(err) {
		if _, ok := e.(sqlStater); !ok {
			continue
		}
		v := reflect.ValueOf(e)
		if v.Kind() == reflect.Pointer {
			if v.IsNil() {
				continue
			}
			v = v.Elem()
		}
		if v.Kind() != reflect.Struct {
			continue
		}
		str := func(names ...string) string {
			for _, n := range names {
				if f := v.FieldByName(n); f.IsValid() && f.Kind() == reflect.String {
					return f.String()
				}
			}
			return ""
		}
		return str("ConstraintName", "Constraint"), str("ColumnName", "Column")
	}
	return "", ""
}
