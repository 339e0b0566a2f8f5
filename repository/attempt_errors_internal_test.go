package repository

import (
	"fmt"
	"testing"

	"github.com/gormlock/gormlock/locking"
)

// sqlStateError is a server error carrying a SQLSTATE, as pgconn.PgError
// does (locking.Code reads it through its SQLState method).
type sqlStateError string

func (e sqlStateError) Error() string    { return "ERROR: SQLSTATE " + string(e) }
func (e sqlStateError) SQLState() string { return string(e) }

// An attempt whose transaction PostgreSQL aborted by refusing a statement
// pgx had prepared (a pooler in transaction mode) applied nothing and runs
// again; the same refusal with an unknown outcome, or a plan change, does
// not.
func TestAttemptRefusedByPreparedStatementRunsAgain(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{sqlStateError("26000"), true},
		{sqlStateError("42P05"), true},
		{fmt.Errorf("accounts: Get id=1: %w", sqlStateError("42P05")), true},
		{locking.Unknown(sqlStateError("26000")), false},
		{sqlStateError("0A000"), false}, // also permanent errors: not retried
		{sqlStateError("42P01"), false},
		{locking.Classify(sqlStateError("40P01")), true}, // a deadlock, as before
		{&abortError{sqlStateError("26000")}, false},
	}
	for _, c := range cases {
		if got := isLockRetryable(c.err); got != c.want {
			t.Errorf("isLockRetryable(%v) = %v, want %v", c.err, got, c.want)
		}
		if got := outcomeOf(c.err) == AttemptAborted; got != c.want {
			t.Errorf("outcomeOf(%v) = %v; aborted: want %v", c.err, outcomeOf(c.err), c.want)
		}
	}
}
