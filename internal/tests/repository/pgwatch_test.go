package repository_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/repository"
)

// On PostgreSQL a write outside a transaction whose context can end starts
// no goroutine: gormlock cancels it on the server itself when the context
// ends (see TestSingleWriteCancelledWhileWaitingIsDefinite), so it sends
// the statement with a context that cannot end and leaves pgx and
// database/sql nothing to watch (database/sql starts a goroutine per query
// otherwise); where the server cannot be asked, gormlock closes the
// connection's socket itself (the fault suite's blackhole). The control:
// the same UPDATE ... RETURNING through database/sql with the same context
// starts one per statement.
func TestPostgresWritesWatchNothingWithAContextThatCanEnd(t *testing.T) {
	db := testdb.Open(t, "postgres")
	sqlDB, err := db.DB()
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	leased, err := repository.New[fixtures.Account](db, leaseLayout(t, db, "row"))
	require.NoError(t, err)
	a := newAccount(t, leased, "ann", 0)
	calls := map[string]func(){
		"Update": func() {
			a.Balance++
			require.NoError(t, leased.Update(ctx, a))
		},
		"Apply": func() {
			out, err := leased.Apply(ctx, a.ID, []repository.Change{repository.Add("Balance", 1)})
			require.NoError(t, err)
			a = out
		},
		"Leases in the row": func() {
			x, l, err := leased.Leases().Acquire(ctx, a.ID, "ann", repository.TTL(10*time.Second))
			require.NoError(t, err)
			x.Balance++
			require.NoError(t, leased.Leases().Update(ctx, x, l))
			a = x
		},
	}
	for name, f := range calls {
		for range 10 {
			f() // connections and prepared statements settle
		}
		n := goroutinesPerCall(50, f)
		t.Logf("%s: %.2f goroutines per call", name, n)
		require.Less(t, n, 0.5, "%s started goroutines with a context that can end", name)
	}
	raw := goroutinesPerCall(50, func() {
		var v int64
		require.NoError(t, sqlDB.QueryRowContext(ctx, "UPDATE accounts SET balance = balance + 1 WHERE id = $1 RETURNING version", a.ID).Scan(&v))
	})
	t.Logf("database/sql: %.2f goroutines per statement", raw)
	require.GreaterOrEqual(t, raw, 1.0, "the control: database/sql's goroutine per query was not counted")
	balance, version, found := rawAccount(t, db, a.ID)
	require.True(t, found)
	require.Equal(t, a.Balance+50, balance, "every write applied once")
	require.Equal(t, a.Version, version)
}
