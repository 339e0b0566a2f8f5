package locking

import (
	"reflect"
	"strconv"
	"strings"
)

// MySQL and MariaDB error numbers gormlock understands
// (https://mariadb.com/kb/en/mariadb-error-code-reference/,
// https://dev.mysql.com/doc/mysql-errors/8.0/en/server-error-reference.html).
const (
	mysqlDupEntry            = 1062 // ER_DUP_ENTRY: a unique or primary key taken
	mysqlDupEntryWithKeyName = 1586 // ER_DUP_ENTRY_WITH_KEY_NAME: the same, naming the key
	mysqlLockWaitTimeout     = 1205 // ER_LOCK_WAIT_TIMEOUT; also MariaDB's NOWAIT and WAIT n
	mysqlLockNowait          = 3572 // ER_LOCK_NOWAIT: MySQL 8's NOWAIT
	mysqlDeadlock            = 1213 // ER_LOCK_DEADLOCK; on Galera also a certification failure
	mysqlCheckRead           = 1020 // ER_CHECKREAD: MariaDB's innodb_snapshot_isolation conflict
	mysqlStatementTimeout    = 1969 // ER_STATEMENT_TIMEOUT: MariaDB's max_statement_time
	mysqlQueryTimeout        = 3024 // ER_QUERY_TIMEOUT: MySQL 8's max_execution_time
	mysqlNotSupportedYet     = 1235 // ER_NOT_SUPPORTED_YET
	mysqlDataTooLong         = 1406 // ER_DATA_TOO_LONG (22001)
	mysqlTruncatedWrongValue = 1366 // ER_TRUNCATED_WRONG_VALUE_FOR_FIELD: incorrect value, invalid UTF-8
	mysqlServerShutdown      = 1053 // ER_SERVER_SHUTDOWN (08S01)
	mysqlErrorDuringCommit   = 1180 // ER_ERROR_DURING_COMMIT
	mysqlQueryInterrupted    = 1317 // ER_QUERY_INTERRUPTED: KILL QUERY
	mysqlConnectionKilled    = 1927 // ER_CONNECTION_KILLED: MariaDB's KILL CONNECTION
	mysqlTooManyConnections  = 1040 // ER_CON_COUNT_ERROR (08004), answered to a connection attempt
	mysqlHandshakeError      = 1043 // ER_HANDSHAKE_ERROR (08S01), answered to a connection attempt
	mysqlBadNull             = 1048 // ER_BAD_NULL_ERROR: NULL for a NOT NULL column
	mysqlNoDefaultForField   = 1364 // ER_NO_DEFAULT_FOR_FIELD: no value for a NOT NULL column without default
	mysqlNoReferencedRow     = 1216 // ER_NO_REFERENCED_ROW: foreign key, parent missing (old form)
	mysqlRowIsReferenced     = 1217 // ER_ROW_IS_REFERENCED: foreign key, parent referenced (old form)
	mysqlRowIsReferenced2    = 1451 // ER_ROW_IS_REFERENCED_2: delete or update of a referenced parent
	mysqlNoReferencedRow2    = 1452 // ER_NO_REFERENCED_ROW_2: a child whose parent does not exist
	mysqlConstraintFailed    = 4025 // ER_CONSTRAINT_FAILED: MariaDB's CHECK
	mysqlCheckViolated       = 3819 // ER_CHECK_CONSTRAINT_VIOLATED: MySQL 8's CHECK
	mysqlBadField            = 1054 // ER_BAD_FIELD_ERROR: unknown column
	mysqlNonUniq             = 1052 // ER_NON_UNIQ_ERROR: ambiguous column
	mysqlParseError          = 1064 // ER_PARSE_ERROR: SQL syntax error
	mysqlSyntaxError         = 1149 // ER_SYNTAX_ERROR
	mysqlSPDoesNotExist      = 1305 // ER_SP_DOES_NOT_EXIST: a function (or procedure) that does not exist
	mysqlFuncInexistent      = 1630 // ER_FUNC_INEXISTENT_NAME_COLLISION: the same, for "name (" with a space
)

// mysqlKinds maps the MySQL/MariaDB error numbers gormlock classifies to
// its sentinels.
var mysqlKinds = map[uint16]error{
	// Integrity constraints other than unique keys, as PostgreSQL's class
	// 23: the statement was refused, nothing of it applied.
	mysqlBadNull:           ErrConstraintViolation,
	mysqlNoDefaultForField: ErrConstraintViolation,
	mysqlNoReferencedRow:   ErrConstraintViolation,
	mysqlRowIsReferenced:   ErrConstraintViolation,
	mysqlRowIsReferenced2:  ErrConstraintViolation,
	mysqlNoReferencedRow2:  ErrConstraintViolation,
	mysqlConstraintFailed:  ErrConstraintViolation,
	mysqlCheckViolated:     ErrConstraintViolation,
	// A caller's condition that is not valid SQL for the table. 1052
	// comes with SQLSTATE 23000, as integrity violations do, so numbers
	// decide, not the SQLSTATE.
	mysqlBadField:            ErrInvalidArgument,
	mysqlNonUniq:             ErrInvalidArgument,
	mysqlParseError:          ErrInvalidArgument,
	mysqlSyntaxError:         ErrInvalidArgument,
	mysqlSPDoesNotExist:      ErrInvalidArgument,
	mysqlFuncInexistent:      ErrInvalidArgument,
	mysqlDupEntry:            ErrAlreadyExists,
	mysqlDupEntryWithKeyName: ErrAlreadyExists,
	// A lock not granted: the wait ran out (innodb_lock_wait_timeout, WAIT
	// n) or was refused (NOWAIT). Only the statement is rolled back; the
	// transaction stays open. Like 55P03.
	mysqlLockWaitTimeout: ErrLocked,
	mysqlLockNowait:      ErrLocked,
	// The whole transaction was rolled back; re-running it may succeed.
	// Galera reports a write set that lost certification, or a
	// transaction aborted by a replicated one, the same way.
	mysqlDeadlock: ErrDeadlock,
	// MariaDB with innodb_snapshot_isolation=ON (the default from 11.6): a
	// REPEATABLE READ transaction tried to lock a row changed since its
	// read view was taken. Only a new transaction can succeed, as with
	// 40001.
	mysqlCheckRead: ErrSerialization,
	// The statement ran past its own time limit (SET STATEMENT
	// max_statement_time=... FOR ..., the MAX_EXECUTION_TIME hint) and was
	// killed on the server, before its statement or autocommit transaction
	// committed: not applied. gormlock bounds a write's lock waits this way
	// from its context's deadline.
	mysqlStatementTimeout: ErrLockTimeout,
	mysqlQueryTimeout:     ErrLockTimeout,
	// The server lacks the feature (a Galera cluster refusing CREATE
	// SEQUENCE with a cache, a syntax of a later version).
	mysqlNotSupportedYet: ErrNotSupported,
	// The value itself is unacceptable: too long for its column, invalid
	// UTF-8, not a number. Bad input, like PostgreSQL's class 22; the
	// other data exceptions come with a class 22 SQLSTATE (1264 out of
	// range 22003, 1292 incorrect datetime 22007, 1690 BIGINT overflow
	// 22003, 1365 division by zero 22012) and are classified by it.
	mysqlDataTooLong:         ErrInvalidArgument,
	mysqlTruncatedWrongValue: ErrInvalidArgument,
}

// mysqlError is what gormlock reads of a MySQL or MariaDB server error.
type mysqlError struct {
	number   uint16
	sqlState string // "" when the server sent none
	message  string
}

// constraint returns the constraint and the column a constraint error's
// message names (the server gives them nowhere else): "CONSTRAINT `fk`"
// of a foreign key (1451, 1452) or MariaDB's CHECK (4025), "Check
// constraint 'c'" of MySQL's (3819), "for key 'k'" (MySQL 8:
// 'table.k') of a duplicate (1062), "Column 'c'" of 1048 and "Field 'c'"
// of 1364. The messages are English whatever lc_messages says, as the
// server sends the parts that are names verbatim; a message of another
// form gives "".
func (e mysqlError) constraint() (constraint, column string) {
	switch e.number {
	case mysqlRowIsReferenced2, mysqlNoReferencedRow2, mysqlConstraintFailed:
		return between(e.message, "CONSTRAINT `", "`"), ""
	case mysqlCheckViolated:
		return between(e.message, "onstraint '", "'"), ""
	case mysqlDupEntry, mysqlDupEntryWithKeyName:
		return between(e.message, "for key '", "'"), ""
	case mysqlBadNull:
		return "", between(e.message, "Column '", "'")
	case mysqlNoDefaultForField:
		return "", between(e.message, "Field '", "'")
	}
	return "", ""
}

// between returns the text of s after the first open up to the next
// close, or "".
func between(s, open, close string) string {
	_, rest, ok := strings.Cut(s, open)
	if !ok {
		return ""
	}
	name, _, ok := strings.Cut(rest, close)
	if !ok {
		return ""
	}
	return name
}

// kind returns the sentinel of a MySQL/MariaDB error, nil for an
// error gormlock does not classify.
func (e mysqlError) kind() error {
	if kind, ok := mysqlKinds[e.number]; ok {
		return kind
	}
	if len(e.sqlState) == 5 && e.sqlState[:2] == "22" {
		return ErrInvalidArgument
	}
	return nil
}

// code returns the error number as text, gormlock's code for it.
func (e mysqlError) code() string { return strconv.Itoa(int(e.number)) }

// uncertain reports whether the server may have sent the error although
// the transaction of the statement committed: the server shutting down or
// a thread or connection being killed (SQLSTATE class 08, 1927, 1053), and
// a storage engine's or the binary log's failure during commit (1180).
// At a COMMIT, an interrupted statement (1317, KILL QUERY) and a statement
// timeout (1969, 3024) are uncertain too: the kill may land while the
// commit is being made. A statement outside a transaction that gets one of
// those was rolled back (the server checks for a kill before it commits a
// statement), so they are definite for it.
//
// 1040 and 1043, class 08 too, only answer a connection attempt: nothing
// was sent on that connection.
func (e mysqlError) uncertain(commit bool) bool {
	switch e.number {
	case mysqlTooManyConnections, mysqlHandshakeError:
		return false
	case mysqlServerShutdown, mysqlErrorDuringCommit, mysqlConnectionKilled:
		return true
	case mysqlQueryInterrupted, mysqlStatementTimeout, mysqlQueryTimeout:
		return commit
	}
	return len(e.sqlState) == 5 && e.sqlState[:2] == "08"
}

// asMySQLError returns the MySQL or MariaDB server error err carries, from
// github.com/go-sql-driver/mysql (the driver of gorm.io/driver/mysql): its
// *MySQLError has the fields Number uint16 and SQLState [5]byte and no
// method to read them through. The driver is recognised by its package
// path rather than imported, as the SQLite drivers are (sqliteCode), so
// that a program using package locking links no MySQL driver unless it
// uses one, and a fork vendored under that path is recognised as well.
func asMySQLError(err error) (mysqlError, bool) {
	for _, e := range chain(err) {
		v := reflect.ValueOf(e)
		if v.Kind() != reflect.Pointer || v.IsNil() {
			continue
		}
		v = v.Elem()
		t := v.Type()
		if t.PkgPath() != "github.com/go-sql-driver/mysql" || t.Name() != "MySQLError" || t.Kind() != reflect.Struct {
			continue
		}
		num := v.FieldByName("Number")
		if !num.IsValid() || !num.CanUint() || num.Uint() > 0xffff {
			continue
		}
		out := mysqlError{number: uint16(num.Uint())}
		if st := v.FieldByName("SQLState"); st.IsValid() && st.Kind() == reflect.Array &&
			st.Len() == 5 && st.Type().Elem().Kind() == reflect.Uint8 {
			b := make([]byte, 5)
			for i := range b {
				b[i] = byte(st.Index(i).Uint())
			}
			if b[0] != 0 {
				out.sqlState = string(b)
			}
		}
		if m := v.FieldByName("Message"); m.IsValid() && m.Kind() == reflect.String {
			out.message = m.String()
		}
		return out, true
	}
	return mysqlError{}, false
}
