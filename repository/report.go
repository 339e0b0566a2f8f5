package repository

import (
	"context"
	"fmt"

	"github.com/gormlock/gormlock/locking"
)

// MutateReport says what one Mutate, Upsert or MutateRowLocked call did: how
// many attempts it ran and how many of them held the row lock. Get it with
// the Report option, or for every call with WithMutateHook.
type MutateReport struct {
	Table string // the repository's table
	ID    any    // the record's key, as given (normalised)
	Op    string // "mutate", "upsert" or "mutateRowLocked"
	// Attempts is how many attempts ran, the first included (0 when the
	// call failed before its first read, e.g. waiting for its turn).
	Attempts int
	// Locked is how many of them ran with the row locked: all of them for
	// MutateRowLocked; for Mutate and Upsert, those after an attempt lost a
	// race, or while the record was hot.
	Locked int
	// Hot: the call started locked because the record was hot.
	Hot bool
	// Escalated: an attempt lost a race and the call took the row lock for
	// the next one.
	Escalated bool
	// Waited: a locked attempt had to wait for another transaction's lock.
	Waited bool
	// Released: a locked attempt's fn held the row lock longer than 200 ms,
	// so its transaction was rolled back to release the lock (fn may have
	// been waiting for it through another connection), and the call went
	// on optimistic (see WithAdaptive).
	Released bool
	// Err is the call's error (nil on success).
	Err error
}

// String is a one-line summary for logs.
func (m MutateReport) String() string {
	s := fmt.Sprintf("%s %s id=%v: %d attempts, %d locked", m.Op, m.Table, m.ID, m.Attempts, m.Locked)
	if m.Hot {
		s += ", hot"
	}
	if m.Escalated {
		s += ", escalated"
	}
	if m.Waited {
		s += ", waited for a lock"
	}
	if m.Released {
		s += ", released its lock"
	}
	if m.Err != nil {
		s += ": " + m.Err.Error()
	}
	return s
}

// Report stores in *rep what the call did (see MutateReport) when it
// returns.
func Report(rep *MutateReport) MutateOption {
	return mutateFunc(func(c *mutateConfig) error {
		if rep == nil {
			return locking.Invalid("Report: nil pointer")
		}
		c.report = rep
		return nil
	})
}

// WithMutateHook calls hook after every Mutate, Upsert and MutateRowLocked call
// of the Repository, with what it did: for metrics (attempts, escalations,
// lock waits). hook runs on the caller's goroutine before the call returns;
// keep it quick.
func WithMutateHook(hook func(ctx context.Context, rep MutateReport)) Option {
	return func(o *options) error {
		if hook == nil {
			return locking.Invalid("WithMutateHook: nil hook")
		}
		o.mutateHook = hook
		return nil
	}
}

// finish completes rep with err, stores it where the call's options asked,
// calls the repository's hook and tells the Observer that call ended.
func (r *Repository[T]) finish(ctx context.Context, call Call, cfg mutateConfig, rep *MutateReport, err error) {
	rep.Err = err
	if cfg.attempts != nil {
		*cfg.attempts = rep.Attempts
	}
	if cfg.report != nil {
		*cfg.report = *rep
	}
	if r.mutateHook != nil {
		r.mutateHook(ctx, *rep)
	}
	r.endCall(ctx, call, rep, err)
}
