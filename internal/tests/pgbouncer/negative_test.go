//go:build linux

package pgbouncer_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/internal/tests/pgbouncer"
	"github.com/gormlock/gormlock/locking"
	pgopen "github.com/gormlock/gormlock/opendb/postgres"
	"github.com/gormlock/gormlock/repository"
)

// TestCacheStatementNegativeControl shows why opendb/postgres's default
// matters. The same DSN through PgBouncer in transaction mode, with pgx's
// own default named (default_query_exec_mode=cache_statement), used by two
// pools: pgx prepares each statement by a name derived from its text on the
// server connection PgBouncer lends for that transaction, and the server
// connection outlives the transaction. The second pool, preparing the same
// text on the same server connection, gets 42P05 ("prepared statement ...
// already exists"); a pool whose cache says "prepared" but lands on another
// server connection gets 26000 ("... does not exist"). The failures are
// loud and definite: no call is misreported. The same two-pool workload
// with the DSN as it is, naming no mode, gets no error: Open sees the
// pooler and picks exec.
func TestCacheStatementNegativeControl(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := pgbouncer.Start(t, pgbouncer.Options{})
	db := c.CreateDatabase(t)
	dsn := c.DSN(pgbouncer.Transaction, db)
	setup := open(t, c.DirectDSN(db))
	require.NoError(t, fixtures.Migrate(ctx, setup))
	acc := &fixtures.Account{Owner: "control"}
	require.NoError(t, accounts(t, setup).Create(ctx, acc))

	// run alternates Mutate calls between the two pools, one at a time, so
	// that each lands on the server connection the other just used.
	run := func(dsn string) (acked int, unknown int, codes map[string]int, sample string) {
		repos := [2]*repository.Repository[fixtures.Account]{accounts(t, open(t, dsn)), accounts(t, open(t, dsn))}
		codes = map[string]int{}
		for i := range 40 {
			_, err := repos[i%2].Mutate(ctx, acc.ID, increment)
			switch {
			case err == nil:
				acked++
				continue
			case errors.Is(err, locking.ErrCommitUnknown):
				unknown++
			}
			code := sqlstate(err)
			require.Equal(t, code, locking.Code(err), "locking.Code agrees with the server's SQLSTATE")
			codes[code]++
			if sample == "" {
				sample = err.Error()
			}
		}
		return acked, unknown, codes, sample
	}
	balance := func() int64 {
		a, err := accounts(t, setup).Get(ctx, acc.ID)
		require.NoError(t, err)
		return a.Balance
	}

	cacheDSN := dsn + " default_query_exec_mode=cache_statement"
	acked, unknown, codes, sample := run(cacheDSN)
	t.Logf("cache_statement through transaction-mode PgBouncer, two pools: %d of 40 calls acknowledged, %d unknown, errors by SQLSTATE %v; e.g. %s",
		acked, unknown, codes, sample)
	failures := codes["42P05"] + codes["26000"]
	require.Positive(t, failures, "the negative control must fail")
	require.Equal(t, 40-acked-unknown, failures, "every failure is 42P05 or 26000: %v", slices.Collect(maps.Keys(codes)))
	require.Zero(t, unknown, "the failures are definite")
	require.Equal(t, int64(acked), balance(), "no failed call was applied")

	before := balance()
	acked, unknown, codes, sample = run(dsn)
	require.Equal(t, 40, acked, "the DSN as it is (Open's default behind a pooler, exec): every call applied; errors %v, e.g. %s", codes, sample)
	require.Zero(t, unknown)
	require.Equal(t, before+40, balance())
	t.Logf("the same DSN without naming a mode (Open's default, exec behind the pooler): 40 of 40 acknowledged")
}

// Open's default for a DSN that names no mode: through PgBouncer, in
// transaction and in session mode, the pooler answers the start-up with a
// cancel key of its own, so the process id it gives is not the server
// process's, and the mode is exec; on the server itself it is pgx's
// cached prepared statements.
func TestOpenDetectsThePooler(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := pgbouncer.Start(t, pgbouncer.Options{})
	db := c.CreateDatabase(t)
	for _, mode := range pgbouncer.Modes {
		got, err := pgopen.Detect(ctx, c.DSN(mode, db))
		require.NoError(t, err)
		require.Equal(t, pgopen.PoolerExecMode, got, "through PgBouncer in %s mode", mode)
		dsn, err := pgopen.DSN(ctx, c.DSN(mode, db))
		require.NoError(t, err)
		require.Contains(t, dsn, "default_query_exec_mode=exec")
	}
	got, err := pgopen.Detect(ctx, c.DirectDSN(db))
	require.NoError(t, err)
	require.Equal(t, pgopen.DirectExecMode, got, "on the server itself")
}
