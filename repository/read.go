package repository

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"reflect"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/gormlock/gormlock/internal/dialect"
	"github.com/gormlock/gormlock/internal/store"
	"github.com/gormlock/gormlock/locking"
)

// Get returns the record whose primary key is id. id must have the key's type
// (any integer type for an integer key); a mistyped, nil or zero id gives an
// error matching locking.ErrInvalidArgument. A missing record gives a
// *locking.NotFoundError (errors.Is(err, locking.ErrNotFound)).
//
// Get sends one SELECT of the model's readable columns, built by New, and
// fills the entity as GORM's scan would, without GORM's per-call statement
// building: plain columns (numbers, strings, bools, times) straight into
// their fields, others (serializers, Scanners, pointers) through GORM's scan
// value and setter, and a row with a NULL in a plain field again GORM's way
// (the zero value). Like Update, it therefore does not go through GORM's
// callbacks (see "Logging and tracing" in the package doc). A model with
// an AfterFind hook is read through GORM, so the hook runs, and so is one
// with a read-only ("->") field, whose column may be missing where GORM's
// SELECT * would leave it zero, and a Get with Preload.
//
// For a model with soft delete (gorm.DeletedAt) a soft-deleted record is
// not found, as with GORM, unless IncludeDeleted is given. Get always reads
// the primary database, also with gorm.io/plugin/dbresolver: its result is
// what a guarded write will be checked against.
func (r *Repository[T]) Get(ctx context.Context, id any, opts ...ReadOption) (*T, error) {
	id, err := r.m.normalizeID(id)
	if err != nil {
		return nil, err
	}
	rc, err := readConfigOf(opts)
	if err != nil {
		return nil, err
	}
	db, _ := r.st.Conn(ctx)
	var e T
	switch query := r.m.selectSQL; {
	case query == "" || len(rc.preloads) > 0:
		q, qerr := r.gormRead(ctx, db, rc.includeDeleted, rc.preloads)
		if qerr != nil {
			return nil, qerr
		}
		err = q.Take(&e, r.m.keyCond(id)).Error
	default:
		if rc.includeDeleted {
			query = r.m.selectAnySQL
		}
		err = r.readRow(ctx, db.Statement.ConnPool, query, &e, id)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: Get id=%v: %w", r.m.table, id, r.translate(err, id))
	}
	return &e, nil
}

// gormRead returns a GORM query on db for ctx that reads the primary
// database (see primary), with the soft-delete scope and preloads asked
// for.
func (r *Repository[T]) gormRead(ctx context.Context, db *gorm.DB, includeDeleted bool, preloads []preload) (*gorm.DB, error) {
	q := store.Primary(db.WithContext(ctx))
	if includeDeleted {
		q = q.Unscoped()
	}
	for _, p := range preloads {
		if err := r.checkPreload(p.name); err != nil {
			return nil, err
		}
		q = q.Preload(p.name, p.args...)
	}
	return q, nil
}

// checkPreload refuses a Preload of an association the model does not have.
func (r *Repository[T]) checkPreload(name string) error {
	if name == clause.Associations {
		return nil
	}
	first, _, _ := strings.Cut(name, ".")
	for _, rel := range r.m.assocs {
		if rel.Name == first {
			return nil
		}
	}
	names := make([]string, len(r.m.assocs))
	for i, rel := range r.m.assocs {
		names[i] = rel.Name
	}
	return locking.Invalid("%s: Preload %q: the model has no association %q (it has: %s)", r.m.table, name, first, strings.Join(names, ", "))
}

// readRow reads record id into e with query, selectSQL or one of its locked
// forms. No row gives gorm.ErrRecordNotFound, as GORM's Take does.
func (r *Repository[T]) readRow(ctx context.Context, pool gorm.ConnPool, query string, e *T, id any) (err error) {
	ctx, err = r.st.Detach(ctx) // one row by its key
	if err != nil {
		return err
	}
	rows, err := r.st.QuerySQL(ctx, pool, query, r.m.keyArgs(nil, id))
	if err != nil {
		return err
	}
	defer func() {
		if cerr := rows.Close(); err == nil {
			err = cerr
		}
	}()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return gorm.ErrRecordNotFound
	}
	rv := reflect.ValueOf(e).Elem()
	retry, err := r.scanInto(ctx, rows, rv, true)
	if err == nil || !retry {
		return err
	}
	// A plain field got a value database/sql will not store in it as it
	// is — a NULL, which GORM reads as the zero value: scan the same row
	// again GORM's way, which overwrites every field the first scan set.
	_, err = r.scanInto(ctx, rows, rv, false)
	return err
}

// scanInto scans the current row into rv: with direct, plain fields
// straight into the struct; every other field (all of them without direct)
// into its GORM scan value, then through its setter, as GORM's scan does.
// retry reports an error of the direct scan itself, which scanning GORM's
// way may not meet; an error from a setter would come back the same.
func (r *Repository[T]) scanInto(ctx context.Context, rows *sql.Rows, rv reflect.Value, direct bool) (retry bool, err error) {
	cols := r.m.readCols
	dests := make([]any, len(cols))
	for i, f := range cols {
		if idx := r.m.direct[i]; direct && idx != nil {
			dests[i] = rv.FieldByIndex(idx).Addr().Interface()
		} else {
			dests[i] = f.NewValuePool.Get()
		}
	}
	err = rows.Scan(dests...)
	retry = err != nil && direct && r.m.anyDirect
	for i, f := range cols {
		if direct && r.m.direct[i] != nil {
			continue
		}
		if err == nil {
			if err = f.Set(ctx, rv, dests[i]); err != nil {
				err = fmt.Errorf("column %s: %w", f.DBName, err)
			}
		}
		f.NewValuePool.Put(dests[i])
	}
	return retry, err
}

// FindOption narrows or orders Find: Where, OrderBy, Limit, Offset, and
// the QueryOptions IncludeDeleted and Preload.
type FindOption interface {
	applyFind(*findQuery) error
}

// findFunc is a FindOption made of a function.
type findFunc func(*findQuery) error

func (f findFunc) applyFind(q *findQuery) error { return f(q) }

type findQuery struct {
	where          []clause.Expr
	order          []clause.OrderByColumn
	limit          int
	offset         int
	includeDeleted bool
	preloads       []preload
}

// Where adds a condition in GORM's syntax, with ? placeholders for args:
// Where("owner = ? AND balance > ?", "ann", 10). Conditions are ANDed. The
// query text is SQL: build it from constants, pass values as args. A
// condition is one expression: text with a semicolon or a comment anywhere
// (which could end the statement and start another, or hide the rest of
// it) is refused with an error matching locking.ErrInvalidArgument, before
// any I/O.
func Where(query string, args ...any) FilterOption {
	return filterFunc(func(q *findQuery) error {
		if strings.TrimSpace(query) == "" {
			return locking.Invalid("Find: Where with an empty condition")
		}
		q.where = append(q.where, clause.Expr{SQL: query, Vars: args})
		return nil
	})
}

// oneExpression refuses SQL text that could be more than one expression:
// a semicolon (which could end the statement and start another: SQLite's
// driver runs them all) or a comment ("--", "/*", and "#" where it starts
// one) anywhere in it — also inside quotes, since the dialects quote in
// more ways than a scanner of gormlock's can follow (SQLite's [brackets],
// PostgreSQL's $$dollar quotes$$ and E-strings, MySQL's backslash escapes).
// A value holding such characters goes in the arguments, as every value
// should.
func oneExpression(sql string, hashComments bool) error {
	switch {
	case strings.Contains(sql, ";"):
		return locking.Invalid("Find: Where %q: a condition cannot contain ';' (pass values as arguments)", sql)
	case strings.Contains(sql, "--"), strings.Contains(sql, "/*"), hashComments && strings.Contains(sql, "#"):
		return locking.Invalid("Find: Where %q: a condition cannot contain a comment (pass values as arguments)", sql)
	}
	return nil
}

// OrderBy sorts by a column of the model, given by column or field name,
// descending when desc is true. Several OrderBy apply in turn. Find always
// ends the order with the primary key, so pages are stable.
func OrderBy(column string, desc bool) FilterOption {
	return filterFunc(func(q *findQuery) error {
		q.order = append(q.order, clause.OrderByColumn{Column: clause.Column{Name: column}, Desc: desc})
		return nil
	})
}

// Limit returns at most n records; n must be positive.
func Limit(n int) FindOption {
	return findFunc(func(q *findQuery) error {
		if n <= 0 {
			return locking.Invalid("Find: Limit must be positive, got %d", n)
		}
		q.limit = n
		return nil
	})
}

// Offset skips the first n records of the order; n must not be negative.
func Offset(n int) FilterOption {
	return filterFunc(func(q *findQuery) error {
		if n < 0 {
			return locking.Invalid("Find: Offset must not be negative, got %d", n)
		}
		q.offset = n
		return nil
	})
}

// Find returns the records matching every Where, in the order of the OrderBy
// options followed by the primary key, paged by Limit and Offset. No record
// gives an empty slice and no error. Find reads through GORM: its callbacks,
// logger and plugins see it, and with gorm.io/plugin/dbresolver it reads a
// replica (use Get, Mutate or a locked read for what a write depends on).
// Soft-deleted records are left out unless IncludeDeleted is given;
// Preload loads associations. An unknown OrderBy column or a bad Limit
// or Offset gives an error matching locking.ErrInvalidArgument before any I/O.
func (r *Repository[T]) Find(ctx context.Context, opts ...FindOption) ([]T, error) {
	db, _ := r.st.Conn(ctx)
	tx, err := r.findQuery(db.WithContext(ctx), opts)
	if err != nil {
		return nil, err
	}
	out := []T{}
	if err := tx.Find(&out).Error; err != nil {
		return nil, fmt.Errorf("%s: Find: %w", r.m.table, locking.Classify(err))
	}
	return out, nil
}

// findQuery applies the FindOptions to tx.
func (r *Repository[T]) findQuery(tx *gorm.DB, opts []FindOption) (*gorm.DB, error) {
	var q findQuery
	if err := applyOpts(opts, &q, FindOption.applyFind); err != nil {
		return nil, err
	}
	order := make([]clause.OrderByColumn, 0, len(q.order)+1)
	for _, o := range q.order {
		f := r.m.schema.LookUpField(o.Column.Name)
		if f == nil || f.DBName == "" {
			return nil, locking.Invalid("%s: Find: OrderBy: no column %q", r.m.table, o.Column.Name)
		}
		order = append(order, clause.OrderByColumn{Column: clause.Column{Table: clause.CurrentTable, Name: f.DBName}, Desc: o.Desc})
	}
	for _, f := range r.m.pks {
		order = append(order, clause.OrderByColumn{Column: clause.Column{Table: clause.CurrentTable, Name: f.DBName}})
	}
	if q.includeDeleted {
		tx = tx.Unscoped()
	}
	for _, p := range q.preloads {
		if err := r.checkPreload(p.name); err != nil {
			return nil, err
		}
		tx = tx.Preload(p.name, p.args...)
	}

	tx = tx.Clauses(clause.OrderBy{Columns: order})
	for _, w := range q.where {
		if err := oneExpression(w.SQL, r.m.caps.HashComments); err != nil {
			return nil, fmt.Errorf("%s: %w", r.m.table, err)
		}
		tx = tx.Where(w)
	}
	if q.limit > 0 {
		tx = tx.Limit(q.limit)
	} else if q.offset > 0 && r.m.caps.Dialector() == dialect.MySQL {
		tx = tx.Limit(math.MaxInt64) // MySQL has no OFFSET without LIMIT
	}
	if q.offset > 0 {
		tx = tx.Offset(q.offset)
	}
	return tx, nil
}
