//go:build linux

package pgpair_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/gormlock/gormlock/internal/tests/pgpair"
	"github.com/gormlock/gormlock/internal/tests/testdb"
)

// query runs query on a fresh connection to dsn and scans its one row.
func query(t *testing.T, ctx context.Context, dsn, q string, dest ...any) {
	t.Helper()
	require.NoError(t, tryQuery(ctx, dsn, q, dest...), q)
}

func tryQuery(ctx context.Context, dsn, q string, dest ...any) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if len(dest) == 0 {
		_, err = conn.Exec(ctx, q)
		return err
	}
	return conn.QueryRow(ctx, q).Scan(dest...)
}

func count(t *testing.T, ctx context.Context, dsn string) int {
	t.Helper()
	var n int
	query(t, ctx, dsn, "SELECT count(*) FROM t", &n)
	return n
}

// gone reports whether no process has id pid.
func gone(pid int) bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }

// serverPIDs returns the postmasters' process ids, read from their data
// directories.
func serverPIDs(t *testing.T, p *pgpair.Pair) []int {
	t.Helper()
	var pids []int
	for _, name := range []string{"primary", "standby"} {
		var pid int
		b, err := os.ReadFile(p.Dir() + "/" + name + "/postmaster.pid")
		require.NoError(t, err)
		_, err = fmt.Sscan(string(b), &pid)
		require.NoError(t, err)
		pids = append(pids, pid)
	}
	return pids
}

func TestPairReplicatesPausesAndFailsOver(t *testing.T) {
	ctx := testdb.Ctx(t)
	p := pgpair.Start(t, pgpair.Options{})
	primary, standby := p.Ports()
	require.NotEqual(t, pgpair.ForbiddenPort, primary)
	require.NotEqual(t, pgpair.ForbiddenPort, standby)
	pids := serverPIDs(t, p)

	query(t, ctx, p.PrimaryDSN(), "CREATE TABLE t (id int PRIMARY KEY)")
	query(t, ctx, p.PrimaryDSN(), "INSERT INTO t VALUES (1)")
	require.NoError(t, p.CatchUp(ctx))
	require.Equal(t, 1, count(t, ctx, p.StandbyDSN()))
	var port int
	query(t, ctx, p.FailoverDSN(), "SELECT inet_server_port()", &port)
	require.Equal(t, primary, port, "the two-host DSN writes to the primary")

	require.NoError(t, p.PauseReplay(ctx))
	query(t, ctx, p.PrimaryDSN(), "INSERT INTO t VALUES (2)")
	require.NoError(t, p.WaitReceived(ctx))
	require.Equal(t, 1, count(t, ctx, p.StandbyDSN()), "replay paused: the standby's readers see the old data")
	require.NoError(t, p.ResumeReplay(ctx))
	require.NoError(t, p.CatchUp(ctx))
	require.Equal(t, 2, count(t, ctx, p.StandbyDSN()))

	require.NoError(t, p.StopPrimary(ctx))
	require.True(t, gone(pids[0]), "the primary's postmaster is gone")
	require.Error(t, tryQuery(ctx, p.FailoverDSN(), "SELECT 1"), "no read-write server until the promotion")
	require.NoError(t, p.Promote(ctx))
	query(t, ctx, p.FailoverDSN(), "SELECT inet_server_port()", &port)
	require.Equal(t, standby, port, "the two-host DSN now reaches the promoted standby")
	query(t, ctx, p.FailoverDSN(), "INSERT INTO t VALUES (3)")
	require.Equal(t, 3, count(t, ctx, p.StandbyDSN()))

	require.NoError(t, p.Close())
	require.True(t, gone(pids[1]), "Close stops the standby")
	_, err := os.Stat(p.Dir())
	require.ErrorIs(t, err, os.ErrNotExist, "Close removes the directory")
	require.NoError(t, p.Close(), "Close is idempotent")
}

func TestSyncPairWaitsForTheStandby(t *testing.T) {
	for _, mode := range []pgpair.Replication{pgpair.Sync, pgpair.RemoteApply} {
		t.Run(mode.String(), func(t *testing.T) {
			ctx := testdb.Ctx(t)
			p := pgpair.Start(t, pgpair.Options{Replication: mode})
			var state, commit string
			query(t, ctx, p.PrimaryDSN(), "SELECT sync_state FROM pg_stat_replication", &state)
			require.Equal(t, "sync", state)
			query(t, ctx, p.PrimaryDSN(), "SHOW synchronous_commit", &commit)
			require.Equal(t, map[pgpair.Replication]string{pgpair.Sync: "on", pgpair.RemoteApply: "remote_apply"}[mode], commit)
			query(t, ctx, p.StandbyDSN(), "SHOW synchronous_standby_names", &state)
			require.Empty(t, state, "the standby, once promoted, must not wait for a standby of its own")
			query(t, ctx, p.PrimaryDSN(), "CREATE TABLE t (id int PRIMARY KEY)")
			if mode == pgpair.RemoteApply {
				// Read-your-writes on the standby, without waiting.
				query(t, ctx, p.PrimaryDSN(), "INSERT INTO t VALUES (1)")
				require.Equal(t, 1, count(t, ctx, p.StandbyDSN()))
			}
		})
	}
}

// TestLoseLag checks the fault itself: with async replication a commit the
// primary acknowledged inside the window is gone after the failover; with
// synchronous replication the commit is never acknowledged, so nothing
// acknowledged is lost.
func TestLoseLag(t *testing.T) {
	for _, mode := range []pgpair.Replication{pgpair.Async, pgpair.Sync} {
		t.Run(mode.String(), func(t *testing.T) {
			ctx := testdb.Ctx(t)
			p := pgpair.Start(t, pgpair.Options{Replication: mode})
			query(t, ctx, p.PrimaryDSN(), "CREATE TABLE t (id int PRIMARY KEY)")
			query(t, ctx, p.PrimaryDSN(), "INSERT INTO t VALUES (1)")
			require.NoError(t, p.CatchUp(ctx))

			insertErr := make(chan error, 1)
			loss, err := p.LoseLag(ctx, func(ctx context.Context) error {
				if mode == pgpair.Async {
					return tryQuery(ctx, p.PrimaryDSN(), "INSERT INTO t VALUES (2)") // acknowledged
				}
				go func() { insertErr <- tryQuery(ctx, p.PrimaryDSN(), "INSERT INTO t VALUES (2)") }()
				for {
					n, err := p.SyncRepWaiters(ctx)
					if err != nil || n == 1 {
						return err
					}
					time.Sleep(10 * time.Millisecond) // polling the condition
				}
			})
			require.NoError(t, err)
			t.Logf("%s: %+v", mode, loss)
			require.Positive(t, loss.Bytes, "the promoted server lacks WAL the primary wrote")
			if mode == pgpair.Sync {
				require.Error(t, <-insertErr, "the waiting commit was never acknowledged")
			}
			require.Equal(t, 1, count(t, ctx, p.FailoverDSN()), "the row inserted in the window is gone")
			query(t, ctx, p.FailoverDSN(), "INSERT INTO t VALUES (2)")
		})
	}
}

// TestPrimaryAloneStopsAndStartsAgain: Options.NoStandby starts one server,
// and StopPrimaryWith and StartPrimary restart it on its port with its data,
// in both stop modes.
func TestPrimaryAloneStopsAndStartsAgain(t *testing.T) {
	ctx := testdb.Ctx(t)
	p := pgpair.Start(t, pgpair.Options{NoStandby: true})
	port, standby := p.Ports()
	require.Zero(t, standby)
	_, err := os.Stat(p.Dir() + "/standby")
	require.ErrorIs(t, err, os.ErrNotExist, "no standby")
	query(t, ctx, p.PrimaryDSN(), "CREATE TABLE t (id int PRIMARY KEY)")
	for i, mode := range []pgpair.StopMode{pgpair.Fast, pgpair.Immediate} {
		query(t, ctx, p.PrimaryDSN(), fmt.Sprintf("INSERT INTO t VALUES (%d)", i+1))
		pid := p.PrimaryPID()
		require.Positive(t, pid)
		require.NoError(t, p.StopPrimaryWith(ctx, mode), mode.String())
		require.True(t, gone(pid), "%s: the postmaster is gone", mode)
		require.Zero(t, p.PrimaryPID())
		require.Error(t, tryQuery(ctx, p.PrimaryDSN(), "SELECT 1"), "%s: stopped", mode)
		require.NoError(t, p.StopPrimaryWith(ctx, mode), "stopping a stopped primary does nothing")
		require.NoError(t, p.StartPrimary(ctx), mode.String())
		require.NotEqual(t, pid, p.PrimaryPID())
		require.NoError(t, p.StartPrimary(ctx), "starting a running primary does nothing")
		var got int
		query(t, ctx, p.PrimaryDSNOf(pgpair.Database), "SELECT inet_server_port()", &got)
		require.Equal(t, port, got, "%s: the same port", mode)
		require.Equal(t, i+1, count(t, ctx, p.PrimaryDSN()), "%s: the committed rows survive", mode)
	}
	pid := p.PrimaryPID()
	require.NoError(t, p.Close())
	require.True(t, gone(pid), "Close stops the restarted primary")
}

func TestStartWithoutBinaries(t *testing.T) {
	start := func() *fakeTB {
		ft := &fakeTB{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			pgpair.Start(ft, pgpair.Options{Bin: t.TempDir()})
		}()
		<-done
		return ft
	}
	t.Setenv("CI", "")
	ft := start()
	require.True(t, ft.skipped, "skipped without the binaries")
	require.False(t, ft.failed)
	require.Contains(t, ft.msg, "not found in")

	t.Setenv("CI", "true")
	ft = start()
	require.True(t, ft.failed, "a failure under CI=true")
	require.False(t, ft.skipped)
	require.Contains(t, ft.msg, "CI=true")
}

// fakeTB records a skip or a failure and ends the goroutine, as testing.T
// does.
type fakeTB struct {
	testing.TB
	skipped, failed bool
	msg             string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Skipf(format string, args ...any) {
	f.skipped, f.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed, f.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}
