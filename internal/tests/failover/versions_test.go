//go:build linux

package failover_test

import (
	"context"
	"testing"

	"github.com/gormlock/gormlock/internal/tests/fixtures"

	"github.com/stretchr/testify/require"

	"github.com/gormlock/gormlock/internal/tests/pgpair"
	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
)

// TestLostVersionIsNotReissued: after a failover that lost an acknowledged
// write, the client that made it still holds the version the write gave
// the record. gormlock's versions are readings of the database's clock
// (PostgreSQL's clock_timestamp(), in microseconds, at least the previous
// version + 1), so the next write on the promoted server gets a later
// version, never the lost one, and the old client's write fails with
// ErrStaleData instead of overwriting data it never saw.
//
// The negative control runs the same story with counter versions (version
// + 1, the common scheme) on a table of its own: the promoted server hands
// out the lost version again, with other content, and the old client's
// guarded write matches it and silently overwrites that content (ABA).
func TestLostVersionIsNotReissued(t *testing.T) {
	ctx := testdb.Ctx(t)
	p := pgpair.Start(t, pgpair.Options{Replication: pgpair.Async})
	db := migrated(t, ctx, p.FailoverDSN())
	require.NoError(t, db.WithContext(ctx).Exec(
		"CREATE TABLE counter_docs (id INT PRIMARY KEY, body TEXT NOT NULL, version BIGINT NOT NULL)").Error)
	require.NoError(t, db.WithContext(ctx).Exec("INSERT INTO counter_docs VALUES (1, 'first', 1)").Error)
	repo := accounts(t, db)
	created := &fixtures.Account{Owner: "aba", Balance: 10}
	require.NoError(t, repo.Create(ctx, created))
	require.NoError(t, p.CatchUp(ctx))
	v0 := created.Version

	// Client A writes while the standby receives nothing: acknowledged by
	// the primary, lost in the failover.
	a, err := repo.Get(ctx, created.ID)
	require.NoError(t, err)
	counterUpdate := "UPDATE counter_docs SET body = ?, version = version + 1 WHERE id = 1 AND version = ?"
	_, err = p.LoseLag(ctx, func(ctx context.Context) error {
		a.Balance = 100
		if err := repo.Update(ctx, a); err != nil {
			return err
		}
		res := db.WithContext(ctx).Exec(counterUpdate, "A", 1)
		if res.Error == nil && res.RowsAffected != 1 {
			t.Errorf("counter control: A's write matched %d rows", res.RowsAffected)
		}
		return res.Error
	})
	require.NoError(t, err)
	lost := a.Version
	require.Greater(t, lost, v0)

	// From here on the clients talk to the promoted server on new
	// connections (the pool's old ones broke with the primary): what a
	// client keeps across the failover is the entity it holds, with its
	// version (an HTTP client's ETag).
	db = open(t, p.FailoverDSN())
	repo = accounts(t, db)

	// On the promoted server the record is back at v0.
	now, err := repo.Get(ctx, created.ID)
	require.NoError(t, err)
	require.Equal(t, v0, now.Version, "A's write was lost (the premise)")
	require.Equal(t, int64(10), now.Balance)

	// Client B writes from v0: a new version, later than the lost one.
	now.Balance = 7
	require.NoError(t, repo.Update(ctx, now))
	t.Logf("versions: before %d, lost %d, issued after the failover %d (+%d µs)", v0, lost, now.Version, now.Version-lost)
	require.Greater(t, now.Version, lost, "the promoted server's clock is past the lost version (one machine's clock here)")

	// A's write from the lost version is refused.
	a.Balance = 200
	var stale *locking.StaleDataError
	require.ErrorAs(t, repo.Update(ctx, a), &stale)
	require.Equal(t, lost, stale.Expected)
	require.Equal(t, now.Version, stale.Actual)
	got, err := repo.Get(ctx, created.ID)
	require.NoError(t, err)
	require.Equal(t, int64(7), got.Balance, "B's write stands")

	// The negative control: counter versions re-issue the lost version 2.
	var body string
	var version int64
	require.NoError(t, db.WithContext(ctx).Raw("SELECT body, version FROM counter_docs WHERE id = 1").Row().Scan(&body, &version))
	require.Equal(t, "first", body, "A's counter write was lost too")
	require.Equal(t, int64(1), version)
	res := db.WithContext(ctx).Exec(counterUpdate, "B", 1)
	require.NoError(t, res.Error)
	require.Equal(t, int64(1), res.RowsAffected, "B's write gets version 2, the version A was told it wrote")
	res = db.WithContext(ctx).Exec(counterUpdate, "A again", 2)
	require.NoError(t, res.Error)
	require.Equal(t, int64(1), res.RowsAffected, "counter versions: A's guard matches B's version 2 (ABA)")
	require.NoError(t, db.WithContext(ctx).Raw("SELECT body FROM counter_docs WHERE id = 1").Row().Scan(&body))
	require.Equal(t, "A again", body, "B's write was overwritten by a client that never saw it")
}
