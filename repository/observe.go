package repository

import (
	"context"
	"errors"
	"time"

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/store"
	"github.com/gormlock/gormlock/locking"
)

// Observer is told what gormlock's calls decide, for metrics and traces:
// each Mutate, Upsert, MutateRowLocked and lease call as it starts and
// ends, each attempt of the Mutate family with its outcome, each wait for a
// lock, and each write whose outcome is unknown. Package
// github.com/gormlock/gormlock/otelgormlock implements it with
// OpenTelemetry; the library itself imports no telemetry package.
//
// Register an Observer for every Repository of a *gorm.DB with
// ObserverPlugin, or for one Repository with WithObserver. Without one,
// observing costs a nil check per call.
//
// The methods run on the calling goroutine, while the call waits for
// them: they must be quick, safe for concurrent use, and must not call
// back into gormlock. A wait or an unknown outcome is reported with the
// context of the call it happened in, which carries what StartCall
// returned.
type Observer interface {
	// StartCall is called when a Mutate, Upsert, MutateRowLocked or lease
	// call begins, once its arguments were checked and before any I/O.
	// The call goes on with the context it returns (a tracer's span in
	// it); return ctx to leave it as it is.
	StartCall(ctx context.Context, c Call) context.Context
	// Attempt is called after each attempt of a Mutate, Upsert or
	// MutateRowLocked call, with the context StartCall returned.
	Attempt(ctx context.Context, c Call, a Attempt)
	// EndCall is called as a call StartCall was told of returns, with
	// the context StartCall returned.
	EndCall(ctx context.Context, c Call, end CallEnd)
	// Wait is called after each wait for a lock (see WaitKind), whether
	// or not the call had to wait for it.
	Wait(ctx context.Context, w Wait)
	// UnknownOutcome is called for each write whose outcome is unknown
	// (locking.ErrCommitUnknown) when it happens: a statement outside a
	// transaction, or a COMMIT, sent when the connection broke or ctx
	// ended before the answer. A call with an operation key may still
	// find out and succeed (see OpKey); the write's outcome was unknown
	// all the same.
	UnknownOutcome(ctx context.Context, u UnknownOutcome)
}

// The operations an Observer is told of, as Call.Op and MutateReport.Op
// name them.
const (
	OpMutate          = "mutate"
	OpUpsert          = "upsert"
	OpMutateRowLocked = "mutateRowLocked"
	OpLeaseAcquire    = "leaseAcquire"
	OpLeaseRenew      = "leaseRenew"
	OpLeaseRelease    = "leaseRelease"
	OpLeaseUpdate     = "leaseUpdate"
	OpLeaseDelete     = "leaseDelete"
)

// Call is one call an Observer is told of.
type Call struct {
	// System is the database as OpenTelemetry's db.system.name names
	// it: "postgresql", "mysql", "mariadb" (Galera included) or "sqlite".
	System string
	Table  string    // the repository's table
	Op     string    // one of the Op constants
	ID     any       // the record's key, as given (normalised)
	Start  time.Time // when the call began
}

// Attempt is one attempt of a Mutate, Upsert or MutateRowLocked call: a
// read, the caller's change and a guarded write.
type Attempt struct {
	N       int  // 1 for the first attempt of the call
	Locked  bool // it ran with the row locked (see WithAdaptive)
	Outcome AttemptOutcome
	Err     error // the attempt's error; nil when it applied
}

// AttemptOutcome is how an attempt ended.
type AttemptOutcome uint8

// The outcomes of an attempt.
const (
	// AttemptApplied: the write applied (or, with an operation key, had
	// applied before).
	AttemptApplied AttemptOutcome = iota + 1
	// AttemptConflict: another writer won the race (locking.ErrStaleData:
	// the record changed, or another caller created it first or deleted
	// it). The next attempt re-reads.
	AttemptConflict
	// AttemptAborted: the database aborted the attempt to break a
	// deadlock or a serialization conflict (locking.ErrDeadlock,
	// locking.ErrSerialization), or PostgreSQL refused a statement pgx had
	// prepared on a connection a pooler in transaction mode shared
	// (SQLSTATE 26000, 42P05), which aborted the attempt's transaction.
	AttemptAborted
	// AttemptReleased: fn held the row lock longer than a locked attempt
	// allows, and its transaction was rolled back (MutateReport.Released).
	AttemptReleased
	// AttemptUnknown: the write's outcome is unknown
	// (locking.ErrCommitUnknown).
	AttemptUnknown
	// AttemptFailed: any other error, fn's included.
	AttemptFailed
)

// String returns the outcome's name: "applied", "conflict", "aborted",
// "released", "unknown" or "failed".
func (o AttemptOutcome) String() string {
	switch o {
	case AttemptApplied:
		return "applied"
	case AttemptConflict:
		return "conflict"
	case AttemptAborted:
		return "aborted"
	case AttemptReleased:
		return "released"
	case AttemptUnknown:
		return "unknown"
	case AttemptFailed:
		return "failed"
	}
	return "invalid"
}

// outcomeOf classifies the error of an attempt.
func outcomeOf(err error) AttemptOutcome {
	if _, ok := asAbort(err); ok {
		return AttemptFailed // fn's error, whatever it wraps
	}
	switch {
	case err == nil:
		return AttemptApplied
	case isLockReleased(err):
		return AttemptReleased
	case isConflict(err):
		return AttemptConflict
	case isLockRetryable(err):
		return AttemptAborted
	case errors.Is(err, locking.ErrCommitUnknown):
		return AttemptUnknown
	}
	return AttemptFailed
}

// CallEnd is how an observed call ended.
type CallEnd struct {
	Err error // the call's error, nil on success
	// Report is what a Mutate, Upsert or MutateRowLocked call did, as
	// Report and WithMutateHook give it; zero for lease calls.
	Report MutateReport
	// Lease is what a lease call did to its lease; LeaseNone for the
	// other calls.
	Lease LeaseEvent
}

// LeaseEvent is what a lease call did to, or learnt of, its lease.
type LeaseEvent uint8

// The lease events.
const (
	// LeaseNone: nothing to report.
	LeaseNone LeaseEvent = iota
	// LeaseGranted: Leases.Acquire took the lease.
	LeaseGranted
	// LeaseExpired: a call presenting a lease (Renew, Release, Update,
	// Delete) found it over, with nobody holding the record now
	// (locking.ErrLeaseExpired): it ran out, or was released.
	LeaseExpired
	// LeaseFenced: a call presenting a lease was refused because another
	// lease holds the record now, its successor's (a larger Fence), or
	// the token is not the lease's (locking.ErrLeased): the holder was
	// fenced off.
	LeaseFenced
)

// String returns the event's name: "none", "granted", "expired" or
// "fenced".
func (e LeaseEvent) String() string {
	switch e {
	case LeaseNone:
		return "none"
	case LeaseGranted:
		return "granted"
	case LeaseExpired:
		return "expired"
	case LeaseFenced:
		return "fenced"
	}
	return "invalid"
}

// leaseEventOf is the lease event of a call op that returned err.
func leaseEventOf(op string, err error) LeaseEvent {
	switch op {
	case OpLeaseAcquire:
		if err == nil {
			return LeaseGranted
		}
	case OpLeaseRenew, OpLeaseRelease, OpLeaseUpdate, OpLeaseDelete:
		switch {
		case errors.Is(err, locking.ErrLeaseExpired):
			return LeaseExpired
		case errors.Is(err, locking.ErrLeased):
			return LeaseFenced
		}
	}
	return LeaseNone
}

// Wait is one wait for a lock.
type Wait struct {
	Kind   WaitKind
	System string // as in Call
	// Table is the table of the repository whose call waited; "" for
	// a call that takes a *gorm.DB (RunInTx).
	Table    string
	Duration time.Duration // from asking for the lock to holding it, or giving up
	Err      error         // nil when the lock was taken
}

// WaitKind is the lock a Wait was for.
type WaitKind uint8

// The locks waited for.
const (
	// RowLockWait: a locked read (LockRow, LockRows, MutateRowLocked, a
	// locked attempt of Mutate or Upsert) on PostgreSQL, MySQL or
	// MariaDB, from asking for the row lock to holding it. On SQLite a
	// locked read in gormlock's own transaction holds the database's
	// write lock from BEGIN (that wait is a SQLiteGateWait); in an
	// application's transaction it is this wait, for the write lock.
	RowLockWait WaitKind = iota + 1
	// SQLiteGateWait: a write on SQLite, at the gate where gormlock's
	// writers queue for the database's write lock: a statement outside a
	// transaction, or a transaction's BEGIN (RunInTx, MutateRowLocked,
	// the locked attempts of Mutate).
	SQLiteGateWait
)

// String returns the kind's name: "row_lock" or "sqlite_gate".
func (k WaitKind) String() string {
	switch k {
	case RowLockWait:
		return "row_lock"
	case SQLiteGateWait:
		return "sqlite_gate"
	}
	return "invalid"
}

// UnknownOutcome is a write whose outcome is unknown.
type UnknownOutcome struct {
	System string // as in Call
	Table  string // as in Wait
	Err    error  // matches locking.ErrCommitUnknown
}

// WithObserver sets the Observer of the Repository's calls, in place of
// the one registered on db with ObserverPlugin; WithObserver(nil) observes
// nothing, whatever db has.
func WithObserver(o Observer) Option {
	return func(opts *options) error {
		opts.observer, opts.observerSet = o, true
		return nil
	}
}

// ObserverPlugin returns a GORM plugin that registers o for every
// Repository that New builds on the *gorm.DB afterwards (and on sessions
// of it), and for the calls that take a *gorm.DB (RunInTx,
// ReleaseOwnerLeases, ...), which are told of their waits and unknown
// outcomes:
//
//	if err := db.Use(repository.ObserverPlugin(obs)); err != nil {
//		log.Fatal(err)
//	}
//
// Register it before New: a Repository built earlier keeps the observer
// it had. WithObserver overrides it for one Repository. It registers no
// GORM callback, so gormlock's statements stay on their direct path (see
// WithCallbacks). Initialize, which db.Use calls, refuses a nil o with an
// error matching locking.ErrInvalidArgument; registering twice is GORM's
// gorm.ErrRegistered.
func ObserverPlugin(o Observer) gorm.Plugin { return &observerPlugin{obs: o} }

// observerPlugin is what ObserverPlugin registers.
type observerPlugin struct{ obs Observer }

// Name implements gorm.Plugin.
func (*observerPlugin) Name() string { return store.ObserverPluginName }

// Initialize implements gorm.Plugin.
func (p *observerPlugin) Initialize(*gorm.DB) error {
	if p.obs == nil {
		return locking.Invalid("ObserverPlugin: nil Observer")
	}
	return nil
}

// StoreObserver implements store.ObserverSource, for the calls that take a
// *gorm.DB.
func (p *observerPlugin) StoreObserver(system string) store.Observer {
	return storeObserver{obs: p.obs, system: system}
}

// observerOf returns the Observer registered on db with ObserverPlugin, or
// nil.
func observerOf(db *gorm.DB) Observer {
	if p, ok := db.Config.Plugins[store.ObserverPluginName].(*observerPlugin); ok {
		return p.obs
	}
	return nil
}

// storeObserver tells an Observer what a store saw, naming the system and
// the table.
type storeObserver struct {
	obs           Observer
	system, table string
}

// GateWait implements store.Observer.
func (s storeObserver) GateWait(ctx context.Context, d time.Duration, err error) {
	s.obs.Wait(ctx, Wait{Kind: SQLiteGateWait, System: s.system, Table: s.table, Duration: d, Err: err})
}

// UnknownOutcome implements store.Observer.
func (s storeObserver) UnknownOutcome(ctx context.Context, err error) {
	s.obs.UnknownOutcome(ctx, UnknownOutcome{System: s.system, Table: s.table, Err: err})
}

// observe sets up the Repository's Observer: o, or the one registered on
// db when New was given none.
func (r *Repository[T]) observe(db *gorm.DB, o options) {
	obs := o.observer
	if !o.observerSet {
		obs = observerOf(db)
	}
	r.st.Obs = nil
	if obs == nil {
		return
	}
	r.obs = obs
	r.system = store.SystemName(r.st.Caps)
	r.st.Obs = storeObserver{obs: obs, system: r.system, table: r.m.table}
}

// startCall tells the Observer that call op on record id begins, and
// returns the context the call goes on with. Without an Observer it
// returns ctx and a zero Call.
func (r *Repository[T]) startCall(ctx context.Context, op string, id any) (context.Context, Call) {
	if r.obs == nil {
		return ctx, Call{}
	}
	c := Call{System: r.system, Table: r.m.table, Op: op, ID: id, Start: time.Now()}
	return r.obs.StartCall(ctx, c), c
}

// endCall tells the Observer that call c, begun with startCall, returns
// err; rep is a Mutate family call's report, nil for a lease call.
func (r *Repository[T]) endCall(ctx context.Context, c Call, rep *MutateReport, err error) {
	if r.obs == nil {
		return
	}
	end := CallEnd{Err: err, Lease: leaseEventOf(c.Op, err)}
	if rep != nil {
		end.Report = *rep
	}
	r.obs.EndCall(ctx, c, end)
}

// attempted tells the Observer that attempt n of call c, locked or not,
// ended with err.
func (r *Repository[T]) attempted(ctx context.Context, c Call, n int, locked bool, err error) {
	if r.obs == nil {
		return
	}
	r.obs.Attempt(ctx, c, Attempt{N: n, Locked: locked, Outcome: outcomeOf(err), Err: err})
}

// obsNow returns the time now when the Repository has an Observer, and
// the zero time otherwise: the clock is read only for an Observer.
func (r *Repository[T]) obsNow() time.Time {
	if r.obs == nil {
		return time.Time{}
	}
	return time.Now()
}

// rowLockWait tells the Observer that a locked read that began at begin
// ended with err (lc classifies a lock error).
func (r *Repository[T]) rowLockWait(ctx context.Context, begin time.Time, lc lockConfig, err error) {
	if r.obs == nil {
		return
	}
	d := time.Since(begin)
	if err != nil {
		err = r.lockError(lc, err, nil)
	}
	r.obs.Wait(ctx, Wait{Kind: RowLockWait, System: r.system, Table: r.m.table, Duration: d, Err: err})
}

// observeLease tells the Observer that lease call op (OpLeaseAcquire, ...)
// on record id begins. It returns the context the call goes on with and
// the call, whose end the call defers with its error, which tells the
// Observer how it ended (a grant, an expiry, a fencing refusal):
//
//	ctx, oc := r.observeLease(ctx, OpLeaseAcquire, id)
//	defer func() { oc.end(err) }()
//
// Neither allocates, with an Observer or without.
func (r *Repository[T]) observeLease(ctx context.Context, op string, id any) (context.Context, observedCall) {
	if r.obs == nil {
		return ctx, observedCall{}
	}
	ctx, call := r.startCall(ctx, op, id)
	return ctx, observedCall{obs: r.obs, ctx: ctx, call: call}
}

// observedCall is a lease call the Observer was told of; zero without an
// Observer.
type observedCall struct {
	obs  Observer
	ctx  context.Context
	call Call
}

// end tells the Observer that the call returns err.
func (c observedCall) end(err error) {
	if c.obs != nil {
		c.obs.EndCall(c.ctx, c.call, CallEnd{Err: err, Lease: leaseEventOf(c.call.Op, err)})
	}
}
