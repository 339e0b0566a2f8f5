package repository

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/dialect"
	"github.com/gormlock/gormlock/internal/store"
	"github.com/gormlock/gormlock/locking"
)

// Change is one column assignment of Apply: made by Add, SetTo or Expr.
type Change struct {
	field string
	sql   string // the right-hand side; "" for SetTo
	args  []any
	add   bool
}

// Add is the change field = field + delta: a counter, a stock level.
func Add(field string, delta any) Change { return Change{field: field, args: []any{delta}, add: true} }

// SetTo is the change field = value.
func SetTo(field string, value any) Change { return Change{field: field, args: []any{value}} }

// Expr is the change field = (sql), an SQL expression over the record's
// columns with a ? for each of args: Expr("Balance", "balance * ?", 2). The
// text is SQL: build it from constants and pass values as args; like
// Where's condition it may not hold a semicolon or a comment.
func Expr(field, sql string, args ...any) Change {
	return Change{field: field, sql: sql, args: args}
}

// ApplyOption configures one Apply call.
type ApplyOption interface{ applyApply(*applyConfig) error }

type applyConfig struct {
	cond     string
	condArgs []any
	op       *OperationKey
}

type applyFunc func(*applyConfig) error

func (f applyFunc) applyApply(c *applyConfig) error { return f(c) }

// If makes Apply write only when the condition holds on the record as it is
// when the statement runs: If("stock >= ?", n). Otherwise Apply writes
// nothing and returns an error matching locking.ErrConditionFailed. The
// text follows Where's rules. Several If are ANDed.
func If(cond string, args ...any) ApplyOption {
	return applyFunc(func(c *applyConfig) error {
		if strings.TrimSpace(cond) == "" {
			return locking.Invalid("Apply: If with an empty condition")
		}
		if c.cond != "" {
			c.cond += " AND "
		}
		c.cond += "(" + cond + ")"
		c.condArgs = append(c.condArgs, args...)
		return nil
	})
}

// Apply changes record id in one guarded statement, without reading it
// first: UPDATE ... SET <changes>, version = <next version> WHERE <key>
// [AND <If conditions>], and returns the record as that statement left it.
// It is the hot-row ceiling for commutative changes (counters, stock):
// there is no read-modify-write to lose, so nothing is retried, and the
// row is held only for the statement — where Mutate and MutateRowLocked hold
// it from their read to their commit. The version advances like any write,
// so readers holding the old one get ErrStaleData on their next write —
// unless every change is of a field tagged gormlock:"unversioned" (see
// UnversionedTag): then the version and the update time stay as they are.
//
// PostgreSQL and SQLite return the row with RETURNING, in the same
// statement; MySQL and MariaDB have no UPDATE ... RETURNING, so there
// Apply runs the UPDATE and a SELECT in one transaction (ctx's, or its
// own). A missing record gives an error matching locking.ErrNotFound, a
// condition that does not hold one matching locking.ErrConditionFailed
// (nothing written in either case). With leases on (WithLeases), a record
// someone has leased is refused like every guarded write, with an error
// matching locking.ErrLeased. No changes, an unknown field, the key,
// the version, the update or deletion time, or a model with update hooks
// (which need the entity before the write; Apply has none) give an error
// matching locking.ErrInvalidArgument or locking.ErrNotSupported before
// any I/O. Outside a transaction a statement the database aborted (a
// deadlock, or on Galera a conflict with another node: not applied) runs
// again under the repository's retry policy, and a lost connection after
// the statement was sent gives locking.ErrCommitUnknown, as for every write.
//
// With OpKey, the statement and the key's record are one transaction, so
// the change applies at most once however often the call is repeated: a
// repeat of an applied call returns the record as it is now, and an
// attempt whose outcome was unknown is retried — safely, since the key
// tells.
func (r *Repository[T]) Apply(ctx context.Context, id any, changes []Change, opts ...ApplyOption) (*T, error) {
	id, err := r.m.normalizeID(id)
	if err != nil {
		return nil, err
	}
	var cfg applyConfig
	if err := applyOpts(opts, &cfg, ApplyOption.applyApply); err != nil {
		return nil, err
	}
	if !r.m.ownSelect() {
		return nil, fmt.Errorf("%w: %s: Apply returns the row its statement wrote, which needs every field read by column: the model has an AfterFind hook or a read-only field; use Mutate", locking.ErrNotSupported, r.m.table)
	}
	if err := r.checkIsolation(ctx, "Apply"); err != nil {
		return nil, err
	}
	if r.m.hooks.update() {
		return nil, fmt.Errorf("%w: %s: Apply: the model has update hooks (BeforeSave, BeforeUpdate, AfterUpdate, AfterSave), which need the entity before the write; use Mutate", locking.ErrNotSupported, r.m.table)
	}
	st, args, err := r.applySQL(ctx, id, changes, cfg)
	if err != nil {
		return nil, err
	}
	// once runs the statement; a statement that matched no row says why.
	once := func(ctx context.Context) (*T, error) {
		var e T
		var n int64
		var err error
		if r.m.caps.VersionBack == dialect.LastInsertID {
			n, err = r.applyMySQL(ctx, st.Text, args, id, &e)
		} else {
			err = r.st.Exec(ctx, st, args, func(ctx context.Context, pool gorm.ConnPool, query string, args []any) error {
				var serr error
				n, serr = r.scanReturned(ctx, pool, query, args, &e)
				return serr
			})
		}
		switch {
		case err != nil:
			return nil, err
		case n == 0:
			return nil, r.whyNotApplied(ctx, id, cfg.cond)
		}
		return &e, nil
	}
	_, inTx := r.st.Pool(ctx)
	if cfg.op == nil && inTx {
		e, err := once(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: Apply id=%v: %w", r.m.table, id, err)
		}
		return e, nil
	}
	// Outside a transaction a statement the database aborted (a deadlock;
	// on Galera a conflict with another node, also at COMMIT) was not
	// applied: run it again. With an operation key, so is one whose outcome
	// was unknown: the key tells whether it was applied (see withOpKey).
	var out *T
	var kc keyedCall
	retry := func(err error) bool {
		return (!inTx && isLockRetryable(err)) ||
			(cfg.op != nil && errors.Is(err, locking.ErrCommitUnknown) && ctx.Err() == nil)
	}
	err = locking.OnError(ctx, r.retry, retry, func(ctx context.Context) error {
		return r.withOpKey(ctx, cfg.op, &kc, "apply", id, func(ctx context.Context) error {
			e, err := once(ctx)
			if err == nil {
				out = e
			}
			return err
		}, &out)
	})
	if kc.uncertain && err != nil && !errors.Is(err, locking.ErrCommitUnknown) {
		err = locking.Unknown(err)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: Apply id=%v: %w", r.m.table, id, err)
	}
	return out, nil
}

// whyNotApplied explains an Apply that matched no row: the record is
// missing, someone holds a lease on it, or the condition cond did not hold.
func (r *Repository[T]) whyNotApplied(ctx context.Context, id any, cond string) error {
	_, found, deleted, err := r.currentVersion(ctx, id)
	switch {
	case err != nil:
		return err
	case !found || deleted:
		return &locking.NotFoundError{Table: r.m.table, ID: id}
	}
	if r.m.leases != nil {
		// A lease held now refused it; without a condition, so did one
		// that has ended since.
		err := r.leaseRefused(ctx, id, 0, "apply")
		var le *locking.LeaseError
		if cond == "" || !errors.As(err, &le) || le.Holder != "" {
			return err
		}
	}
	if cond != "" {
		return fmt.Errorf("%w: %s: Apply id=%v: the condition %s does not hold; nothing was written", locking.ErrConditionFailed, r.m.table, id, cond)
	}
	// The record is there now but was not when the statement ran.
	return &locking.NotFoundError{Table: r.m.table, ID: id}
}

// applySQL writes Apply's UPDATE and its arguments.
func (r *Repository[T]) applySQL(ctx context.Context, id any, changes []Change, cfg applyConfig) (store.Stmt, []any, error) {
	m := r.m
	if len(changes) == 0 {
		return store.Stmt{}, nil, locking.Invalid("%s: Apply id=%v: no changes", m.table, id)
	}
	if err := oneExpression(cfg.cond, m.caps.HashComments); err != nil {
		return store.Stmt{}, nil, err
	}
	w := &sqlWriter{db: r.st.Gorm}
	w.reset("UPDATE ").quote(m.table).str(" SET ")
	var args []any
	seen := map[string]bool{}
	versioned := false // a change of a field the version covers
	for _, c := range changes {
		f := m.schema.LookUpField(c.field)
		settable := m.isUnversionedField(f)
		for _, s := range m.setCols {
			if s == f {
				settable, versioned = true, true
			}
		}
		switch {
		case f == nil:
			return store.Stmt{}, nil, locking.Invalid("%s: Apply: no field or column %q", m.table, c.field)
		case !settable:
			return store.Stmt{}, nil, locking.Invalid("%s: Apply: %s cannot be changed by Apply (the key, the version, the creation, update or deletion time, or a read-only field)", m.table, f.Name)
		case seen[f.DBName]:
			return store.Stmt{}, nil, locking.Invalid("%s: Apply: %s changed twice", m.table, f.Name)
		}
		seen[f.DBName] = true
		if len(seen) > 1 {
			w.str(", ")
		}
		w.quote(f.DBName).str(" = ")
		switch {
		case c.add:
			w.quote(f.DBName).str(" + ").param()
		case c.sql == "":
			w.param()
		default:
			if err := oneExpression(c.sql, m.caps.HashComments); err != nil {
				return store.Stmt{}, nil, err
			}
			if n := strings.Count(c.sql, "?"); n != len(c.args) {
				return store.Stmt{}, nil, locking.Invalid("%s: Apply: Expr %q has %d placeholders and %d arguments", m.table, c.sql, n, len(c.args))
			}
			w.str("(").expr(c.sql).str(")")
		}
		args = append(args, c.args...)
	}
	// The version: the next one after the record's own (a legacy record's
	// NULL counts as 0), from the database's clock where the dialect has
	// one, else from this process's. Changes of unversioned fields alone
	// leave it, and the update time, as they are (see UnversionedTag);
	// MySQL still reads it back, as the check that the row read after the
	// UPDATE is the one it wrote (applyMySQL).
	var col strings.Builder
	r.st.Gorm.Dialector.QuoteTo(&col, m.version.DBName)
	switch {
	case !versioned && m.caps.VersionBack == dialect.LastInsertID:
		w.str(", ").str(col.String()).str(" = LAST_INSERT_ID(COALESCE(" + col.String() + ", 0))")
	case !versioned:
	default:
		w.str(", ").str(col.String()).str(" = ")
		next := "COALESCE(" + col.String() + ", 0) + 1"
		if expr := m.caps.NextVersion; expr != "" {
			before, after, _ := strings.Cut(expr, "?")
			w.str(before + next + after)
		} else {
			w.str("MAX(" + next + ", ").param().str(")")
			args = append(args, clockArg{})
		}
		if m.updatedAt != nil {
			w.str(", ").eq(m.updatedAt.DBName)
			args = append(args, timeValue(m.updatedAt, r.now(ctx)))
		}
	}
	w.str(" WHERE ").keyEq(m).live(m, liveRows)
	if m.leases != nil {
		w.str(" AND ").str(m.leases.guard) // a leased record is its holder's
	}
	args = m.keyArgs(args, id)
	if cfg.cond != "" {
		if n := strings.Count(cfg.cond, "?"); n != len(cfg.condArgs) {
			return store.Stmt{}, nil, locking.Invalid("%s: Apply: If %q has %d placeholders and %d arguments", m.table, cfg.cond, n, len(cfg.condArgs))
		}
		w.str(" AND ").expr(cfg.cond)
		args = append(args, cfg.condArgs...)
	}
	// The statement's bounded form (see store.Stmt): where the dialect
	// bounds a statement with a prefix, the statement itself; where a
	// write sets its own lock timeout, that condition with one more
	// parameter, last.
	plain, bounded := w.String(), ""
	switch {
	case m.caps.StatementTimeout != "":
		bounded = plain
	case m.caps.SelfLockTimeout != "":
		before, after, _ := strings.Cut(m.caps.SelfLockTimeout, "?")
		bounded = w.str(" AND ").str(before).param().str(after).String()
	}
	var ret strings.Builder
	if m.caps.VersionBack == dialect.Returning || m.caps.SingleWriter {
		ret.WriteString(" RETURNING ")
		for i, f := range m.readCols {
			if i > 0 {
				ret.WriteString(", ")
			}
			r.st.Gorm.Dialector.QuoteTo(&ret, f.DBName)
		}
	}
	st := store.Stmt{Text: plain + ret.String()}
	if bounded != "" {
		st.Bounded = bounded + ret.String()
	}
	return st, args, nil
}

// param writes the dialect's next placeholder.
func (w *sqlWriter) param() *sqlWriter {
	w.vars.Vars = append(w.vars.Vars, nil)
	w.db.Dialector.BindVarTo(w, &w.vars, nil)
	return w
}

// expr writes sql with each ? replaced by the dialect's next placeholder.
func (w *sqlWriter) expr(sql string) *sqlWriter {
	for {
		before, after, found := strings.Cut(sql, "?")
		w.str(before)
		if !found {
			return w
		}
		w.param()
		sql = after
	}
}

// clockArg is this process's clock in microseconds, read when the driver
// sends the statement (SQLite's versions; see versionArg).
type clockArg struct{}

// Value implements driver.Valuer.
func (clockArg) Value() (driver.Value, error) { return now().UnixMicro(), nil }

// scanReturned runs an UPDATE ... RETURNING and scans the row it returns
// into e; n is 0 when no row matched.
func (r *Repository[T]) scanReturned(ctx context.Context, pool gorm.ConnPool, query string, args []any, e *T) (n int64, err error) {
	rows, err := r.st.QuerySQL(ctx, pool, query, args)
	if err != nil {
		return 0, err
	}
	defer func() {
		if cerr := rows.Close(); err == nil {
			err = cerr
		}
	}()
	if !rows.Next() {
		return 0, rows.Err()
	}
	if _, err := r.scanInto(ctx, rows, reflectElem(e), false); err != nil {
		return 0, err
	}
	return 1, rows.Err()
}

// applyMySQL runs Apply's UPDATE and reads the row back in one
// transaction: MySQL has no UPDATE ... RETURNING.
func (r *Repository[T]) applyMySQL(ctx context.Context, q string, args []any, id any, e *T) (n int64, err error) {
	body := func(ctx context.Context) error {
		db, _ := r.st.Conn(ctx)
		var version int64
		// Bounded by ctx's deadline, so that a wait for the row's lock
		// ends as ErrLockTimeout before the deadline.
		bq, bounded := r.st.PrefixBound(ctx, q)
		n, version, err = r.st.ExecSQLID(ctx, db.Statement.ConnPool, bq, args, true)
		if err != nil {
			return store.DeadlineBound(locking.Classify(err), bounded) // execSQLID noted a rollback
		}
		if n == 0 {
			return nil
		}
		if err := r.readRow(ctx, db.Statement.ConnPool, r.m.selectAnySQL, e, id); err != nil {
			err = locking.Classify(err)
			store.NoteRolledBack(ctx, r.st, err)
			return err
		}
		if got := r.versionOf(ctx, reflectElem(e)); got != version {
			// Not the row this statement wrote: the transaction was
			// rolled back under it (Galera aborts a transaction between
			// its statements, and a read after that runs outside it).
			err := &locking.DatabaseError{Kind: locking.ErrDeadlock, Code: "1213",
				Err: fmt.Errorf("read back version %d, not the %d written: the transaction was rolled back", got, version)}
			store.NoteRolledBack(ctx, r.st, err)
			return err
		}
		return nil
	}
	err = r.st.JoinOrRunTx(ctx, r.m.table+": Apply", body) // body sets n
	return n, err
}
