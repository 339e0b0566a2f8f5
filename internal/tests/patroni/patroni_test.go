//go:build linux

package patroni_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/patroni"
	"github.com/gormlock/gormlock/migrations"
	"github.com/gormlock/gormlock/repository"
)

// The schedule of a run, and its hang guards (not timing assertions).
const (
	runBefore  = 10 * time.Second // writes before the fault
	runAfter   = 20 * time.Second // writes after the fault began
	resumeWait = 90 * time.Second // further, for a write acknowledged by the new leader
	budgetMax  = 9 * time.Minute  // the whole test, cluster start excluded
)

// TestPatroni runs gormlock's writers through the faults of a Patroni
// cluster (package patroni: etcd, three nodes, synchronous_mode) — a
// switchover, then a kill -9 of the leader node — on one cluster.
//
// In each run 8 writers share one Repository, opened with postgres.Open on
// the multi-host DSN with target_session_attrs=read-write, and call Mutate
// +1 on one of 50 rows, each call with a fresh operation key and a 5 s
// context, for 10 s before the fault and 20 s after it began (longer, up to
// 90 s, until a write begun after the leader change is acknowledged). The
// writers are never restarted: new connections find the new leader.
//
// Then, through the new leader, every call's key is looked up
// (LookupOperation, cross-checked against gormlock_operations): every
// acknowledged key must be present (0 lost), no write reported as not
// applied may be present, every unknown outcome (ErrCommitUnknown) is
// settled, each row's N equals its number of applied keys (nothing applied
// twice) and their sum the applied keys. The counts of errors and the
// length of the gap are logged, not asserted. After the fault Patroni must
// name a synchronous standby again; after the kill, the killed node is
// restarted and must rejoin (through pg_rewind when its WAL diverged) with
// the leader's data.
func TestPatroni(t *testing.T) {
	c := patroni.Start(t)
	ctx := budget(t)
	db := open(t, c.DSN())
	leader, err := c.Leader(ctx)
	require.NoError(t, err)
	requireOnLeader(t, ctx, c, db, leader)
	require.NoError(t, migrations.Up(ctx, db), "gormlock's tables, on the leader")

	var results []result
	t.Run("switchover", func(t *testing.T) {
		r := run(t, ctx, c, db, "switchover", func(ctx context.Context) (string, string, error) {
			// In synchronous mode Patroni switches over only to the
			// synchronous standby: the current one.
			st, err := c.Status(ctx)
			if err != nil {
				return "", "", err
			}
			syncs := st.SyncStandbys()
			if len(syncs) == 0 {
				return "", "", fmt.Errorf("no synchronous standby: %v", st)
			}
			from, err := c.Switchover(ctx, syncs[0])
			return from, syncs[0], err
		})
		results = append(results, r)
		// The former leader is demoted and follows the new one.
		h, err := c.WaitHealthy(ctx)
		require.NoError(t, err)
		require.Equal(t, r.to, h.Leader)
		require.Contains(t, h.Streaming, r.from, "the former leader streams from the new one")
	})
	t.Run("leader-kill", func(t *testing.T) {
		r := run(t, ctx, c, db, "kill -9", func(ctx context.Context) (string, string, error) {
			killed, err := c.KillLeader(ctx)
			return killed, "", err
		})
		results = append(results, r)
		rewinds := len(c.LogLines(r.from, "pg_rewind"))
		require.NoError(t, c.Restart(ctx, r.from))
		h, err := c.WaitHealthy(ctx)
		require.NoError(t, err)
		require.Equal(t, r.to, h.Leader)
		require.Contains(t, h.Streaming, r.from, "the killed member rejoined and streams from the new leader")
		if lines := c.LogLines(r.from, "pg_rewind")[rewinds:]; len(lines) > 0 {
			t.Logf("%s rejoined through pg_rewind:\n%s", r.from, joinLines(lines))
		} else {
			t.Logf("%s rejoined without pg_rewind (its WAL had not diverged): %q", r.from,
				c.LogLines(r.from, "rewind", "crash recovery", "single-user"))
		}
		sameData(t, ctx, c, r.to, r.from)
	})
	if len(results) > 0 {
		t.Logf("summary:%s", table(results...))
	}
}

// budget returns the test's context: budgetMax, or less when go test's
// -timeout comes sooner (with a minute left for stopping the cluster).
func budget(t *testing.T) context.Context {
	d := budgetMax
	if dl, ok := t.Deadline(); ok {
		d = min(d, time.Until(dl)-time.Minute)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// fault injects a fault into the healthy cluster, and returns the former
// leader and, when it chose it, the new one ("" when Patroni chooses).
type fault func(ctx context.Context) (from, to string, err error)

// run runs the writers through one fault and accounts for every call (see
// TestPatroni).
func run(t *testing.T, ctx context.Context, c *patroni.Cluster, db *gorm.DB, name string, inject fault) result {
	began := time.Now()
	logf := func(format string, args ...any) {
		t.Helper()
		t.Logf("[+%v] "+format, append([]any{time.Since(began).Round(100 * time.Millisecond)}, args...)...)
	}
	h, err := c.WaitHealthy(ctx)
	require.NoError(t, err)

	require.NoError(t, db.WithContext(ctx).Exec("DROP TABLE IF EXISTS patroni_counters").Error)
	require.NoError(t, db.WithContext(ctx).Exec(counterDDL).Error)
	requireOnLeader(t, ctx, c, db, h.Leader)
	repo, err := repository.New[Counter](db)
	require.NoError(t, err)
	for id := range int64(rows) {
		require.NoError(t, repo.Create(ctx, &Counter{ID: id + 1}))
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	w := startWorkload(t, ctx, repo, strings.Fields(name)[0]+"-"+hex.EncodeToString(b))
	logf("%d writers started on %d rows; leader %s, sync standby %s", writers, rows, h.Leader, h.SyncStandby)
	sleep(ctx, runBefore)

	faultAt := time.Now()
	logf("fault: %s", name)
	from, to, err := inject(ctx)
	faultTook := time.Since(faultAt)
	require.NoError(t, err)
	if to == "" {
		to, err = c.WaitLeader(ctx, from)
		require.NoError(t, err)
	}
	leaderAt := time.Now()
	logf("%s: %s → %s; %s leads and takes writes", name, from, to, to)

	// Patroni names a synchronous standby of the new leader by itself.
	syncDone := make(chan error, 1)
	var syncAgain time.Duration
	go func() {
		h, err := c.WaitSyncStandby(ctx)
		if err == nil && h.Leader != to {
			err = fmt.Errorf("the leader changed again: %s, not %s", h.Leader, to)
		}
		syncAgain = time.Since(faultAt)
		syncDone <- err
	}()

	sleep(ctx, time.Until(faultAt.Add(runAfter)))
	resumed := w.ackedSince(leaderAt)
	for deadline := time.Now().Add(resumeWait); !resumed && time.Now().Before(deadline) && ctx.Err() == nil; {
		sleep(ctx, 250*time.Millisecond)
		resumed = w.ackedSince(leaderAt)
	}
	w.halt()
	logf("writers stopped")
	require.True(t, resumed, "no write begun after %s took over was acknowledged: the writers did not find the new leader", to)
	select {
	case err := <-syncDone:
		require.NoError(t, err, "Patroni names a synchronous standby again after the fault")
	case <-ctx.Done():
		t.Fatalf("waiting for a synchronous standby: %v", ctx.Err())
	}
	logf("a synchronous standby was named again %v after the fault began", syncAgain.Round(100*time.Millisecond))

	requireOnLeader(t, ctx, c, db, to)
	r := account(t, ctx, db, w, faultAt)
	r.fault, r.from, r.to, r.faultTook, r.syncAgain = name, from, to, faultTook, syncAgain
	logf("%s%s", table(r), r.details())
	assert.Empty(t, r.lost, "acknowledged writes missing on the new leader")
	assert.Empty(t, r.misreported, "writes reported as not applied that were applied")
	assert.Empty(t, r.contradictory, "unknown outcomes that also match ErrStaleData or ErrNotFound")
	assert.Equal(t, int64(r.present+r.unknownIn), r.appliedKeys, "applied keys = acknowledged + unknown that were applied")
	return r
}

// requireOnLeader checks that db's connections reach leader, writable.
func requireOnLeader(t *testing.T, ctx context.Context, c *patroni.Cluster, db *gorm.DB, leader string) {
	t.Helper()
	var port int
	var inRecovery bool
	var err error
	for range 5 { // a pooled connection may have been cut by the fault
		if err = db.WithContext(ctx).Raw("SELECT inet_server_port(), pg_is_in_recovery()").Row().Scan(&port, &inRecovery); err == nil {
			break
		}
		_ = sleep(ctx, 500*time.Millisecond)
	}
	require.NoError(t, err)
	require.Equal(t, c.Member(leader).Port, port, "the multi-host DSN reaches the leader %s", leader)
	require.False(t, inRecovery)
}

// sameData waits until replica has replayed the leader's WAL as of now, and
// checks that it holds the leader's counters and operation keys.
func sameData(t *testing.T, ctx context.Context, c *patroni.Cluster, leader, replica string) {
	t.Helper()
	const q = "SELECT (SELECT count(*) FROM patroni_counters), (SELECT coalesce(sum(n), 0) FROM patroni_counters), (SELECT count(*) FROM gormlock_operations)"
	var lsn string
	var want [3]int64
	conn, err := pgx.Connect(ctx, c.Member(leader).DSN(patroni.Database))
	require.NoError(t, err)
	defer func() { _ = conn.Close(context.Background()) }()
	require.NoError(t, conn.QueryRow(ctx, q).Scan(&want[0], &want[1], &want[2]))
	require.NoError(t, conn.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn))

	rc, err := pgx.Connect(ctx, c.Member(replica).DSN(patroni.Database))
	require.NoError(t, err)
	defer func() { _ = rc.Close(context.Background()) }()
	for {
		var caught bool
		require.NoError(t, rc.QueryRow(ctx, "SELECT coalesce(pg_last_wal_replay_lsn() >= $1::pg_lsn, false)", lsn).Scan(&caught))
		if caught {
			break
		}
		require.NoError(t, sleep(ctx, 100*time.Millisecond), "waiting for %s to replay up to %s", replica, lsn)
	}
	var got [3]int64
	require.NoError(t, rc.QueryRow(ctx, q).Scan(&got[0], &got[1], &got[2]))
	require.Equal(t, want, got, "%s (rows, sum of N, operation keys) after rejoining = the leader %s's", replica, leader)
	t.Logf("%s after rejoining holds the leader's data: %d rows, sum of N %d, %d operation keys", replica, got[0], got[1], got[2])
}

// sleep waits d or until ctx ends, and returns ctx's error.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// joinLines indents log lines for t.Log.
func joinLines(lines []string) string {
	return "    " + strings.Join(lines, "\n    ")
}
