package repository

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/gormlock/gormlock/internal/dialect"
	"github.com/gormlock/gormlock/internal/store"
	"github.com/gormlock/gormlock/locking"
)

// LeaseTable is the table leases live in, created by package migrations
// (its version 1). It is separate from the entity tables: taking or
// releasing a lease never changes the leased record.
const LeaseTable = "gormlock_leases"

// Lease time limits, as in Couchbase's get-and-lock: a lease lasts
// DefaultLeaseTTL unless the call asks for another time, and never longer
// than MaxLeaseTTL. WithLeaseTTL changes both for one repository.
const (
	DefaultLeaseTTL = 15 * time.Second
	MaxLeaseTTL     = 30 * time.Second
)

type leaseLimits struct{ def, max time.Duration }

// WithLeases turns on leases (Leases.Acquire and the calls that take a *Lease)
// with the default limits: 15 s unless a call says otherwise, 30 s at most.
//
// With leases on, every guarded write of the repository (Update, Delete,
// ForceIncrement, UpdateMany, and so Mutate and MutateRowLocked) also requires
// that no one holds an unexpired lease on the record, and fails with an error
// matching locking.ErrLeased otherwise; the lease holder writes with
// Leases().Update or Leases().Delete. Build every repository of a table with
// the same setting: one built without leases does not see them.
func WithLeases() Option { return WithLeaseTTL(DefaultLeaseTTL, MaxLeaseTTL) }

// WithLeaseTTL is WithLeases with other limits: def is the lease time when a
// call gives none, max the longest a call may ask for. Both must be positive
// and def at most max, or New fails with an error matching
// locking.ErrInvalidArgument.
func WithLeaseTTL(def, max time.Duration) Option {
	return func(o *options) error {
		if def <= 0 || max <= 0 || def > max {
			return locking.Invalid("WithLeaseTTL: need 0 < default (%v) <= max (%v)", def, max)
		}
		o.leases = &leaseLimits{def: def, max: max}
		return nil
	}
}

// WithLeasesInRow is WithLeases (with its limits, or those of a
// WithLeaseTTL given too) with each record's lease kept in the record's own
// row rather than in LeaseTable: taking a lease is one conditional UPDATE of
// the record's row that also reads the record, and Leases.Update one UPDATE
// that checks the lease by its token, writes the record and ends the lease;
// the guarded writes check the lease in the row they write. Add the columns
// first with migrations.AddLeaseColumns for the model. Leases behave as with
// the lease table (fences, tokens, owner release, expiry by the database's
// clock, a lost grant on PostgreSQL); Leases.Sweep has nothing to do. Every
// repository of a table must use the same layout. A table with the version
// trigger (migrations.CreateVersionTrigger) keeps its leases in LeaseTable:
// the trigger would give every lease change a new version.
func WithLeasesInRow() Option {
	return func(o *options) error {
		if o.leases == nil {
			o.leases = &leaseLimits{def: DefaultLeaseTTL, max: MaxLeaseTTL}
		}
		o.leaseInRow = true
		return nil
	}
}

// Lease is a time-limited exclusive right to change one record, returned by
// Leases.Acquire. Keep it secret: whoever presents its Token can write the
// record or release it.
type Lease struct {
	Table string // the record's table
	ID    any    // the record's primary key
	Owner string // who holds it, as given to Leases.Acquire
	// Token is 128 bits from crypto/rand, in hex. The database stores only
	// its SHA-256.
	Token string
	// Fence grows with every acquisition of this record's lease: every new
	// lease on the record has a larger one, and none is handed out twice,
	// even after a crash lost a grant. On SQLite and MySQL it counts the
	// acquisitions; on PostgreSQL, whose grants need not be durable, it is
	// the database clock in microseconds at the grant, or the previous
	// fence + 1 when larger, as versions are. Pass it to other systems the
	// holder writes to, so they can refuse a holder that has been
	// superseded.
	Fence int64
	// Key is the record's key as the database writes it as text; with
	// Table it names the lease. It must name the same record as ID: a
	// lease whose Key and ID disagree is refused like a wrong token.
	Key string
	// Version is the record's version when the lease was taken.
	Version    int64
	AcquiredAt time.Time // by the database's clock
	ExpiresAt  time.Time // by the database's clock; Leases.Renew moves it
}

// LeaseState describes the active lease on a record, for readers: who
// holds it and until when. It never carries the token.
type LeaseState struct {
	Owner      string
	Fence      int64
	AcquiredAt time.Time
	ExpiresAt  time.Time
}

// LeaseOption adjusts one Leases.Acquire or Leases.Renew call: TTL.
type LeaseOption interface {
	applyLease(*leaseCall) error
}

// leaseFunc is a LeaseOption made of a function.
type leaseFunc func(*leaseCall) error

func (f leaseFunc) applyLease(c *leaseCall) error { return f(c) }

type leaseCall struct{ ttl time.Duration }

// TTL sets how long the lease lasts, from now by the database's clock, in
// whole milliseconds rounded up. It must be positive and at most the
// repository's maximum (MaxLeaseTTL unless WithLeaseTTL changed it); anything
// else is an error matching locking.ErrInvalidArgument, never silently
// changed.
func TTL(d time.Duration) LeaseOption {
	return leaseFunc(func(c *leaseCall) error {
		if d <= 0 {
			return locking.Invalid("lease TTL must be positive, got %v", d)
		}
		c.ttl = d
		return nil
	})
}

// Leases are a repository's time-limited locks on its records (Couchbase's
// get-and-lock, MongoDB's lock collection): Acquire reads a record and
// leases it to an owner for a TTL with a secret token; the holder writes it
// with Leases.Update or Leases.Delete (which end the lease), or gives it up
// with Release; Renew is the
// heartbeat of a holder that needs longer. Expiry is by the database's
// clock. While a record is leased, every other guarded write of it (Update,
// Mutate, ...) fails with an error matching locking.ErrLeased; reads never
// wait. A lease is not a row lock: it outlives transactions and
// connections, and holds across processes until it ends or expires.
//
// Get a repository's Leases with Repository.Leases; the repository must be
// built WithLeases (or WithLeaseTTL), or every call fails with an error
// matching locking.ErrInvalidArgument.
type Leases[T any] struct{ r *Repository[T] }

// Leases returns the repository's lease operations.
func (r *Repository[T]) Leases() *Leases[T] { return &Leases[T]{r: r} }

// Acquire reads record id and leases it to owner for a limited time (the
// Couchbase get-and-lock): until the lease ends, nobody else can lease the
// record or write it through a repository built WithLeases, but everyone can
// still read it. The holder ends the lease by writing with it
// (Leases.Update, Leases.Delete) or with Leases.Release; a holder that does
// neither never blocks the record longer than the TTL (TTL option; the
// repository's default otherwise), judged by the database's clock.
//
// owner is the caller's opaque name for who holds the lease (a worker id, a
// user id, a random id kept in the web session) so that ReleaseOwnerLeases can drop
// all of its leases at once. Do not use a web session id itself: the lease
// table would then hold live session ids, and anyone who can read it could
// hijack those sessions.
//
// When someone else holds an unexpired lease, the error matches
// locking.ErrLeased, and so locking.ErrLocked (a *locking.LeaseError saying
// who and until when). A
// missing record gives an error matching locking.ErrNotFound and takes no
// lease. The repository must be built WithLeases.
//
// The lease is granted at once (outside a transaction; inside RunInTx it
// becomes visible when that commits), and the record is then read after any
// write already holding its row has committed, so Lease.Version is current.
// A write whose statement began before the grant and had not yet reached the
// row can still commit just after it; the holder's Leases.Update then fails
// with locking.ErrStaleData — the version guard still loses nothing.
//
// On PostgreSQL a grant outside a transaction commits without waiting for
// the disk (synchronous_commit off for its own commit only), so a server
// crash soon after it can lose it. Its holder's Leases.Update, Leases.Delete,
// Leases.Renew and Leases.Release then fail with locking.ErrLeaseExpired, as
// after an expiry: each checks the lease in its own durable transaction.
// Neither its token nor its fence is ever handed out again. Any durable
// commit after the grant (the holder's first write with it, say) makes the
// grant durable too.
func (ls *Leases[T]) Acquire(ctx context.Context, id any, owner string, opts ...LeaseOption) (_ *T, _ *Lease, err error) {
	r := ls.r
	id, err = r.m.normalizeID(id)
	if err != nil {
		return nil, nil, err
	}
	if owner == "" {
		return nil, nil, locking.Invalid("%s: Leases.Acquire id=%v: owner is empty", r.m.table, id)
	}
	ttl, err := r.leaseTTL("Leases.Acquire", opts)
	if err != nil {
		return nil, nil, err
	}
	ctx, oc := r.observeLease(ctx, OpLeaseAcquire, id)
	defer func() { oc.end(err) }()
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, nil, fmt.Errorf("%s: Leases.Acquire: token: %w", r.m.table, err)
	}
	lease := &Lease{Table: r.m.table, ID: id, Owner: owner, Token: hex.EncodeToString(raw[:])}
	var acquired, expires int64
	if r.m.leases.row != nil {
		return r.acquireRow(ctx, id, lease, ceilMillis(ttl))
	}
	if r.m.leases.pg != nil {
		return r.getAndLockPG(ctx, id, lease, ttl)
	}
	hash := hashToken(lease.Token)
	err = r.acquire(ctx, id, r.m.keyArgs([]any{r.m.table, owner, hash, ceilMillis(ttl)}, id), hash,
		&lease.Key, &lease.Fence, &acquired, &expires)
	if store.IsNoRows(err) {
		return nil, nil, r.acquireRefused(ctx, id)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s: Leases.Acquire id=%v: %w", r.m.table, id, err)
	}

	// Read the record once no write holds its row: FOR SHARE waits for a
	// write in progress (PostgreSQL); SQLite's writes are already done.
	var e T
	db, _ := r.st.Conn(ctx)
	shared := r.m.caps.How(dialect.SharedLock) == dialect.Native
	if r.m.selectSQL != "" {
		query := r.m.selectSQL
		if shared {
			query = r.m.lockedSelect(lockConfig{shared: true})
		}
		err = r.readRow(ctx, db.Statement.ConnPool, query, &e, id)
	} else {
		q := store.Primary(db.WithContext(ctx))
		if shared {
			q = q.Clauses(clause.Locking{Strength: clause.LockingStrengthShare})
		}
		err = q.Take(&e, r.m.keyCond(id)).Error
	}
	if err != nil {
		err = fmt.Errorf("%s: Leases.Acquire id=%v: %w", r.m.table, id, r.translate(err, id))
		// Deleted meanwhile, or the read failed: give the lease back.
		if rerr := r.release(context.WithoutCancel(ctx), lease, "release"); rerr != nil && !errors.Is(rerr, locking.ErrLeaseExpired) {
			err = errors.Join(err, rerr)
		}
		return nil, nil, err
	}
	r.fillLease(ctx, lease, &e, acquired, expires)
	return &e, lease, nil
}

// Get is Repository.Get that also tells whether the record is leased: the
// state is nil when no unexpired lease is held. Reading never waits for a
// lease.
func (ls *Leases[T]) Get(ctx context.Context, id any) (*T, *LeaseState, error) {
	r := ls.r
	if err := r.needLeases("Leases.Get"); err != nil {
		return nil, nil, err
	}
	e, err := r.Get(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	id, _ = r.idOf(ctx, reflectElem(e))
	st, err := r.leaseState(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	return e, st, nil
}

// Release ends the lease without writing the record; the record can be
// leased again at once. A lease that is not the record's current one (a
// wrong or missing token) gives an error matching locking.ErrLeased while
// someone holds the record, and locking.ErrLeaseExpired when the lease ran
// out, was released, or was released with its owner's leases.
func (ls *Leases[T]) Release(ctx context.Context, l *Lease) (err error) {
	r := ls.r
	id, err := r.checkLease(l, "Leases.Release")
	if err != nil {
		return err
	}
	ctx, oc := r.observeLease(ctx, OpLeaseRelease, id)
	defer func() { oc.end(err) }()
	return r.release(ctx, l, "release")
}

// Renew extends the lease to the TTL (or the default) from now, by the
// database's clock: the heartbeat of a holder that needs longer. It fails
// like Leases.Release when the lease is no longer held, and never revives an
// expired lease. On success l.ExpiresAt is the new expiry.
func (ls *Leases[T]) Renew(ctx context.Context, l *Lease, opts ...LeaseOption) (err error) {
	r := ls.r
	id, err := r.checkLease(l, "Leases.Renew")
	if err != nil {
		return err
	}
	ttl, err := r.leaseTTL("Leases.Renew", opts)
	if err != nil {
		return err
	}
	ctx, oc := r.observeLease(ctx, OpLeaseRenew, id)
	defer func() { oc.end(err) }()
	var expires int64
	args := append(r.m.keyArgs([]any{ceilMillis(ttl), r.m.table, l.Key}, id), hashToken(l.Token), l.Fence)
	renew := r.m.leases.renew
	if r.m.leases.row != nil {
		args, renew = r.rowHeldArgs([]any{ceilMillis(ttl)}, l, id), r.m.leases.row.renew
	}
	if r.m.caps.VersionBack == dialect.LastInsertID {
		var n int64
		if n, expires, err = r.st.ExecResultID(ctx, renew, args); err == nil && n == 0 {
			err = sql.ErrNoRows
		}
	} else {
		err = r.st.Exec(ctx, renew, args, r.st.QueryRowScan(&expires))
	}
	switch {
	case store.IsNoRows(err):
		return r.leaseRefused(ctx, id, l.Fence, "renew")
	case err != nil:
		return fmt.Errorf("%s: Leases.Renew id=%v: %w", r.m.table, id, err)
	}
	l.ExpiresAt = millisTime(expires)
	return nil
}

// Update writes e with Repository.Update and ends the lease, in one
// transaction: both happen or neither. e must be the leased record. When the
// lease is no longer held the error is that of Leases.Release and nothing is
// written — a holder that paused past its lease can never overwrite the work
// of the holder that came after it. The version guard applies as in Update,
// and so does its refusal of filled association fields: it takes no
// options, so clear them before writing.
func (ls *Leases[T]) Update(ctx context.Context, e *T, l *Lease) error {
	r := ls.r
	return r.writeWithLease(ctx, e, l, "Leases.Update", func(ctx context.Context, e *T) error { return r.Update(ctx, e) })
}

// Delete deletes e with Repository.Delete and ends the lease, in one
// transaction, refusing like Leases.Update.
func (ls *Leases[T]) Delete(ctx context.Context, e *T, l *Lease) error {
	r := ls.r
	return r.writeWithLease(ctx, e, l, "Leases.Delete", func(ctx context.Context, e *T) error { return r.Delete(ctx, e) })
}

// Sweep deletes the lease rows of records of this table that no longer
// exist and whose lease is over, and returns how many. The rows of existing
// records are kept, released or expired, so their fencing counters keep
// growing; expired leases need no cleaning, the next Leases.Acquire takes them
// over. Leases.Sweep compares every lease row of the table with the table's keys:
// run it now and then, not on every request.
func (ls *Leases[T]) Sweep(ctx context.Context) (int64, error) {
	r := ls.r
	if err := r.needLeases("Leases.Sweep"); err != nil {
		return 0, err
	}
	if r.m.leases.row != nil {
		return 0, nil // a lease in the record's row goes with the record
	}
	n, err := r.st.ExecResult(ctx, r.m.leases.sweep, []any{r.m.table})
	if err != nil {
		return 0, fmt.Errorf("%s: Leases.Sweep: %w", r.m.table, err)
	}
	return n, nil
}

// ReleaseOwnerLeases ends every unexpired lease owner holds, on every table of db
// (a session ended, a worker shut down), and returns how many it ended.
// Leases of other owners are untouched. Inside RunInTx it joins the
// transaction.
func ReleaseOwnerLeases(ctx context.Context, db *gorm.DB, owner string) (int64, error) {
	s, err := store.Of(db, "ReleaseOwnerLeases")
	if err != nil {
		return 0, err
	}
	if owner == "" {
		return 0, locking.Invalid("ReleaseOwnerLeases: owner is empty")
	}
	var n int64
	if !rowLeasesOnly(s) {
		if n, err = s.ExecResult(ctx, boundStmt(db, s.Caps, strings.ReplaceAll(releaseOwnerSQL, "NOW", s.Caps.NowMillis)), []any{owner}); err != nil {
			return 0, fmt.Errorf("ReleaseOwnerLeases: %w", err)
		}
	}
	// The tables whose leases live in their rows.
	for _, st := range rowLeaseReleases(s.SQLDB) {
		k, err := s.ExecResult(ctx, st, []any{owner})
		if err != nil {
			return n, fmt.Errorf("ReleaseOwnerLeases: %w", err)
		}
		n += k
	}
	return n, nil
}
