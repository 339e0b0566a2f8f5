//go:build unix

package galera_test

import (
	"context"
	"errors"
	"testing"

	"github.com/gormlock/gormlock/internal/tests/fixtures"

	"github.com/stretchr/testify/require"

	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

// conflictOnOtherNode has node 2 commit balance = 200 on account 1 while a
// transaction on node 1 holds the row, and waits until node 1 has applied
// it: from then on node 1's transaction is aborted (brute-force), whatever
// it sends next gets 1213.
func conflictOnOtherNode(t *testing.T, n *nodes, b *repository.Repository[fixtures.Account]) {
	t.Helper()
	ctx := context.Background()
	// Outside any transaction, and not blocked: node 1's row lock is
	// node 1's only.
	_, err := b.Mutate(ctx, int64(1), func(a *fixtures.Account) error {
		a.Balance = 200
		return nil
	})
	require.NoError(t, err, "node 2's write")
	require.EqualValues(t, 200, readInt(t, causal(t, n.dsns[0]), "SELECT balance FROM accounts WHERE id = 1"))
}

// TestRunInTxDeadlockIsNotApplied shows RunInTx on a cluster: a
// transaction on node 1 writes a record while node 2 commits a conflicting
// write. Whether the 1213 comes at COMMIT or on a later statement of the
// transaction — one that fn even ignores — RunInTx returns an error
// matching locking.ErrDeadlock (not applied, never ErrCommitUnknown), and
// the record holds node 2's value only. gormlock never sends the COMMIT
// that would answer OK for the aborted transaction
// (TestRawCommitAfterDeadlockAnswersOK).
func TestRunInTxDeadlockIsNotApplied(t *testing.T) {
	for _, when := range []string{"at COMMIT", "on a statement fn ignores", "on a statement fn returns"} {
		t.Run(when, func(t *testing.T) {
			n := openNodes(t)
			n.seed(t, 2)
			repos := n.accounts(t)
			a, b := repos[0], repos[1]
			ctx := context.Background()
			var stmtErr error
			err := repository.RunInTx(ctx, n.dbs[0], func(ctx context.Context) error {
				acct, err := a.Get(ctx, int64(1))
				if err != nil {
					return err
				}
				acct.Balance = 100
				if err := a.Update(ctx, acct); err != nil {
					return err
				}
				conflictOnOtherNode(t, n, b)
				if when == "at COMMIT" {
					return nil
				}
				// Another write of the aborted transaction: 1213.
				other, err := a.Get(ctx, int64(2))
				if err == nil {
					other.Balance = 7
					err = a.Update(ctx, other)
				}
				stmtErr = err
				if when == "on a statement fn ignores" {
					return nil
				}
				return err
			})
			require.ErrorIs(t, err, locking.ErrDeadlock, "RunInTx %s", when)
			require.NotErrorIs(t, err, locking.ErrCommitUnknown)
			require.True(t, locking.IsRetryable(err))
			if when != "at COMMIT" {
				require.ErrorIs(t, stmtErr, locking.ErrDeadlock, "the statement after the abort")
				require.NotErrorIs(t, stmtErr, locking.ErrStaleData, "an aborted transaction is not stale data")
			}
			got := n.balances(t)
			require.Equal(t, map[int64]int64{1: 200, 2: 0}, got, "node 2's write only; nothing of node 1's transaction")
		})
	}
}

// TestRunInTxRetriedAcrossNodes retries a RunInTx that lost to another
// node (locking.OnError with locking.IsRetryable, from a fresh read): the
// second attempt applies, and the record holds both writes.
func TestRunInTxRetriedAcrossNodes(t *testing.T) {
	n := openNodes(t)
	n.seed(t, 1)
	repos := n.accounts(t)
	ctx := context.Background()
	attempts := 0
	err := locking.OnError(ctx, locking.DefaultRetryPolicy(), locking.IsRetryable, func(ctx context.Context) error {
		attempts++
		return repository.RunInTx(ctx, n.dbs[0], func(ctx context.Context) error {
			acct, err := repos[0].Get(ctx, int64(1))
			if err != nil {
				return err
			}
			acct.Balance += 1
			if err := repos[0].Update(ctx, acct); err != nil {
				return err
			}
			if attempts == 1 {
				conflictOnOtherNode(t, n, repos[1])
			}
			return nil
		})
	})
	require.NoError(t, err)
	require.Equal(t, 2, attempts)
	require.Equal(t, map[int64]int64{1: 201}, n.balances(t), "node 2's 200, then node 1's +1 from a fresh read")
}

// TestDeadlockIsRetryableNotStale pins the classification of a 1213 from
// the cluster: not applied and retryable, and neither stale data nor an
// unknown outcome.
func TestDeadlockIsRetryableNotStale(t *testing.T) {
	n := openNodes(t)
	n.seed(t, 1)
	repos := n.accounts(t)
	ctx := context.Background()
	err := repository.RunInTx(ctx, n.dbs[0], func(ctx context.Context) error {
		acct, err := repos[0].LockRow(ctx, int64(1))
		if err != nil {
			return err
		}
		conflictOnOtherNode(t, n, repos[1])
		acct.Balance = 5
		return repos[0].Update(ctx, acct)
	})
	var de *locking.DatabaseError
	require.True(t, errors.As(err, &de), "%v", err)
	require.Equal(t, "1213", de.Code)
	require.Equal(t, uint16(erDeadlock), errNumber(err), "the driver's error is kept")
	require.ErrorIs(t, err, locking.ErrDeadlock)
	require.NotErrorIs(t, err, locking.ErrStaleData)
	require.NotErrorIs(t, err, locking.ErrCommitUnknown)
	require.Equal(t, map[int64]int64{1: 200}, n.balances(t))
}

// TestRunInTxEndingWithAReadAcrossNodes runs, from all three nodes, a
// transaction whose last statement before COMMIT is a read: Get, Update,
// Get. Galera may abort the transaction after the Update; a prepared
// SELECT is then not told — it runs outside the rolled-back transaction —
// and the COMMIT answers OK (TestRawPreparedReadAfterAbort). RunInTx asks
// whether the transaction is still open before committing, so every
// acknowledged increment is there.
func TestRunInTxEndingWithAReadAcrossNodes(t *testing.T) {
	workers, calls := sizes()
	n := openNodes(t)
	n.seed(t, 1)
	repos := n.accounts(t)
	before := aborts(t, rawNodes(t, n.dsns))
	n.log.reset()
	y := newTally()
	spread(t, workers, func(ctx context.Context, _, node int) error {
		for range calls {
			tries := 0
			err := locking.OnError(ctx, retryPolicy, locking.IsRetryable, func(ctx context.Context) error {
				tries++
				return repository.RunInTx(ctx, n.dbs[node], func(ctx context.Context) error {
					acct, err := repos[node].Get(ctx, int64(1))
					if err != nil {
						return err
					}
					acct.Balance++
					if err := repos[node].Update(ctx, acct); err != nil {
						return err
					}
					_, err = repos[node].Get(ctx, int64(1))
					return err
				})
			})
			switch {
			case err == nil:
				y.ack(tries, 1)
			case !y.fail(err):
				return err
			}
		}
		return nil
	})
	y.check(t, "RunInTx ending with a read", n, before, n.balances(t), true)
}
