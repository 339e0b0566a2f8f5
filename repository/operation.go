package repository

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/store"
	"github.com/gormlock/gormlock/locking"
)

// Exactly-once writes.
//
// A write whose outcome is unknown (locking.ErrCommitUnknown) cannot simply
// be sent again: if the first one was applied, the second applies the
// change twice. A write made with an operation key (OpKey) records the key
// in OperationTable in the same transaction as the write, so the key is
// there exactly when the write was applied. Repeating the call with the
// same key finds it and returns the first outcome without writing again,
// and LookupOperation answers "was it applied?" — Stripe's idempotency
// keys, in the database the records live in.

// OperationTable is the table operation keys are recorded in, created by
// the migrations (version 2 of package migrations).
const OperationTable = "gormlock_operations"

// DefaultOperationRetention is how long an operation key is remembered
// unless WithOperationRetention says otherwise: a repeat within that time
// returns the first outcome; after it, the key names a new operation.
// Expired keys stay in the table until PurgeOperations deletes them.
const DefaultOperationRetention = 24 * time.Hour

// MaxOperationKeyLen is the longest operation key, in bytes.
const MaxOperationKeyLen = 255

// OperationKey names one logical write so that repeating it (after an
// unknown outcome, a timeout, a client's retry) applies it at most once.
// Make one with OpKey; it is a WriteOption, a MutateOption and an
// ApplyOption.
type OperationKey struct {
	key, fingerprint string
}

// OpKey returns the operation key key for a write. Use a new random key
// (a UUID) per logical operation, and the same key for every retry of it.
// A key is 1 to MaxOperationKeyLen bytes of valid UTF-8 without NUL bytes;
// another key is refused with an error matching locking.ErrInvalidArgument
// by the call it is given to.
//
// A key is bound to its first use: the table, the record, the kind of write
// (create, update, delete, force-increment, mutate, upsert, apply,
// update-many) and the
// fingerprint. Reusing it for another write is an error matching
// locking.ErrOperationKeyReused (and locking.ErrInvalidArgument) that names
// the first.
//
// A call repeated with the key of an applied one writes nothing and answers
// at once from the key: applied, with the record as it is now. When the
// record has been deleted (or soft-deleted) since, there is none to show:
// the call returns a *locking.RecordGoneError (matching
// locking.ErrRecordGone, and no other sentinel), which says the operation
// was applied and the version it gave the record. A repeated Delete
// returns nil: the record being gone is its outcome.
func OpKey(key string) OperationKey { return OperationKey{key: key} }

// WithFingerprint returns k with a fingerprint: text that identifies the
// request the key was sent with (the HTTP adapter uses a hash of the
// method, path and body), so that a key reused with another request is
// refused instead of answered with the first request's outcome.
func (k OperationKey) WithFingerprint(fp string) OperationKey {
	k.fingerprint = fp
	return k
}

// Key returns the key.
func (k OperationKey) Key() string { return k.key }

// Fingerprint returns the fingerprint (see WithFingerprint).
func (k OperationKey) Fingerprint() string { return k.fingerprint }

func (k OperationKey) validate() error {
	switch {
	case k.key == "":
		return locking.Invalid("operation key is empty")
	case len(k.key) > MaxOperationKeyLen:
		return locking.Invalid("operation key is %d bytes, more than %d", len(k.key), MaxOperationKeyLen)
	case !utf8.ValidString(k.key) || strings.ContainsRune(k.key, 0):
		return locking.Invalid("operation key %q is not UTF-8 text without NUL bytes", k.key)
	case len(k.fingerprint) > 1024 || !utf8.ValidString(k.fingerprint) || strings.ContainsRune(k.fingerprint, 0):
		return locking.Invalid("operation key %q: the fingerprint must be at most 1024 bytes of UTF-8 without NUL bytes", k.key)
	}
	return nil
}

func (k OperationKey) applyWrite(c *writeConfig) error {
	if err := k.validate(); err != nil {
		return err
	}
	c.op = &k
	return nil
}

func (k OperationKey) applyMutate(c *mutateConfig) error {
	if err := k.validate(); err != nil {
		return err
	}
	c.op = &k
	return nil
}

func (k OperationKey) applyApply(c *applyConfig) error {
	if err := k.validate(); err != nil {
		return err
	}
	c.op = &k
	return nil
}

func (k OperationKey) applyLockedMutate(c *mutateConfig) error { return k.applyMutate(c) }
func (k OperationKey) applyUpdate(c *writeConfig) error        { return k.applyWrite(c) }
func (k OperationKey) applyDelete(c *writeConfig) error        { return k.applyWrite(c) }

// WithOperationRetention sets how long the repository's operation keys are
// remembered (DefaultOperationRetention otherwise). It must be positive, or
// New fails with an error matching locking.ErrInvalidArgument.
func WithOperationRetention(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return locking.Invalid("WithOperationRetention: retention must be positive, got %v", d)
		}
		o.opRetention = d
		return nil
	}
}

// Operation is the record of a write made with an operation key: it was
// applied, to this record, giving it this version.
type Operation struct {
	Key       string
	Table     string // the record's table
	RecordKey string // the record's primary key, as text
	Kind      string // create, update, delete, force-increment, mutate, upsert, apply or update-many
	Version   int64  // the version the write gave the record; 0 for a delete
	// Fingerprint is what the caller gave with the key (see
	// OperationKey.WithFingerprint).
	Fingerprint string
	At          time.Time // when it was applied, by the database's clock
	ExpiresAt   time.Time // when the key is forgotten
}

// opSQL holds the statements on OperationTable for one dialect.
type opSQL struct {
	insert, purge, deleteExpired store.Stmt
	lookup                       string
}

var opSQLs sync.Map // dialect name -> *opSQL

// ops is a store with the operation table's statements.
type ops struct{ store.Store }

// ops returns the repository's store as ops.
func (r *Repository[T]) ops() ops { return ops{r.st} }

// opStatements returns the operation statements of s's dialect.
func (s ops) opStatements() *opSQL {
	if q, ok := opSQLs.Load(s.Caps.Name); ok {
		return q.(*opSQL)
	}
	now := s.Caps.NowMillis
	w := func(sql string) store.Stmt { return boundStmt(s.Gorm, s.Caps, strings.ReplaceAll(sql, "NOW", now)) }
	q := &opSQL{
		insert: w(`INSERT INTO ` + OperationTable + ` (op_key, resource, record_key, kind, version, fingerprint, created_ms, expires_ms)
SELECT ?, ?, ?, ?, ?, ?, c.now_ms, c.now_ms + ? FROM (SELECT NOW AS now_ms) AS c WHERE 1 = 1{bound}`),
		purge:         w(`DELETE FROM ` + OperationTable + ` WHERE expires_ms <= NOW{bound}`),
		deleteExpired: w(`DELETE FROM ` + OperationTable + ` WHERE op_key = ? AND expires_ms <= NOW{bound}`),
		lookup: rebind(s.Gorm, strings.ReplaceAll(`SELECT resource, record_key, kind, version, fingerprint, created_ms, expires_ms,
CASE WHEN expires_ms <= NOW THEN 1 ELSE 0 END FROM `+OperationTable+` WHERE op_key = ?`, "NOW", now)),
	}
	opSQLs.Store(s.Caps.Name, q)
	return q
}

// errKeyTaken marks the operation key's insert failing on the key: another
// call recorded it first.
var errKeyTaken = errors.New("operation key already recorded")

// recordOp inserts op into OperationTable in the transaction of ctx.
func (s ops) recordOp(ctx context.Context, op Operation, retention time.Duration) error {
	_, err := s.ExecResult(ctx, s.opStatements().insert,
		[]any{op.Key, op.Table, op.RecordKey, op.Kind, op.Version, op.Fingerprint, retention.Milliseconds()})
	switch {
	case errors.Is(err, locking.ErrAlreadyExists):
		return fmt.Errorf("%w: %w", errKeyTaken, err)
	case err != nil:
		return fmt.Errorf("recording operation %q: %w", op.Key, err)
	}
	return nil
}

// lookupOp reads the record of key (in the transaction of ctx, if any); nil
// when there is none. expired reports a record past its retention.
func (s ops) lookupOp(ctx context.Context, key string) (op *Operation, expired bool, err error) {
	db, _ := s.Conn(ctx)
	var o Operation
	var created, expires, exp int64
	err = s.ScanSQL(ctx, db.Statement.ConnPool, s.opStatements().lookup, []any{key},
		&o.Table, &o.RecordKey, &o.Kind, &o.Version, &o.Fingerprint, &created, &expires, &exp)
	switch {
	case store.IsNoRows(err):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("reading operation %q: %w", key, locking.Classify(err))
	}
	o.Key, o.At, o.ExpiresAt = key, millisTime(created), millisTime(expires)
	return &o, exp == 1, nil
}

// opWrite is the write of an operation-keyed call. It runs in the
// transaction of its ctx and returns the record's key as text and the
// version it gave the record, to be recorded.
type opWrite func(ctx context.Context) (recordKey string, version int64, err error)

// runOp runs write and records the operation in one transaction (a
// savepoint of the caller's when ctx carries one). When the key was
// recorded before — the operation was applied already — write's effects are
// rolled back (if it got that far) and the first operation's record is
// returned instead. recordKey is the record's key as text, or "" when only
// write knows it (a key the database assigns). A key recorded for another
// write is an error matching locking.ErrInvalidArgument.
func (r *Repository[T]) runOp(ctx context.Context, k OperationKey, kind, recordKey string, write opWrite) (*Operation, error) {
	for try := 0; ; try++ {
		body := func(ctx context.Context) error {
			rk, v, err := write(ctx)
			if err != nil {
				return err
			}
			return r.ops().recordOp(ctx, Operation{Key: k.key, Table: r.m.table, RecordKey: rk, Kind: kind, Version: v, Fingerprint: k.fingerprint}, r.opRetention)
		}
		err := r.st.SavepointOrRunTx(ctx, r.m.table+": "+kind, body)
		if err == nil {
			return nil, nil
		}
		// A repeat of an applied operation fails on the key, or earlier,
		// on what the first one did: the version moved on (stale), the
		// record is gone (not found) or already there (already exists),
		// Apply's condition no longer holds, or a lease was taken since.
		if !errors.Is(err, errKeyTaken) && !errors.Is(err, locking.ErrStaleData) &&
			!errors.Is(err, locking.ErrNotFound) && !errors.Is(err, locking.ErrAlreadyExists) &&
			!errors.Is(err, locking.ErrConditionFailed) && !errors.Is(err, locking.ErrLeased) {
			return nil, err
		}
		prior, expired, lerr := r.ops().lookupOp(ctx, k.key)
		switch {
		case lerr != nil:
			return nil, errors.Join(err, lerr)
		case prior == nil:
			return nil, err // not a repeat: the write's own failure
		case expired && try == 0:
			// Forgotten: the key names a new operation. Drop the old
			// record and run once more.
			if _, derr := r.st.ExecResult(ctx, r.ops().opStatements().deleteExpired, []any{k.key}); derr != nil {
				return nil, errors.Join(err, derr)
			}
			continue
		}
		if prior.Table != r.m.table || prior.Kind != kind || prior.Fingerprint != k.fingerprint ||
			(recordKey != "" && prior.RecordKey != recordKey) {
			return nil, fmt.Errorf("%w: %w: operation key %q was used for %s of %s id=%s; a key names one operation",
				locking.ErrInvalidArgument, locking.ErrOperationKeyReused, k.key, prior.Kind, prior.Table, prior.RecordKey)
		}
		return prior, nil
	}
}

// LookupOperation tells whether the write made with operation key key was
// applied: its record, or nil when it was not (and, once LookupOperation
// has returned, never will be: a write that holds the key uncommitted is
// waited for, and a write that has not recorded it yet has no COMMIT on
// its way, since gormlock records the key before committing). Use it to
// resolve a locking.ErrCommitUnknown — or simply repeat the call with the
// same key, which applies it if it was not.
//
// A record past its retention is still reported (ExpiresAt says so) until
// PurgeOperations deletes it. ctx governs the wait.
func LookupOperation(ctx context.Context, db *gorm.DB, key string) (*Operation, error) {
	s, err := store.Of(db, "LookupOperation")
	if err != nil {
		return nil, err
	}
	return ops{s}.lookupOperation(ctx, key)
}

// lookupOperation is LookupOperation on s.
func (s ops) lookupOperation(ctx context.Context, key string) (*Operation, error) {
	k := OpKey(key)
	if err := k.validate(); err != nil {
		return nil, err
	}
	// Insert the key and roll back: the insert waits for a transaction
	// holding it, and fails when it was committed.
	probe := func(ctx context.Context) error {
		err := s.recordOp(ctx, Operation{Key: key, Table: "-", RecordKey: "-", Kind: "lookup"}, time.Millisecond)
		if err == nil {
			return errProbed
		}
		return err
	}
	err := s.SavepointOrRunTx(ctx, "LookupOperation", probe)
	switch {
	case errors.Is(err, errProbed):
		return nil, nil
	case !errors.Is(err, errKeyTaken):
		return nil, fmt.Errorf("LookupOperation %q: %w", key, err)
	}
	op, _, err := s.lookupOp(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("LookupOperation: %w", err)
	}
	return op, nil
}

var errProbed = errors.New("probe inserted")

// PurgeOperations deletes the operation records past their retention, on
// every table of db, and returns how many. Run it now and then (hourly,
// daily): the table holds one row per operation-keyed write made within the
// retention, and the expired rows until they are purged.
func PurgeOperations(ctx context.Context, db *gorm.DB) (int64, error) {
	s, err := store.Of(db, "PurgeOperations")
	if err != nil {
		return 0, err
	}
	n, err := ops{s}.ExecResult(ctx, ops{s}.opStatements().purge, nil)
	if err != nil {
		return 0, fmt.Errorf("PurgeOperations: %w", err)
	}
	return n, nil
}
