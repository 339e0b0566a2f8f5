//go:build linux

package pgbouncer_test

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

	"github.com/gormlock/gormlock/internal/tests/pgbouncer"
	"github.com/gormlock/gormlock/internal/tests/pgpair"
)

// gone reports whether no process has id pid.
func gone(pid int) bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }

// queryRow runs q on a fresh connection to dsn and scans its one row.
func queryRow(ctx context.Context, dsn, q string, dest ...any) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	return conn.QueryRow(ctx, q).Scan(dest...)
}

// eventually polls q through dsn until it succeeds (after a restart,
// PgBouncer logs in again once server_login_retry has passed).
func eventually(t *testing.T, ctx context.Context, dsn, q string, dest ...any) {
	t.Helper()
	var err error
	for {
		if err = queryRow(ctx, dsn, q, dest...); err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s through %s: %v (last error: %v)", q, dsn, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestCluster checks the infrastructure itself: the configuration each
// PgBouncer runs with, a database reached through both, kill -9 and a start
// again on the same port, a server restart in both stop modes, and Close
// stopping every process it started.
func TestCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := pgbouncer.Start(t, pgbouncer.Options{})
	for _, mode := range pgbouncer.Modes {
		cfg, err := c.Config(ctx, mode)
		require.NoError(t, err)
		for k, v := range map[string]string{
			"pool_mode": string(mode), "auth_type": "trust", "max_client_conn": "400", "default_pool_size": "20",
			"server_reset_query": "DISCARD ALL", "ignore_startup_parameters": "extra_float_digits", "server_login_retry": "1",
			"listen_addr": "127.0.0.1", "listen_port": fmt.Sprint(c.Port(mode)),
		} {
			require.Equal(t, v, cfg[k], "%s: %s", mode, k)
		}
		require.NotEqual(t, pgpair.ForbiddenPort, c.Port(mode))
	}
	db := c.CreateDatabase(t)
	for _, mode := range pgbouncer.Modes {
		var name string
		var port int
		require.NoError(t, queryRow(ctx, c.DSN(mode, db), "SELECT current_database(), inet_server_port()", &name, &port))
		require.Equal(t, db, name, mode)
		require.Equal(t, c.ServerPort(), port, "%s: PgBouncer forwards to the cluster's server", mode)
	}

	// kill -9 leaves the pid file behind; StartBouncer removes it and
	// starts PgBouncer on the same port.
	pid := c.BouncerPID(pgbouncer.Transaction)
	require.NoError(t, c.KillBouncer(ctx, pgbouncer.Transaction))
	require.True(t, gone(pid))
	require.Zero(t, c.BouncerPID(pgbouncer.Transaction))
	_, err := os.Stat(c.Dir() + "/pgbouncer-transaction.pid")
	require.NoError(t, err, "a killed PgBouncer leaves its pid file")
	require.Error(t, queryRow(ctx, c.DSN(pgbouncer.Transaction, db), "SELECT 1", new(int)), "nobody listens")
	var one int
	require.NoError(t, queryRow(ctx, c.DSN(pgbouncer.Session, db), "SELECT 1", &one), "the other PgBouncer is untouched")
	require.NoError(t, c.StartBouncer(ctx, pgbouncer.Transaction))
	require.NotZero(t, c.BouncerPID(pgbouncer.Transaction))
	require.NotEqual(t, pid, c.BouncerPID(pgbouncer.Transaction))
	require.NoError(t, queryRow(ctx, c.DSN(pgbouncer.Transaction, db), "SELECT 1", &one))

	// The server restarted behind both PgBouncers, in both stop modes.
	for _, mode := range []pgpair.StopMode{pgpair.Fast, pgpair.Immediate} {
		var before, after time.Time
		require.NoError(t, queryRow(ctx, c.DirectDSN(db), "SELECT pg_postmaster_start_time()", &before))
		serverPID := c.ServerPID()
		require.NoError(t, c.RestartServer(ctx, mode, 200*time.Millisecond))
		require.True(t, gone(serverPID), "%s: the old postmaster is gone", mode)
		for _, m := range pgbouncer.Modes {
			eventually(t, ctx, c.DSN(m, db), "SELECT pg_postmaster_start_time()", &after)
			require.True(t, after.After(before), "%s through %s: a new server", mode, m)
		}
	}

	pids := []int{c.BouncerPID(pgbouncer.Transaction), c.BouncerPID(pgbouncer.Session)}
	require.NoError(t, c.Close())
	for _, pid := range pids {
		require.True(t, gone(pid), "Close stops PgBouncer %d", pid)
	}
	_, err = os.Stat(c.Dir())
	require.ErrorIs(t, err, os.ErrNotExist, "Close removes PgBouncer's directory")
	require.NoError(t, c.Close(), "Close is idempotent")
}

func TestStartWithoutPgBouncer(t *testing.T) {
	start := func() *fakeTB {
		ft := &fakeTB{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			pgbouncer.Start(ft, pgbouncer.Options{Bin: t.TempDir() + "/pgbouncer"})
		}()
		<-done
		return ft
	}
	t.Setenv("CI", "")
	ft := start()
	require.True(t, ft.skipped, "skipped without pgbouncer")
	require.False(t, ft.failed)
	require.Contains(t, ft.msg, "PgBouncer binary")
	require.Contains(t, ft.msg, pgbouncer.BinEnv)

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
