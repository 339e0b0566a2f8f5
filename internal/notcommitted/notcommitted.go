// Package notcommitted holds the errors database drivers return for a
// COMMIT the server answered by rolling the transaction back, such as pgx's
// ErrTxCommitRollback. gormlock's own packages import no driver; the
// openers under opendb/ register their driver's errors here, so that
// locking.ClassifyCommit reports such a COMMIT as definitely not committed.
// Without the registration it is reported as an unknown outcome, which is
// never wrong, only less precise.
package notcommitted

import (
	"errors"
	"sync"
)

var (
	mu   sync.RWMutex
	errs []error
)

// Register adds err, a sentinel a driver returns for a COMMIT that rolled
// back. Registering the same error again changes nothing.
func Register(err error) {
	mu.Lock()
	defer mu.Unlock()
	for _, e := range errs {
		if e == err {
			return
		}
	}
	errs = append(errs, err)
}

// Is reports whether err matches a registered error.
func Is(err error) bool {
	mu.RLock()
	defer mu.RUnlock()
	for _, e := range errs {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
