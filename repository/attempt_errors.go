package repository

import (
	"errors"

	"github.com/gormlock/gormlock/internal/store"
	"github.com/gormlock/gormlock/locking"
)

// What a failed attempt of a call that retries (the Mutate family, Apply)
// means: the caller's own error (never retried), a lost race (retried from a
// fresh read), or an attempt the database aborted.

// abortError marks an error returned by the caller's function, so that it is
// never mistaken for a conflict and retried.
type abortError struct{ err error }

func (e *abortError) Error() string { return e.err.Error() }
func (e *abortError) Unwrap() error { return e.err }

// asAbort returns the abortError err is or wraps: the caller's own error,
// even where a transaction's end or an operation key wrapped it again.
func asAbort(err error) (*abortError, bool) {
	var ae *abortError
	ok := errors.As(err, &ae)
	return ae, ok
}

// conflictError marks a lost race other than a stale update (another caller
// created the record first, or deleted it) as worth another attempt. It is
// stale data too: someone else wrote first. It matches locking.ErrStaleData
// and the original error.
type conflictError struct{ err error }

func (e *conflictError) Error() string {
	return "gormlock: stale data: lost a race with another writer: " + e.err.Error()
}
func (e *conflictError) Unwrap() []error { return []error{locking.ErrStaleData, e.err} }

// isConflict reports whether an attempt lost a race and may be re-run. An
// error from the caller's function is never retried, whatever it wraps.
func isConflict(err error) bool {
	if _, ok := asAbort(err); ok {
		return false
	}
	return errors.Is(err, locking.ErrStaleData)
}

// isConflictOrAborted is isConflict, and also a deadlock or serialization
// failure the database broke by aborting the attempt (MySQL's 1213; on a
// Galera cluster, also a conflict with a write on another node): not
// applied, and worth another attempt from a fresh read — outside a
// transaction only, since inside one it aborted the caller's transaction.
func isConflictOrAborted(err error) bool { return isConflict(err) || isLockRetryable(err) }

// isLockRetryable reports whether a locked read-modify-write may run again:
// the database broke a deadlock or a serialization conflict by aborting it,
// or PostgreSQL refused a statement pgx had prepared on the connection
// before running it (a pooler in transaction mode behind a connection in
// pgx's cache_statement mode: see store.PreparedStatementGone), which
// aborted the attempt's transaction. pgx dropped the statement from its
// cache: the next attempt prepares it again.
func isLockRetryable(err error) bool {
	if _, ok := asAbort(err); ok {
		return false
	}
	if errors.Is(err, locking.ErrCommitUnknown) {
		return false
	}
	return errors.Is(err, locking.ErrDeadlock) || errors.Is(err, locking.ErrSerialization) ||
		store.PreparedStatementGone(err)
}
