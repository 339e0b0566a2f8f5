package repository

import (
	"context"
	"errors"
	"reflect"
	"time"

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/store"
	"github.com/gormlock/gormlock/locking"
)

// Repository is a typed store for the model T whose writes are all guarded by
// T's version. Build it once with New and share it: it is safe for concurrent
// use and holds no per-call state.
type Repository[T any] struct {
	st     store.Store
	m      *meta
	retry  locking.RetryPolicy
	leases *leaseLimits // nil without WithLeases
	turns  *turns       // Mutate's per-record queue in this process
	// heat holds Mutate's hot records; nil when adaptive Mutate is off.
	heat       *heat
	mutateHook func(context.Context, MutateReport)
	// obs is told what the calls decide (see Observer); nil for none.
	// system is the database's name in what it is told.
	obs    Observer
	system string
	// opRetention is how long operation keys are remembered.
	opRetention time.Duration
	// cols caches the statements of Updates limited by Columns.
	cols columnSets
}

// Option configures a Repository in New.
type Option func(*options) error

type options struct {
	retry       locking.RetryPolicy
	leases      *leaseLimits
	leaseInRow  bool
	opRetention time.Duration
	callbacks   *bool
	adaptive    bool
	mutateHook  func(context.Context, MutateReport)
	observer    Observer
	observerSet bool // WithObserver was given, nil included
}

// WithRetryPolicy sets the policy Mutate and Upsert use when a call gives
// none. The default is locking.DefaultRetryPolicy(). An invalid policy makes
// New fail with an error matching locking.ErrInvalidArgument.
func WithRetryPolicy(p locking.RetryPolicy) Option {
	return func(o *options) error {
		if err := p.Validate(); err != nil {
			return err
		}
		o.retry = p
		return nil
	}
}

// New returns the repository of model T on db. It inspects T once: T must be
// a struct with a primary key of one or several columns (see Key) and a
// version field (a field named Version, as in models.Versioned, or an
// integer field tagged `gormlock:"version"`), and db must be SQLite,
// PostgreSQL or MySQL/MariaDB (see the openers under opendb). Otherwise New
// returns an error matching locking.ErrInvalidArgument or
// locking.ErrNotSupported that names the problem. New does no I/O but on
// MySQL and MariaDB, where it asks the server once per database whether it
// is MySQL, MariaDB or a Galera node; call VerifySchema to check the table.
func New[T any](db *gorm.DB, opts ...Option) (*Repository[T], error) {
	if db == nil || db.Config == nil || db.Dialector == nil || db.Statement == nil {
		return nil, locking.Invalid("repository: db is nil or not opened (use gorm.Open)")
	}
	o := options{retry: locking.DefaultRetryPolicy(), opRetention: DefaultOperationRetention, adaptive: true}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	st, err := store.Of(db, "repository")
	if err != nil {
		return nil, err
	}
	m, err := buildMeta[T](db, st.Caps)
	if err != nil {
		return nil, err
	}
	m.leaseInRow = o.leaseInRow
	m.buildSQL(db, o.leases != nil)
	if o.callbacks != nil {
		st.Callbacks = *o.callbacks
	}

	r := &Repository[T]{
		st:          st,
		m:           m,
		retry:       o.retry,
		leases:      o.leases,
		turns:       &turns{},
		opRetention: o.opRetention,
		mutateHook:  o.mutateHook,
	}
	if o.adaptive {
		r.heat = &heat{singleWriter: st.Caps.SingleWriter}
	}
	r.observe(db, o)
	return r, nil
}

// Table returns the name of T's table.
func (r *Repository[T]) Table() string { return r.m.table }

// DB returns the *gorm.DB to use for ctx: the transaction RunInTx put in ctx,
// or the repository's database, bound to ctx either way. It is meant for
// unguarded reads the repository does not offer; writes through it bypass the
// version guard.
func (r *Repository[T]) DB(ctx context.Context) *gorm.DB {
	db, _ := r.st.Conn(ctx)
	return db.WithContext(ctx)
}

// entityValue returns the addressable struct e points to.
func (r *Repository[T]) entityValue(e *T) (reflect.Value, error) {
	if e == nil {
		return reflect.Value{}, locking.Invalid("%s: entity is nil", r.m.table)
	}
	return reflect.ValueOf(e).Elem(), nil
}

// reflectElem returns the struct e points to.
func reflectElem[T any](e *T) reflect.Value { return reflect.ValueOf(e).Elem() }

// versionOf returns the version stored in the entity.
func (r *Repository[T]) versionOf(ctx context.Context, rv reflect.Value) int64 {
	return r.m.version.ReflectValueOf(ctx, rv).Int()
}

// setVersion stores n in the entity's version field.
func (r *Repository[T]) setVersion(ctx context.Context, rv reflect.Value, n int64) {
	r.m.version.ReflectValueOf(ctx, rv).SetInt(n)
}

// idOf returns the entity's primary key (a Key for a composite one) and
// whether it is not set.
func (r *Repository[T]) idOf(ctx context.Context, rv reflect.Value) (any, bool) {
	return r.m.keyOf(ctx, rv)
}

// translate turns GORM's and the driver's errors into gormlock's vocabulary.
func (r *Repository[T]) translate(err error, id any) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return &locking.NotFoundError{Table: r.m.table, ID: id}
	}
	return locking.Classify(err)
}

// pool returns the connection pool for gormlock's own statements in ctx:
// the transaction ctx carries and true, or the repository's database and
// false. Unlike store.Conn it makes no *gorm.DB for the transaction.
func (r *Repository[T]) pool(ctx context.Context) (gorm.ConnPool, bool) {
	if p, ok := r.st.Pool(ctx); ok {
		return p, true
	}
	return r.st.Gorm.Statement.ConnPool, false
}
