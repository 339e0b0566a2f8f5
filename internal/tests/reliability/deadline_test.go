package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

// deadlineWrites is how many writes each deadline gets: Apply and Update
// in turn.
const deadlineWrites = 20

// A write outside a transaction whose context has a short deadline, blocked
// on a row another transaction holds, gives a definite answer: the
// database's own lock timeout, derived from the deadline with a margin for
// the answer to come back, ends the wait before the deadline — not applied,
// ErrLockTimeout. None is ever applied after the lock is let go.
func TestShortDeadlinesGiveDefiniteAnswers(t *testing.T) {
	for _, d := range []string{"postgres", "mariadb"} {
		t.Run(d, func(t *testing.T) {
			db := testdb.Open(t, d)
			accounts, err := repository.New[fixtures.Account](db)
			require.NoError(t, err)
			ctx := context.Background()
			a := &fixtures.Account{Owner: "deadline", Balance: 0}
			require.NoError(t, accounts.Create(ctx, a))

			// Another transaction holds the row until the end.
			locked := make(chan struct{})
			release := make(chan struct{})
			holder := make(chan error, 1)
			go func() {
				holder <- repository.RunInTx(ctx, db, func(ctx context.Context) error {
					if _, err := accounts.LockRow(ctx, a.ID); err != nil {
						return err
					}
					close(locked)
					<-release
					return nil
				})
			}()
			<-locked
			released := false
			defer func() {
				// A failed assertion still lets the row go, so that the
				// database can be dropped.
				if !released {
					close(release)
					<-holder
				}
			}()

			report := ""
			for _, deadline := range []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 300 * time.Millisecond} {
				var timeouts, unknown, notSent, other int
				for i := range deadlineWrites {
					cctx, cancel := context.WithTimeout(ctx, deadline)
					var err error
					if i%2 == 0 {
						_, err = accounts.Apply(cctx, a.ID, []repository.Change{repository.Add("Balance", 1)})
					} else {
						e := *a
						e.Balance = 99
						err = accounts.Update(cctx, &e)
					}
					cancel()
					switch {
					case errors.Is(err, locking.ErrLockTimeout) && errors.Is(err, context.DeadlineExceeded):
						timeouts++
					case errors.Is(err, locking.ErrCommitUnknown):
						unknown++
					case err != nil && errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, locking.ErrLockTimeout):
						// On a loaded machine the deadline can pass
						// before the write is sent (waiting for a
						// connection, or setting the lock timeout): the
						// context's error alone, not applied — as
						// definite as a lock timeout.
						notSent++
					default:
						other++
						t.Logf("%v: %v", deadline, err)
					}
				}
				report += fmt.Sprintf(" %v: %d lock timeout, %d not sent, %d unknown, %d other;", deadline, timeouts, notSent, unknown, other)
				require.Zero(t, other, "every write either timed out on the lock, was not sent, or is unknown")
			}
			released = true
			close(release)
			require.NoError(t, <-holder)
			t.Logf("%s, %d writes per deadline:%s", d, deadlineWrites, report)

			// Whatever the answers said, none was applied: the lock
			// was held for all of them.
			time.Sleep(200 * time.Millisecond)
			got, err := accounts.Get(ctx, a.ID)
			require.NoError(t, err)
			require.Zero(t, got.Balance, "a write blocked past its deadline was applied")
		})
	}
}
