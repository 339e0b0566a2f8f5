package locking

import (
	"errors"
	"reflect"
	"strings"
)

// SQLite result codes gormlock understands (https://sqlite.org/rescode.html).
// An extended code is the primary code in its low byte.
const (
	sqliteError                = 1
	sqliteBusy                 = 5
	sqliteLocked               = 6
	sqliteConstraint           = 19
	sqliteBusyRecovery         = sqliteBusy | 1<<8
	sqliteBusySnapshot         = sqliteBusy | 2<<8
	sqliteLockedSharedCache    = sqliteLocked | 1<<8
	sqliteConstraintPrimaryKey = sqliteConstraint | 6<<8
	sqliteConstraintUnique     = sqliteConstraint | 8<<8
	sqliteConstraintCheck      = sqliteConstraint | 1<<8
	sqliteConstraintForeignKey = sqliteConstraint | 3<<8
	sqliteConstraintNotNull    = sqliteConstraint | 5<<8
	sqliteConstraintTrigger    = sqliteConstraint | 7<<8
)

// sqliteKind maps a SQLite extended result code to gormlock's sentinel and
// the code's name; "" and nil for a code gormlock does not classify.
func sqliteKind(ext int) (string, error) {
	switch ext {
	case sqliteConstraintPrimaryKey:
		return "SQLITE_CONSTRAINT_PRIMARYKEY", ErrAlreadyExists
	case sqliteConstraintUnique:
		return "SQLITE_CONSTRAINT_UNIQUE", ErrAlreadyExists
	case sqliteConstraintForeignKey:
		// Only with PRAGMA foreign_keys=ON, which opendb/sqlite sets.
		return "SQLITE_CONSTRAINT_FOREIGNKEY", ErrConstraintViolation
	case sqliteConstraintCheck:
		return "SQLITE_CONSTRAINT_CHECK", ErrConstraintViolation
	case sqliteConstraintNotNull:
		return "SQLITE_CONSTRAINT_NOTNULL", ErrConstraintViolation
	case sqliteConstraintTrigger:
		// A trigger's RAISE(ABORT, ...), and a foreign key's ON DELETE
		// (or ON UPDATE) RESTRICT, which SQLite enforces with a trigger.
		return "SQLITE_CONSTRAINT_TRIGGER", ErrConstraintViolation
	case sqliteBusySnapshot:
		// A deferred transaction whose read snapshot went stale before it
		// wrote: only re-running the whole transaction can succeed, as
		// with 40001.
		return "SQLITE_BUSY_SNAPSHOT", ErrSerialization
	case sqliteBusyRecovery:
		return "SQLITE_BUSY_RECOVERY", ErrLocked
	case sqliteLockedSharedCache:
		return "SQLITE_LOCKED_SHAREDCACHE", ErrLocked
	}
	switch ext & 0xff {
	case sqliteBusy:
		return "SQLITE_BUSY", ErrLocked
	case sqliteLocked:
		return "SQLITE_LOCKED", ErrLocked
	}
	return "", nil
}

// IsSQLiteBusy reports whether err is SQLite's "database is locked"
// (SQLITE_BUSY, any extended code but BUSY_SNAPSHOT, which only a new
// transaction can get past): the write lock was not available, and the
// statement did nothing.
func IsSQLiteBusy(err error) bool {
	ext, ok := sqliteCode(err)
	return ok && ext&0xff == sqliteBusy && ext != sqliteBusySnapshot
}

// sqliteCode returns the SQLite extended result code err carries, from
// either SQLite driver GORM users pick: github.com/mattn/go-sqlite3 (cgo;
// its Error is a struct with an ExtendedCode field) or a pure-Go one:
// modernc.org/sqlite, or github.com/glebarez/go-sqlite, the fork of it that
// github.com/glebarez/sqlite (GORM's pure-Go dialector) uses; their *Error
// has a Code method returning the extended code. The drivers are
// recognised by their package path rather than imported, so gormlock
// builds without cgo.
func sqliteCode(err error) (int, bool) {
	code, e := sqliteFind(err)
	return code, e != nil
}

// sqliteMessage returns the message of the SQLite driver error err
// carries, without what wraps it.
func sqliteMessage(err error) string {
	if _, e := sqliteFind(err); e != nil {
		return e.Error()
	}
	return ""
}

// sqliteFind returns the SQLite extended result code of the first SQLite
// driver error in err's chain (see sqliteCode), and that error; nil when
// there is none.
func sqliteFind(err error) (int, error) {
	for _, e := range chain(err) {
		v := reflect.ValueOf(e)
		t := v.Type()
		if t.Kind() == reflect.Pointer {
			if v.IsNil() {
				continue
			}
			t, v = t.Elem(), v.Elem()
		}
		switch pkg := t.PkgPath(); {
		case pkg == "github.com/mattn/go-sqlite3" && t.Name() == "Error" && t.Kind() == reflect.Struct:
			if f := v.FieldByName("ExtendedCode"); f.IsValid() && f.CanInt() {
				ext := int(f.Int())
				if ext == 0 {
					if c := v.FieldByName("Code"); c.IsValid() && c.CanInt() {
						ext = int(c.Int())
					}
				}
				return ext, e
			}
		case strings.HasPrefix(pkg, "modernc.org/sqlite"), pkg == "github.com/glebarez/go-sqlite":
			if c, ok := e.(interface{ Code() int }); ok {
				return c.Code(), e
			}
		}
	}
	return 0, nil
}

// chain lists err and every error it wraps, depth first, as errors.As
// visits them.
func chain(err error) []error {
	var out []error
	var walk func(error)
	walk = func(e error) {
		for e != nil {
			out = append(out, e)
			switch u := e.(type) {
			case interface{ Unwrap() []error }:
				for _, inner := range u.Unwrap() {
					walk(inner)
				}
				return
			default:
				e = errors.Unwrap(e)
			}
		}
	}
	walk(err)
	return out
}

// sqliteConstraintNames returns the constraint and column SQLite's message for
// a constraint error names: "CHECK constraint failed: name" (the
// constraint's name, or its expression when it has none), "NOT NULL
// constraint failed: table.column", "UNIQUE constraint failed:
// table.column, ..." (the columns, as Constraint). A foreign key's message
// names nothing.
func sqliteConstraintNames(ext int, err error) (constraint, column string) {
	msg := sqliteMessage(err)
	_, detail, ok := strings.Cut(msg, " constraint failed: ")
	if !ok {
		return "", ""
	}
	// modernc.org/sqlite ends its message with the code: " (1299)".
	if i := strings.LastIndex(detail, " ("); i > 0 && strings.HasSuffix(detail, ")") {
		detail = detail[:i]
	}
	if ext == sqliteConstraintNotNull {
		return "", detail
	}
	return detail, ""
}

// sqliteBadSQLMarks are the messages of SQLITE_ERROR (which SQLite
// returns for many kinds of failure, with no extended code to tell them
// apart) that mean the statement is not valid SQL for the schema.
var sqliteBadSQLMarks = []string{
	"no such column",
	"ambiguous column name",
	"no such function",
	"wrong number of arguments to function",
	"syntax error",
	"unrecognized token",
	"incomplete input",
}

// sqliteBadSQL reports whether err, of code SQLITE_ERROR, says that the
// statement is not valid SQL: the one place gormlock reads a message to
// classify, because SQLite gives no code for it.
func sqliteBadSQL(err error) bool {
	msg := sqliteMessage(err)
	for _, m := range sqliteBadSQLMarks {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}
