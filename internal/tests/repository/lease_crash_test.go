//go:build linux

package repository_test

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	pgopen "github.com/gormlock/gormlock/opendb/postgres"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/internal/tests/pgpair"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

// crashSettings keep the WAL of a commit made with synchronous_commit off
// in the server's shared memory until the process dies: the WAL writer
// sleeps 10 s between rounds, and nothing else writes WAL out (no
// background writer, checkpoint or autovacuum). A kill -9 of the whole
// server right after such a commit then loses it, as a power failure
// within wal_writer_delay would.
var crashSettings = []string{
	"wal_writer_delay = '10s'",
	"bgwriter_lru_maxpages = 0",
	"checkpoint_timeout = '1d'",
	"autovacuum = off",
}

// crashRounds bounds the kill -9 rounds: a round loses no grant only when
// the WAL writer happened to wake between the grants and the kill.
const crashRounds = 3

// counterGrant grants a lease the way a counter-fenced grant would
// (fence = fence + 1), committed without waiting for the disk, and
// returns its fence: the negative control for the clock fence.
const counterGrant = `INSERT INTO gormlock_leases AS l (resource, record_key, owner, token_hash, fence, acquired_ms, expires_ms)
VALUES ('control', 'k', 'x', ?, 1, 0, 0)
ON CONFLICT (resource, record_key) DO UPDATE SET token_hash = excluded.token_hash, fence = l.fence + 1
RETURNING fence`

// openCrashDB opens dsn, closed when the test ends.
func openCrashDB(t *testing.T, dsn string) *gorm.DB {
	t.Helper()
	db, err := pgopen.Open(dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = fixtures.Close(db) })
	return db
}

// grantCounter runs counterGrant in a transaction of its own, with
// synchronous_commit off when async.
func grantCounter(t *testing.T, ctx context.Context, db *gorm.DB, token string, async bool) int64 {
	t.Helper()
	var fence int64
	require.NoError(t, db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if async {
			if err := tx.Exec("SET LOCAL synchronous_commit = off").Error; err != nil {
				return err
			}
		}
		return tx.Raw(counterGrant, token).Row().Scan(&fence)
	}))
	return fence
}

// killServer kills every process of the server (kill -9 of its process
// group: the postmaster and all its children at once) and waits until
// they are gone.
func killServer(t *testing.T, p *pgpair.Pair) {
	t.Helper()
	pid := p.PrimaryPID()
	require.NotZero(t, pid)
	require.NoError(t, syscall.Kill(-pid, syscall.SIGKILL))
	require.Eventually(t, func() bool {
		return p.PrimaryPID() == 0 && errors.Is(syscall.Kill(-pid, 0), syscall.ESRCH)
	}, 30*time.Second, 10*time.Millisecond, "the server's processes exit")
}

// A lease granted on PostgreSQL outside a transaction commits without
// waiting for the disk, so a server crash can lose it after its holder got
// it. Here the server is killed (kill -9 of all its processes) right after
// a round of grants, and started again:
//   - the holder of every lost grant is refused (Leases.Update, Renew and
//     Release), and the record keeps what it had;
//   - every grant after the restart has a fence greater than any fence
//     handed out before, lost grants' included, and a token of its own;
//   - a grant that survived still excludes everyone else, and its holder
//     writes;
//   - negative controls: a counter fence (fence + 1) granted the same way
//     hands the lost grant's fence out again, and a write that does not
//     check the lease in its own transaction (Update, guarded only by the
//     version) lands for the stale holder.
func TestLostLeaseGrantAfterCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL server of its own")
	}
	// A server of its own per layout: each layout kills it and starts it
	// again, and a second restart of one data directory on a loaded
	// machine can find the killed server's shared memory still in use.
	for _, layout := range leaseLayouts {
		t.Run(layout, func(t *testing.T) {
			p := pgpair.Start(t, pgpair.Options{NoStandby: true, Settings: crashSettings})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			setup := openCrashDB(t, p.PrimaryDSN())
			require.NoError(t, fixtures.Migrate(ctx, setup))
			withLeases := leaseLayout(t, setup, layout)
			require.NoError(t, fixtures.Close(setup))
			for round := 1; ; round++ {
				lost := crashRound(t, ctx, p, round, layout, withLeases)
				if lost > 0 || t.Failed() {
					return
				}
				require.Less(t, round, crashRounds, "no grant was lost in %d rounds of kill -9: the test proves nothing", round)
				t.Logf("round %d lost no grant (the WAL writer woke between the grants and the kill); again", round)
			}
		})
	}
}

// crashRound grants leases (and the control's counter fence), kills the
// server, starts it again, checks every guarantee, and returns how many of
// the round's lease grants the crash lost.
func crashRound(t *testing.T, ctx context.Context, p *pgpair.Pair, round int, layout string, withLeases repository.Option) (lost int) {
	t.Helper()
	const keys = 20
	before := openCrashDB(t, p.PrimaryDSN())
	docs := leasedDocs(t, before, withLeases)
	ids := make([]string, keys)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-r%d-doc-%d", layout, round, i)
		newDoc(t, docs, ids[i])
	}
	// Half the records have a lease row already (taken and released, both
	// durable): the lost grant updates it; the other half get theirs from
	// the lost grant's INSERT.
	for _, id := range ids[:keys/2] {
		_, l, err := docs.Leases().Acquire(ctx, id, "warm-up")
		require.NoError(t, err)
		require.NoError(t, docs.Leases().Release(ctx, l))
	}
	durable := grantCounter(t, ctx, before, fmt.Sprintf("%s-r%d-durable", layout, round), false)

	// The round's grants, none durable, and nothing durable after them.
	type grant struct {
		doc   *fixtures.Document
		lease *repository.Lease
	}
	grants := make([]grant, keys)
	for i, id := range ids {
		d, l, err := docs.Leases().Acquire(ctx, id, "stale")
		require.NoError(t, err)
		grants[i] = grant{d, l}
	}
	lostCounter := grantCounter(t, ctx, before, fmt.Sprintf("%s-r%d-lost", layout, round), true)
	require.Equal(t, durable+1, lostCounter)
	killServer(t, p)
	require.NoError(t, p.StartPrimary(ctx))
	require.NoError(t, fixtures.Close(before))

	db := openCrashDB(t, p.PrimaryDSN())
	docs = leasedDocs(t, db, withLeases)
	var counterLost bool
	var fence int64
	require.NoError(t, db.WithContext(ctx).Raw("SELECT fence FROM gormlock_leases WHERE resource = 'control' AND record_key = 'k'").Row().Scan(&fence))
	if fence == durable {
		counterLost = true
		// Negative control: the counter hands the lost grant's fence out
		// again, to someone else.
		again := grantCounter(t, ctx, db, fmt.Sprintf("%s-r%d-again", layout, round), false)
		assert.Equal(t, lostCounter, again, "a counter fence repeats after a lost grant: the control shows the test can see it")
	} else {
		require.Equal(t, lostCounter, fence, "the control's fence is the durable one or the lost one")
	}

	unguarded := false
	for i, g := range grants {
		id := ids[i]
		_, st, err := docs.Leases().Get(ctx, id)
		require.NoError(t, err)
		if st != nil {
			// The grant survived: it still excludes others, and its
			// holder writes.
			assert.Equal(t, repository.LeaseState{Owner: "stale", Fence: g.lease.Fence, AcquiredAt: g.lease.AcquiredAt, ExpiresAt: g.lease.ExpiresAt}, *st)
			_, _, err := docs.Leases().Acquire(ctx, id, "other")
			requireLeaseErr(t, err, locking.ErrLeased)
			g.doc.Title = "holder's"
			require.NoError(t, docs.Leases().Update(ctx, g.doc, g.lease))
		} else {
			lost++
			// The grant was lost: its holder is refused everywhere, and
			// the record keeps what it had.
			stale := *g.doc
			stale.Title = "stale"
			requireLeaseErr(t, docs.Leases().Update(ctx, &stale, g.lease), locking.ErrLeaseExpired)
			requireLeaseErr(t, docs.Leases().Renew(ctx, g.lease), locking.ErrLeaseExpired)
			requireLeaseErr(t, docs.Leases().Release(ctx, g.lease), locking.ErrLeaseExpired)
			got, err := docs.Get(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, "draft", got.Title)
			assert.Equal(t, g.doc.Version, got.Version)
			if !unguarded {
				// Negative control: a write that trusts the lost lease and
				// is guarded only by the version lands.
				unguarded = true
				stale.Title = "stale, unguarded"
				require.NoError(t, docs.Update(ctx, &stale))
				got, err := docs.Get(ctx, id)
				require.NoError(t, err)
				assert.Equal(t, "stale, unguarded", got.Title, "a write that does not check the lease lands after the grant was lost")
			}
		}

		// The next grant: a fence above any handed out before, a token
		// of its own.
		d, l, err := docs.Leases().Acquire(ctx, id, "fresh")
		require.NoError(t, err)
		assert.Greater(t, l.Fence, g.lease.Fence, "a fence after the crash is above the lost or survived grant's")
		assert.NotEqual(t, g.lease.Token, l.Token)
		if st == nil {
			stale := *g.doc
			stale.Title = "stale"
			requireLeaseErr(t, docs.Leases().Update(ctx, &stale, g.lease), locking.ErrLeased)
		}
		d.Title = "fresh"
		require.NoError(t, docs.Leases().Update(ctx, d, l))
	}
	t.Logf("round %d: %d of %d lease grants lost in the crash; the control's counter grant lost: %v", round, lost, keys, counterLost)
	if lost > 0 {
		assert.True(t, counterLost, "the control's grant came after the leases' grants: lost with them")
	}
	return lost
}
