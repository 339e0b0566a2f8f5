package repository

import (
	"fmt"
	"strings"

	"github.com/gormlock/gormlock/locking"
)

// StaleError is the error of a stale write that had the caller's entity —
// Update, UpdateMany (one per stale record, inside the *locking.BatchError),
// Delete, the write of Mutate and Upsert — with what the caller needs to
// resolve the conflict: the record as it is now, read once, only because
// the write was stale, and the fields that differ. Get it with errors.As:
//
//	var se *repository.StaleError[Product]
//	if errors.As(err, &se) { ... se.Current, se.Fields ... }
//
// It wraps the *locking.StaleDataError (Unwrap), so errors.Is(err,
// locking.ErrStaleData), errors.As to *locking.StaleDataError and
// locking.ErrVersionMissing match as for any stale write. A model Get reads
// through GORM (see Find) gives the bare *locking.StaleDataError.
//
// To resolve, either apply the user's change again to Current and write
// that (it holds the version to write at), or show the user Fields and let
// them choose. docs/choosing-a-mode.md shows both.
type StaleError[T any] struct {
	// Stale is the version mismatch: the version the write carried and the
	// record's.
	Stale *locking.StaleDataError
	// Current is the record when the write failed, deleted or not; nil for
	// a write of Mutate that met a changed unversioned field (the attempt
	// is retried from a fresh read; this error comes back only when the
	// attempts run out).
	Current *T
	// Fields names, in the model's order, the fields Update writes whose
	// values differ between the caller's entity and Current; for a Mutate
	// write whose version matched (Stale.Expected == Stale.Actual), the
	// unversioned fields fn changed that another writer changed first.
	Fields []string
}

// Error implements error.
func (e *StaleError[T]) Error() string {
	s := e.Stale
	switch {
	case s.Expected == s.Actual:
		return fmt.Sprintf("gormlock: stale data: %s %s id=%v: %s changed since it was read (version %d unchanged)",
			s.Op, s.Table, s.ID, strings.Join(e.Fields, ", "), s.Actual)
	case len(e.Fields) > 0:
		return fmt.Sprintf("%v; differing fields: %s", s, strings.Join(e.Fields, ", "))
	}
	return s.Error()
}

// Unwrap returns the *locking.StaleDataError.
func (e *StaleError[T]) Unwrap() error { return e.Stale }
