package repository

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/gormlock/gormlock/internal/dialect"
	"github.com/gormlock/gormlock/internal/sqlitegate"
	"github.com/gormlock/gormlock/internal/store"
	"github.com/gormlock/gormlock/locking"
)

// lockTx returns the transaction of ctx, or an error saying that a locked
// read needs one: a lock taken outside a transaction would end with its
// statement, protecting nothing.
func (r *Repository[T]) lockTx(ctx context.Context, method string) (gorm.ConnPool, error) {
	pool, inTx := r.st.Pool(ctx)
	if !inTx {
		return nil, locking.Invalid("%s: %s needs a transaction: a row lock lasts until the transaction ends, so call it inside RunInTx (or use MutateRowLocked, which runs its own)", r.m.table, method)
	}
	return pool, nil
}

// LockRow reads record id and locks it until the transaction in ctx ends:
// SELECT ... FOR UPDATE on PostgreSQL (FOR SHARE with ForShare). On SQLite,
// which has no row locks, it takes the database's write lock instead, which
// keeps every other writer out until the transaction ends; it never reads
// without a lock. (With opendb's BEGIN IMMEDIATE the transaction already
// holds that lock from its start.)
//
// ctx must carry a transaction from RunInTx; without one LockRow returns an
// error matching locking.ErrInvalidArgument. By default it waits for a lock
// another transaction holds; NoWait fails at once with locking.ErrLocked and
// LockTimeout gives up with locking.ErrLockTimeout. On PostgreSQL a failed
// locked read aborts the transaction: return the error from RunInTx's
// function. A missing record gives an error matching locking.ErrNotFound.
//
// Writes of the locked record still go through Update, so its version
// advances and optimistic readers elsewhere see the change.
func (r *Repository[T]) LockRow(ctx context.Context, id any, opts ...LockOption) (*T, error) {
	id, err := r.m.normalizeID(id)
	if err != nil {
		return nil, err
	}
	lc, err := r.lockConfig(opts)
	if err != nil {
		return nil, err
	}
	return r.lockRow(ctx, id, lc)
}

// lockRow is LockRow for a normalized id and checked lock options.
func (r *Repository[T]) lockRow(ctx context.Context, id any, lc lockConfig) (*T, error) {
	pool, err := r.lockTx(ctx, "LockRow")
	if err != nil {
		return nil, err
	}
	var e T
	err = r.lockedRead(ctx, pool, lc, func(q func() *gorm.DB, rowLock bool) error {
		switch {
		case r.m.selectSQL == "":
			return store.Primary(q()).Take(&e, r.m.keyCond(id)).Error
		case rowLock:
			return r.readRow(ctx, pool, r.m.lockedSelect(lc), &e, id)
		}
		return r.readRow(ctx, pool, r.m.selectSQL, &e, id)
	})
	if err != nil {
		return nil, fmt.Errorf("%s: LockRow id=%v: %w", r.m.table, id, r.lockError(lc, err, id))
	}
	return &e, nil
}

// LockRows is LockRow for several records: it locks them all in one
// statement, in primary-key order, and returns them in that order. Because
// every caller takes the locks in the same order, two transactions locking
// the same records — whatever order their ids are given in — never deadlock.
// The result is in key order, not in the order of ids: pick records by key.
// Duplicate ids are locked once. When some ids do not exist, nothing is
// returned and the error matches locking.ErrNotFound and names them; the
// records that exist stay locked until the transaction ends. No ids returns
// an empty slice.
func (r *Repository[T]) LockRows(ctx context.Context, ids []any, opts ...LockOption) ([]T, error) {
	keys := make([]any, 0, len(ids))
	for _, id := range ids {
		k, err := r.m.normalizeID(id)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	sort.SliceStable(keys, func(i, j int) bool { return compareKeys(keys[i], keys[j]) < 0 })
	keys = dedupSorted(keys)
	lc, err := r.lockConfig(opts)
	if err != nil {
		return nil, err
	}
	pool, err := r.lockTx(ctx, "LockRows")
	if err != nil {
		return nil, err
	}
	out := []T{}
	if len(keys) == 0 {
		return out, nil
	}
	err = r.lockedRead(ctx, pool, lc, func(q func() *gorm.DB, _ bool) error {
		return store.Primary(q()).Where(r.m.keysIn(keys)).Clauses(r.m.keyOrder()).Find(&out).Error
	})
	if err != nil {
		return nil, fmt.Errorf("%s: LockRows: %w", r.m.table, r.lockError(lc, err, nil))
	}
	if len(out) < len(keys) {
		found := make(map[string]bool, len(out))
		for i := range out {
			k, _ := r.idOf(ctx, reflect.ValueOf(&out[i]).Elem())
			found[fmt.Sprintf("%#v", k)] = true // keys may be unhashable ([]byte)
		}
		var missing []any
		for _, k := range keys {
			if !found[fmt.Sprintf("%#v", k)] {
				missing = append(missing, k)
			}
		}
		return nil, fmt.Errorf("%s: LockRows: %d of %d ids not found %v: %w", r.m.table, len(missing), len(keys), missing,
			&locking.NotFoundError{Table: r.m.table, ID: missing[0]})
	}
	return out, nil
}

// keysIn is the condition "primary key in keys": pk IN (...), or for a
// composite key (a, b) IN ((?, ?), ...).
func (m *meta) keysIn(keys []any) clause.Expression {
	if !m.composite() {
		return clause.IN{Column: clause.Column{Table: clause.CurrentTable, Name: m.pk.DBName}, Values: keys}
	}
	sql := "(" + strings.Repeat("?, ", len(m.pks)-1) + "?) IN ?"
	vars := make([]any, 0, len(m.pks)+1)
	for _, f := range m.pks {
		vars = append(vars, clause.Column{Table: clause.CurrentTable, Name: f.DBName})
	}
	rows := make([][]any, len(keys))
	for i, k := range keys {
		rows[i] = k.(Key)
	}
	return clause.Expr{SQL: sql, Vars: append(vars, rows)}
}

// keyOrder orders rows by primary key, in the order UpdateMany writes in
// (compareKeys): for text keys that is byte order (PostgreSQL's COLLATE
// "C", MySQL's BINARY), not the column's collation.
func (m *meta) keyOrder() clause.OrderBy {
	var cols []string
	var vars []any
	for _, f := range m.pks {
		col := clause.Column{Table: clause.CurrentTable, Name: f.DBName}
		switch {
		case f.FieldType.Kind() != reflect.String:
			cols = append(cols, "?")
		case m.caps.Name == dialect.Postgres:
			cols = append(cols, `? COLLATE "C"`)
		case m.caps.Dialector() == dialect.MySQL:
			cols = append(cols, "CAST(? AS BINARY)")
		default:
			cols = append(cols, "?")
		}
		vars = append(vars, col)
	}
	return clause.OrderBy{Expression: clause.Expr{SQL: strings.Join(cols, ", "), Vars: vars}}
}

func dedupSorted(keys []any) []any {
	out := keys[:0]
	for i, k := range keys {
		if i == 0 || compareKeys(keys[i-1], k) != 0 {
			out = append(out, k)
		}
	}
	return out
}

// lockedRead runs read, in the transaction pool, with the lock lc asks
// for, the way the database provides it (the dialect's capabilities): read
// gets q, which makes a query on the transaction carrying the locking
// clause (only a read through GORM calls it: a *gorm.DB costs two
// Statement clones), and rowLock true where a statement of its own must lock the row
// itself (FOR UPDATE, see meta.lockedSelect); false where the lock is
// already taken (SQLite's write lock). The Observer is told how long
// taking the lock took (RowLockWait).
func (r *Repository[T]) lockedRead(ctx context.Context, pool gorm.ConnPool, lc lockConfig, read func(q func() *gorm.DB, rowLock bool) error) (err error) {
	// The transaction as a *gorm.DB, made only for a read through GORM.
	gormTx := func() *gorm.DB {
		db, _ := r.st.Conn(ctx)
		return db.WithContext(ctx)
	}
	switch r.m.caps.How(dialect.RowLock) {
	case dialect.Native, dialect.NodeLocal:
		if r.obs != nil {
			begin := time.Now()
			defer func() { r.rowLockWait(ctx, begin, lc, err) }()
		}
		var lock clause.Expression = clause.Locking{Strength: clause.LockingStrengthUpdate}
		switch {
		case lc.shared && r.m.caps.ShareClause != "FOR SHARE":
			lock = lockClause{text: r.m.caps.ShareClause, nowait: lc.nowait}
		case lc.shared:
			lock = clause.Locking{Strength: clause.LockingStrengthShare}
		}
		if l, ok := lock.(clause.Locking); ok && lc.nowait {
			l.Options = clause.LockingOptionsNoWait
			lock = l
		}
		restore, err := r.setLockTimeout(ctx, pool, lc)
		if err != nil {
			return err
		}
		err = read(func() *gorm.DB { return gormTx().Clauses(lock) }, true)
		store.NoteRolledBack(ctx, r.st, err)
		var server interface{ SQLState() string }
		if restore != nil && (r.m.caps.Name != dialect.Postgres || !errors.As(err, &server)) {
			// On PostgreSQL, after an error from the server the
			// transaction is aborted and there is nothing to restore.
			// After no error, "no row", or an error raised in Go (a
			// column that does not scan), and on MySQL after any error
			// (the transaction lives on), it must not keep the short
			// timeout.
			if rerr := restore(); rerr != nil {
				if err != nil {
					return fmt.Errorf("restoring the lock timeout after %v: %w", err, locking.Classify(rerr))
				}
				return fmt.Errorf("restoring the lock timeout: %w", locking.Classify(rerr))
			}
		}
		return err
	case dialect.WriteLock:
		if tx, ok := pool.(*sqlitegate.Tx); ok {
			// RunInTx's and MutateRowLocked's transactions began IMMEDIATE
			// and hold the write lock already; a read-only one never may.
			if tx.ReadOnly() {
				return locking.Invalid("%s: a read-only transaction cannot lock", r.m.table)
			}
		} else {
			begin := r.obsNow()
			err := r.takeWriteLock(ctx, pool, lc)
			r.rowLockWait(ctx, begin, lc, err)
			if err != nil {
				return err
			}
		}
		return read(gormTx, false)
	}
	return r.m.caps.Check(dialect.RowLock)
}

// setLockTimeout bounds the lock waits of the transaction on pool to
// lc.timeout, for the locked read about to run, and returns the function
// that restores the old bound (nil when lc has no timeout): PostgreSQL's
// transaction-local lock_timeout, MariaDB's max_statement_time (in
// seconds, with fractions; a read killed by it fails with error 1969).
func (r *Repository[T]) setLockTimeout(ctx context.Context, pool gorm.ConnPool, lc lockConfig) (func() error, error) {
	if lc.timeout <= 0 {
		return nil, nil
	}
	if r.m.caps.Name == dialect.Postgres {
		var old, set string
		if err := r.st.ScanSQL(ctx, pool, pgSetLockTimeout, []any{millis(lc.timeout)}, &old, &set); err != nil {
			return nil, fmt.Errorf("setting lock_timeout: %w", err)
		}
		return func() error {
			_, err := r.st.ExecSQL(ctx, pool, pgRestoreLockTimeout, []any{old})
			return err
		}, nil
	}
	var old string
	if err := r.st.ScanSQL(ctx, pool, "SELECT @@max_statement_time", nil, &old); err != nil {
		return nil, fmt.Errorf("reading max_statement_time: %w", err)
	}
	if _, err := r.st.ExecSQL(ctx, pool, "SET max_statement_time = "+store.Seconds(time.Duration(ceilMillis(lc.timeout))*time.Millisecond), nil); err != nil {
		return nil, fmt.Errorf("setting max_statement_time: %w", err)
	}
	return func() error {
		_, err := r.st.ExecSQL(context.WithoutCancel(ctx), pool, "SET max_statement_time = "+old, nil)
		return err
	}, nil
}

// lockClause is a row-locking clause GORM's clause.Locking cannot write,
// such as MariaDB's LOCK IN SHARE MODE. It takes the place of the locking
// clause (the clause named FOR) in GORM's SELECT.
type lockClause struct {
	text   string
	nowait bool
}

// Name implements clause.Interface.
func (lockClause) Name() string { return "FOR" }

// Build implements clause.Expression.
func (c lockClause) Build(b clause.Builder) {
	b.WriteString(c.text)
	if c.nowait {
		b.WriteString(" " + clause.LockingOptionsNoWait)
	}
}

// MergeClause implements clause.Interface: the clause is written whole,
// without GORM's "FOR" in front.
func (c lockClause) MergeClause(cl *clause.Clause) {
	cl.Name = ""
	cl.Expression = c
}

const (
	// pgSetLockTimeout sets lock_timeout for the rest of the transaction
	// and returns the value before. The materialized CTE is read first, so
	// the old value is read before set_config changes it.
	pgSetLockTimeout = `WITH old AS MATERIALIZED (SELECT current_setting('lock_timeout') AS v) ` +
		`SELECT v, set_config('lock_timeout', $1, true) FROM old`
	pgRestoreLockTimeout = `SELECT set_config('lock_timeout', $1, true)`
)

// millis renders d as whole milliseconds, rounded up, for lock_timeout.
func millis(d time.Duration) string {
	return strconv.FormatInt(ceilMillis(d), 10) + "ms"
}

// ceilMillis is d in whole milliseconds, rounded up and at least 1, as the
// databases take timeouts and lease times.
func ceilMillis(d time.Duration) int64 {
	ms := int64(d / time.Millisecond) // no d + 999999: that overflows near the maximum
	if d%time.Millisecond != 0 {
		ms++
	}
	return max(ms, 1)
}

// takeWriteLock makes SQLite's transaction on pool, one gormlock did not
// begin (an application's own), hold the database's write lock, with a
// write that changes nothing: a no-op when the transaction began IMMEDIATE,
// the lock acquisition otherwise. With NoWait or LockTimeout the wait for
// the lock is bounded by setting the connection's busy_timeout for the
// acquisition and restoring it after.
func (r *Repository[T]) takeWriteLock(ctx context.Context, pool gorm.ConnPool, lc lockConfig) (err error) {
	if wait, bounded := lc.busyTimeout(); bounded {
		restore, err := setBusyTimeout(ctx, pool, wait)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, restore()) }()
	}
	_, err = r.st.ExecSQL(ctx, pool, r.m.writeLockSQL, nil)
	return err
}

// busyTimeout returns the SQLite busy_timeout, in milliseconds, that bounds
// the wait for the write lock, and whether the call bounds it at all.
func (c lockConfig) busyTimeout() (int64, bool) {
	switch {
	case c.nowait:
		return 0, true
	case c.timeout > 0:
		return ceilMillis(c.timeout), true
	}
	return 0, false
}

// setBusyTimeout sets SQLite's busy_timeout on the connection behind pool
// (a transaction or a dedicated connection) and returns the function that
// restores the old value.
func setBusyTimeout(ctx context.Context, pool gorm.ConnPool, ms int64) (func() error, error) {
	var old int64
	if err := pool.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&old); err != nil {
		return nil, fmt.Errorf("reading busy_timeout: %w", locking.Classify(err))
	}
	if _, err := pool.ExecContext(ctx, "PRAGMA busy_timeout = "+strconv.FormatInt(ms, 10)); err != nil {
		return nil, fmt.Errorf("setting busy_timeout: %w", locking.Classify(err))
	}
	return func() error {
		// Restore even when ctx is cancelled: the connection outlives the call.
		if _, err := pool.ExecContext(context.WithoutCancel(ctx), "PRAGMA busy_timeout = "+strconv.FormatInt(old, 10)); err != nil {
			return fmt.Errorf("restoring busy_timeout: %w", locking.Classify(err))
		}
		return nil
	}, nil
}

// lockError classifies err from a locked read; when the caller set a lock
// timeout, "lock not available" is reported as locking.ErrLockTimeout
// (PostgreSQL uses one code, 55P03, for NOWAIT and for lock_timeout; SQLite
// one, SQLITE_BUSY, for every lock it could not get).
func (r *Repository[T]) lockError(lc lockConfig, err error, id any) error {
	err = r.translate(err, id)
	var de *locking.DatabaseError
	if lc.timeout > 0 && errors.As(err, &de) && errors.Is(de.Kind, locking.ErrLocked) {
		return &locking.DatabaseError{Kind: locking.ErrLockTimeout, Code: de.Code, Err: de.Err}
	}
	return err
}
