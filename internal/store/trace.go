package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gormlock/gormlock/locking"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/logger"
)

// PluginName is the name gormlock's own GORM plugin (repository.Plugin)
// registers under.
const PluginName = "gormlock"

// UsesCallbacks is repository.WithCallbacks' default: on when db has
// plugins other than gormlock's own. gormlock's plugin watches GORM's
// create, update and delete callbacks only, never the Raw and Row ones
// gormlock's statements would go through, and its observer plugin
// registers no callback at all, so registering them leaves gormlock's
// writes on the direct path.
func UsesCallbacks(db *gorm.DB) bool {
	for name := range db.Config.Plugins {
		if name != PluginName && name != ObserverPluginName {
			return true
		}
	}
	return false
}

// ScanSQL sends query, which returns at most one row, on pool and scans
// that row into dest; no row gives sql.ErrNoRows. Outside a transaction a
// statement PostgreSQL refused before running it is sent again (see
// sendAgain).
func (s Store) ScanSQL(ctx context.Context, pool gorm.ConnPool, query string, args []any, dest ...any) error {
	err := s.scanSQL(ctx, pool, query, args, dest...)
	for try := 1; sendAgain(pool, err, try); try++ {
		err = s.scanSQL(ctx, pool, query, args, dest...)
	}
	return err
}

// sendAgain reports whether a statement sent on pool for the try-th time,
// which failed with err, is to be sent again: PostgreSQL refused a
// statement pgx had prepared on the connection before running it (see
// preparedStatementRefused), outside a transaction, where it did nothing;
// pgx dropped it from the connection's cache and prepares it again. At
// most maxNotSentRetries tries.
func sendAgain(pool gorm.ConnPool, err error, try int) bool {
	if err == nil || try >= maxNotSentRetries || !preparedStatementRefused(err) {
		return false
	}
	_, outside := pool.(*sql.DB)
	return outside
}

func (s Store) scanSQL(ctx context.Context, pool gorm.ConnPool, query string, args []any, dest ...any) error {
	sending(args)
	if s.Callbacks {
		tx := s.viaCallbacks(ctx, pool, query, args)
		tx.Callback().Row().Execute(tx)
		if tx.Error != nil {
			return tx.Error
		}
		row, ok := tx.Statement.Dest.(*sql.Row)
		if !ok {
			return errors.New("gormlock: GORM's Row callback returned no row; a callback replaced gorm:row")
		}
		err := row.Scan(dest...)
		NoteRolledBack(ctx, s, err)
		return err
	}
	begin := time.Now()
	err := s.translate(pool.QueryRowContext(ctx, query, args...).Scan(dest...))
	NoteRolledBack(ctx, s, err)
	rows := int64(1)
	traceErr := err
	if errors.Is(err, sql.ErrNoRows) {
		rows, traceErr = 0, nil
	}
	s.trace(ctx, begin, query, args, rows, traceErr)
	return err
}

// ExecSQL sends query, a statement without result rows, on pool and
// returns the rows it affected.
func (s Store) ExecSQL(ctx context.Context, pool gorm.ConnPool, query string, args []any) (int64, error) {
	n, _, err := s.ExecSQLID(ctx, pool, query, args, false)
	return n, err
}

// ExecSQLID is ExecSQL that also returns, when withID is true, the
// LAST_INSERT_ID the statement set (MySQL's answer carries it).
func (s Store) ExecSQLID(ctx context.Context, pool gorm.ConnPool, query string, args []any, withID bool) (n, id int64, err error) {
	sending(args)
	if s.Callbacks {
		tx := s.viaCallbacks(ctx, pool, query, args)
		res := gorm.WithResult()
		tx.Statement.Result = res
		tx.Callback().Raw().Execute(tx)
		if tx.Error != nil {
			NoteRolledBack(ctx, s, tx.Error)
			return 0, 0, tx.Error
		}
		if withID && res.Result != nil {
			if id, err = res.Result.LastInsertId(); err != nil {
				return 0, 0, err
			}
			if id, err = s.insertIDAfterTrigger(ctx, pool, tx.RowsAffected, id); err != nil {
				return 0, 0, err
			}
		}
		return tx.RowsAffected, id, nil
	}
	begin := time.Now()
	r, err := pool.ExecContext(ctx, query, args...)
	err = s.translate(err)
	if err == nil {
		n, err = r.RowsAffected()
		if err == nil && withID {
			id, err = r.LastInsertId()
		}
	}
	s.trace(ctx, begin, query, args, n, err)
	if err == nil && withID {
		id, err = s.insertIDAfterTrigger(ctx, pool, n, id)
	}
	NoteRolledBack(ctx, s, err)
	return n, id, err
}

// insertIDAfterTrigger returns the LAST_INSERT_ID a statement that changed
// n rows set, given the id its answer carried. MariaDB and MySQL answer 0
// for an UPDATE that set LAST_INSERT_ID(expr) when the table has an UPDATE
// trigger (any trigger: one that only assigns NEW columns, or one that
// inserts into an audit table), although the session's LAST_INSERT_ID()
// holds the value the statement set. gormlock's statements never set it to
// 0 (a version or an expiry), so 0 after a change means "ask the session".
// pool is one connection (a transaction or a pinned connection), so the
// question reaches the session that ran the statement.
func (s Store) insertIDAfterTrigger(ctx context.Context, pool gorm.ConnPool, n, id int64) (int64, error) {
	if n == 0 || id != 0 {
		return id, nil
	}
	if _, shared := pool.(*sql.DB); shared {
		return 0, errors.New("gormlock: the statement's answer carried no LAST_INSERT_ID and it ran on a pool, not one connection, so it cannot be asked for")
	}
	begin := time.Now()
	const q = "SELECT LAST_INSERT_ID()"
	err := pool.QueryRowContext(ctx, q).Scan(&id)
	err = s.translate(err)
	s.trace(ctx, begin, q, nil, -1, err)
	if err != nil {
		err = fmt.Errorf("gormlock: reading LAST_INSERT_ID() after a statement whose answer carried none: %w", err)
		if _, inTx := s.Pool(ctx); inTx {
			return 0, err // the caller's transaction rolls back
		}
		// Outside a transaction the statement committed by itself.
		return 0, locking.Unknown(err)
	}
	return id, nil
}

// QuerySQL sends query on pool and returns its rows. Outside a
// transaction a statement PostgreSQL refused before running it is sent
// again (see sendAgain).
func (s Store) QuerySQL(ctx context.Context, pool gorm.ConnPool, query string, args []any) (*sql.Rows, error) {
	rows, err := s.querySQL(ctx, pool, query, args)
	for try := 1; sendAgain(pool, err, try); try++ {
		rows, err = s.querySQL(ctx, pool, query, args)
	}
	return rows, err
}

func (s Store) querySQL(ctx context.Context, pool gorm.ConnPool, query string, args []any) (*sql.Rows, error) {
	sending(args)
	if s.Callbacks {
		tx := s.viaCallbacks(ctx, pool, query, args)
		tx.Statement.Settings.Store("rows", true)
		tx.Callback().Row().Execute(tx)
		if tx.Error != nil {
			NoteRolledBack(ctx, s, tx.Error)
			return nil, tx.Error
		}
		rows, ok := tx.Statement.Dest.(*sql.Rows)
		if !ok {
			return nil, errors.New("gormlock: GORM's Row callback returned no rows; a callback replaced gorm:row")
		}
		return rows, nil
	}
	begin := time.Now()
	rows, err := pool.QueryContext(ctx, query, args...)
	err = s.translate(err)
	s.trace(ctx, begin, query, args, -1, err)
	NoteRolledBack(ctx, s, err)
	return rows, err
}

// viaCallbacks returns a GORM session that runs query with args on pool
// through a callback processor: GORM's processor sends Statement.SQL as it
// is, then the plugins' callbacks and the logger see it. It is marked
// onPrimary, so that dbresolver keeps it on the primary.
func (s Store) viaCallbacks(ctx context.Context, pool gorm.ConnPool, query string, args []any) *gorm.DB {
	tx := s.Gorm.Session(&gorm.Session{NewDB: true, Context: ctx}).Clauses(onPrimary{})
	tx.Statement.ConnPool = pool
	tx.Statement.SQL.WriteString(query)
	tx.Statement.Vars = args
	return tx
}

// trace shows one statement gormlock sent itself to the GORM logger, as
// GORM's processor does after its own, with the caller appended to the SQL.
// It allocates nothing: the function the logger calls for the SQL is a
// pooled traceCall's (GORM's own processor reuses its statement the same
// way once the logger returns).
func (s Store) trace(ctx context.Context, begin time.Time, query string, args []any, rows int64, err error) {
	log := s.Gorm.Logger
	if cl, ok := log.(callerLogger); ok {
		log = cl.Interface // the note is added here
	}
	if log == nil {
		return
	}
	tc := traceCalls.Get().(*traceCall)
	tc.ctx, tc.log, tc.dialector, tc.query, tc.args, tc.rows = ctx, log, s.Gorm.Dialector, query, args, rows
	log.Trace(ctx, begin, tc.sql, err)
	*tc = traceCall{sql: tc.sql}
	traceCalls.Put(tc)
}

// traceCall is one statement being shown to a logger.
type traceCall struct {
	ctx       context.Context
	log       logger.Interface
	dialector gorm.Dialector
	query     string
	args      []any
	rows      int64
	sql       func() (string, int64) // tc.explain, bound once
}

var traceCalls = sync.Pool{New: func() any {
	tc := &traceCall{}
	tc.sql = tc.explain
	return tc
}}

// explain returns the statement with its arguments in place, and the
// caller, for the logger.
func (tc *traceCall) explain() (string, int64) {
	q, vars := tc.query, loggable(tc.args)
	if f, ok := tc.log.(gorm.ParamsFilter); ok {
		q, vars = f.ParamsFilter(tc.ctx, q, vars...)
	}
	return tc.dialector.Explain(q, vars...) + callerNote(), tc.rows
}

// WithCallerLogger returns db with its logger wrapped in callerLogger (once),
// for the sessions gormlock's statements run on.
func WithCallerLogger(db *gorm.DB) *gorm.DB {
	if db.Logger == nil {
		return db
	}
	if _, ok := db.Logger.(callerLogger); ok {
		return db
	}
	return db.Session(&gorm.Session{Logger: callerLogger{db.Logger}})
}

// LateArg is an argument whose value is computed when the driver converts
// it, once per send (package repository's versions: the clock is read as
// late as possible). Sending readies it for the next send; Sent returns the
// value last sent, which is what the logger shows.
type LateArg interface {
	driver.Valuer
	Sending()
	Sent() any
}

// sending readies the LateArgs among args for a statement about to be
// sent.
func sending(args []any) {
	for _, a := range args {
		if la, ok := a.(LateArg); ok {
			la.Sending()
		}
	}
}

// loggable returns args as they were sent, with the value a LateArg sent in
// its place (computing it again would move it on).
func loggable(args []any) []any {
	for i, a := range args {
		if la, ok := a.(LateArg); ok {
			out := append([]any(nil), args...)
			out[i] = la.Sent()
			return out
		}
	}
	return args
}

// callerLogger is the GORM logger of the statements gormlock sends, and of
// its sessions' GORM calls: the application's, with the caller named in the
// SQL.
type callerLogger struct{ logger.Interface }

// LogMode implements logger.Interface, keeping the wrapper.
func (l callerLogger) LogMode(level logger.LogLevel) logger.Interface {
	return callerLogger{l.Interface.LogMode(level)}
}

// Trace implements logger.Interface.
func (l callerLogger) Trace(ctx context.Context, begin time.Time, fc func() (string, int64), err error) {
	l.Interface.Trace(ctx, begin, func() (string, int64) {
		q, rows := fc()
		return q + callerNote(), rows
	}, err)
}

// ParamsFilter implements gorm.ParamsFilter when the wrapped logger does.
func (l callerLogger) ParamsFilter(ctx context.Context, sql string, params ...any) (string, []any) {
	if f, ok := l.Interface.(gorm.ParamsFilter); ok {
		return f.ParamsFilter(ctx, sql, params...)
	}
	return sql, params
}

// libraryPrefixes are the packages whose frames callerNote passes over: GORM
// and its drivers and plugins, gormlock's own packages, and net/http, which
// calls the HTTP adapter.
var libraryPrefixes = []string{
	"gorm.io/",
	"github.com/gormlock/gormlock/repository.",
	"github.com/gormlock/gormlock/locking.",
	"github.com/gormlock/gormlock/rest.",
	"github.com/gormlock/gormlock/opendb/",
	"github.com/gormlock/gormlock/internal/store.",
	"github.com/gormlock/gormlock/internal/sqlitegate.",
	"github.com/gormlock/gormlock/migrations.",
	"github.com/gormlock/gormlock/models.",
	"net/http.",
	"runtime.",
	"database/sql.",
}

// callerNote returns " /* gormlock: file:line */", the first frame of the
// calling goroutine outside the libraries (a test file counts as the
// caller), or the outermost library frame when there is none (a handler of
// the HTTP adapter).
func callerNote() string {
	pcs := make([]uintptr, 64)
	n := runtime.Callers(2, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	var last runtime.Frame
	for {
		f, more := frames.Next()
		if f.File != "" && (strings.HasSuffix(f.File, "_test.go") || !isLibrary(f.Function)) {
			return note(f)
		}
		if f.File != "" && !strings.HasPrefix(f.Function, "runtime.") {
			last = f
		}
		if !more {
			break
		}
	}
	if last.File == "" {
		return ""
	}
	return note(last)
}

func isLibrary(function string) bool {
	for _, p := range libraryPrefixes {
		if strings.HasPrefix(function, p) {
			return true
		}
	}
	return false
}

func note(f runtime.Frame) string {
	return " /* gormlock: " + f.File + ":" + strconv.Itoa(f.Line) + " */"
}

// primary marks a GORM query to run on the primary database when
// gorm.io/plugin/dbresolver is registered: a read a guarded write depends on
// must not see a replica's older state. Without dbresolver it changes
// nothing.
func Primary(q *gorm.DB) *gorm.DB { return q.Clauses(onPrimary{}) }

// onPrimary is dbresolver's Write operation (dbresolver.Write), written
// here so that gormlock does not import dbresolver, whose module requires a
// MySQL driver that every importer would then download: it sets the
// statement setting dbresolver's callback reads, and runs that callback
// when dbresolver is registered.
type onPrimary struct{}

const (
	resolverWrite    = "gorm:db_resolver:write"
	resolverRead     = "gorm:db_resolver:read"
	resolverCallback = "gorm:db_resolver"
)

// ModifyStatement implements gorm.StatementModifier.
func (onPrimary) ModifyStatement(stmt *gorm.Statement) {
	stmt.Settings.Delete(resolverRead)
	stmt.Settings.Store(resolverWrite, struct{}{})
	if fc := stmt.DB.Callback().Query().Get(resolverCallback); fc != nil {
		fc(stmt.DB)
	}
}

// Build implements clause.Expression; the operation adds no SQL.
func (onPrimary) Build(clause.Builder) {}

// translate returns err with GORM's translation of it (a unique violation
// as gorm.ErrDuplicatedKey, a foreign key one as gorm.ErrForeignKeyViolated,
// ...) when the database was opened with gorm.Config{TranslateError: true},
// as GORM's own statements return it, keeping the driver's error too: the
// result matches both. Statements through GORM's callbacks get GORM's
// translation from GORM.
func (s Store) translate(err error) error {
	if err == nil || !s.Gorm.Config.TranslateError {
		return err
	}
	t, ok := s.Gorm.Dialector.(gorm.ErrorTranslator)
	if !ok {
		return err
	}
	if gormErr := t.Translate(err); gormErr != err && gormErr != nil {
		return &translatedError{err: err, gormErr: gormErr}
	}
	return err
}

// translatedError is a driver error and GORM's translation of it.
type translatedError struct{ err, gormErr error }

func (e *translatedError) Error() string   { return e.err.Error() }
func (e *translatedError) Unwrap() []error { return []error{e.err, e.gormErr} }
