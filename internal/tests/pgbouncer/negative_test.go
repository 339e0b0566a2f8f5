//go:build linux

package pgbouncer_test

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/internal/tests/pgbouncer"
	"github.com/gormlock/gormlock/locking"
	pgopen "github.com/gormlock/gormlock/opendb/postgres"
	"github.com/gormlock/gormlock/repository"
)

// TestCacheStatementNegativeControl shows what a pooler in transaction mode
// does to pgx's own default, cache_statement, and that gormlock's calls
// survive it. The DSN through PgBouncer in transaction mode with
// default_query_exec_mode=cache_statement named, used by two pools: pgx
// prepares each statement by a name derived from its text on the server
// connection PgBouncer lends for that transaction, and the server
// connection outlives the transaction. The second pool, preparing the same
// text on the same server connection, gets 42P05 ("prepared statement ...
// already exists"); a pool whose cache says "prepared" but lands on another
// server connection gets 26000 ("... does not exist").
//
// The negative control is a plain GORM read-modify-write in a transaction:
// it fails, loudly and definitely. gormlock's Mutate on the same pools
// restarts an attempt whose transaction such a refusal aborted (nothing was
// applied), and a statement outside a transaction is sent again; whatever
// still fails (42P05 repeats while the other client's statement holds the
// name on that server connection) fails definitely, and no call is applied
// twice. The DSN as it is, naming no mode, gets no refusal at all: Open
// sees the pooler and picks exec.
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
	balance := func() int64 {
		a, err := accounts(t, setup).Get(ctx, acc.ID)
		require.NoError(t, err)
		return a.Balance
	}
	const calls = 40

	// Each run alternates calls between two pools, one at a time, so that
	// each lands on the server connection the other just used.
	cacheDSN := dsn + " default_query_exec_mode=cache_statement"

	// The negative control: plain GORM, read and write in a transaction.
	plain := [2]*gorm.DB{open(t, cacheDSN), open(t, cacheDSN)}
	acked, codes, sample := 0, map[string]int{}, ""
	before := balance()
	for i := range calls {
		err := plain[i%2].WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			var a fixtures.Account
			if err := tx.First(&a, acc.ID).Error; err != nil {
				return err
			}
			return tx.Model(&fixtures.Account{}).Where("id = ?", acc.ID).Update("balance", a.Balance+1).Error
		})
		if err == nil {
			acked++
			continue
		}
		codes[sqlstate(err)]++
		if sample == "" {
			sample = err.Error()
		}
	}
	t.Logf("plain GORM, cache_statement through transaction-mode PgBouncer, two pools: %d of %d transactions committed, errors by SQLSTATE %v; e.g. %s",
		acked, calls, codes, sample)
	require.Positive(t, codes["42P05"]+codes["26000"], "the negative control must fail")
	require.Equal(t, calls-acked, codes["42P05"]+codes["26000"], "every failure is 42P05 or 26000: %v", slices.Collect(maps.Keys(codes)))
	require.Equal(t, before+int64(acked), balance(), "no failed transaction was applied")

	// run makes calls Mutate calls alternating between two pools of dsn.
	// Whatever each returns, the balance moves by the calls acknowledged:
	// a refused statement is a definite failure, never an unknown outcome.
	run := func(dsn string) (acked, attempts int, codes map[string]int) {
		repos := [2]*repository.Repository[fixtures.Account]{accounts(t, open(t, dsn)), accounts(t, open(t, dsn))}
		before := balance()
		codes = map[string]int{}
		for i := range calls {
			var rep repository.MutateReport
			_, err := repos[i%2].Mutate(ctx, acc.ID, increment, repository.Report(&rep))
			attempts += rep.Attempts
			if err == nil {
				acked++
				continue
			}
			require.NotErrorIs(t, err, locking.ErrCommitUnknown, "call %d: %s", i, rep)
			codes[sqlstate(err)]++
		}
		require.Equal(t, before+int64(acked), balance(), "every acknowledged call applied once, no other")
		return acked, attempts, codes
	}
	acked, attempts, codes := run(cacheDSN)
	t.Logf("gormlock Mutate, cache_statement through transaction-mode PgBouncer, two pools: %d of %d applied in %d attempts (an attempt a refusal aborted starts again); errors by SQLSTATE %v",
		acked, calls, attempts, codes)
	require.Equal(t, calls-acked, codes["42P05"]+codes["26000"], "every failure is 42P05 or 26000: %v", slices.Collect(maps.Keys(codes)))
	acked, attempts, codes = run(dsn)
	require.Equal(t, calls, acked, "the DSN as it is (Open's default behind a pooler, exec): every call applied; errors %v", codes)
	require.Equal(t, calls, attempts, "no attempt refused")
	t.Logf("the same DSN without naming a mode (Open's default, exec behind the pooler): %d of %d in %d attempts", acked, calls, attempts)
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
