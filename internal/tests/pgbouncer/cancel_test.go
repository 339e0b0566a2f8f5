//go:build linux

package pgbouncer_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/repository"
)

// runInTxCancel: RunInTx whose context ends while fn's statement sleeps or
// waits for another session's row lock returns only after the server ended
// the transaction, through the pooler too (in transaction mode the client
// knows no backend pid; the cancel request goes through PgBouncer, which
// forwards it to the server connection the client is linked to): right
// after it returns, a session past the pooler gets the row fn wrote with
// FOR UPDATE NOWAIT, 100 rounds of 100 for each kind of statement.
func runInTxCancel(t *testing.T, ctx context.Context, e *env) {
	const rounds = 100
	ra := accounts(t, e.a)
	acc := &fixtures.Account{Owner: "cancel", Balance: 10}
	require.NoError(t, ra.Create(ctx, acc))
	other := &fixtures.Account{Owner: "other", Balance: 10}
	require.NoError(t, ra.Create(ctx, other))
	lockedNow := func() bool {
		tx := e.direct.WithContext(ctx).Begin()
		require.NoError(t, tx.Error)
		defer tx.Rollback()
		var got []int64
		err := tx.Raw("SELECT id FROM accounts WHERE id = ? FOR UPDATE NOWAIT", acc.ID).Scan(&got).Error
		if err != nil {
			require.Equal(t, "55P03", sqlstate(err), "%v", err)
			return true
		}
		require.Len(t, got, 1)
		return false
	}
	for _, kind := range []string{"sleep", "lock wait"} {
		held := 0
		for i := range rounds {
			var release func()
			if kind == "lock wait" {
				blocker := e.direct.WithContext(ctx).Begin()
				require.NoError(t, blocker.Error)
				var got []int64
				require.NoError(t, blocker.Raw("SELECT id FROM accounts WHERE id = ? FOR UPDATE", other.ID).Scan(&got).Error)
				release = func() { require.NoError(t, blocker.Rollback().Error) }
			}
			cctx, cancel := context.WithCancel(ctx)
			timer := time.AfterFunc(time.Duration(20+i%20)*time.Millisecond, cancel)
			err := repository.RunInTx(cctx, e.a, func(ctx context.Context) error {
				x, err := ra.Get(ctx, acc.ID)
				if err != nil {
					return err
				}
				x.Balance++
				if err := ra.Update(ctx, x); err != nil {
					return err
				}
				if kind == "sleep" {
					return repository.Tx(ctx, e.a).Exec("SELECT pg_sleep(2)").Error
				}
				var got []int64
				return repository.Tx(ctx, e.a).Raw("SELECT id FROM accounts WHERE id = ? FOR UPDATE", other.ID).Scan(&got).Error
			})
			if lockedNow() {
				held++
			}
			timer.Stop()
			cancel()
			if release != nil {
				release()
			}
			require.ErrorIs(t, err, context.Canceled, "%s round %d", kind, i)
		}
		assert.Zero(t, held, fmt.Sprintf("%s: rounds of %d in which fn's row was still locked after RunInTx returned", kind, rounds))
	}
	var row struct{ Balance, Version int64 }
	require.NoError(t, e.direct.WithContext(ctx).Raw("SELECT balance, version FROM accounts WHERE id = ?", acc.ID).Scan(&row).Error)
	require.EqualValues(t, 10, row.Balance, "every round rolled back")
	require.Equal(t, acc.Version, row.Version)
	// The pool is whole: the next transaction through the pooler works.
	_, err := ra.Mutate(ctx, acc.ID, increment)
	require.NoError(t, err)
}
