//go:build linux

package pgbouncer

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gormlock/gormlock/internal/tests/pgpair"
)

const (
	// DefaultBin is where Debian's pgbouncer package puts the binary.
	DefaultBin = "/usr/sbin/pgbouncer"
	// BinEnv names the environment variable that overrides DefaultBin.
	BinEnv = "GORMLOCK_PGBOUNCER"
	// KeepEnv, set to 1, makes Close keep PgBouncer's directory (its
	// configurations and logs) of a test that failed. pgpair.KeepEnv does
	// the same for the server's.
	KeepEnv = "GORMLOCK_PGBOUNCER_KEEP"
	// User is the user every DSN names: the server's superuser, whom both
	// PgBouncer and the server trust.
	User = pgpair.User
	// AdminDatabase is PgBouncer's admin console.
	AdminDatabase = "pgbouncer"
)

// Hang guards, not timing assertions: sized for a busy 2-core machine.
const (
	startTimeout = 3 * time.Minute  // PgBouncer up and serving
	stopTimeout  = 30 * time.Second // a process's exit after its signal
	pollInterval = 20 * time.Millisecond
	portAttempts = 3 // ports tried when a port was taken meanwhile
)

// Mode is a PgBouncer pool_mode.
type Mode string

const (
	// Transaction lends a server connection for one transaction (or one
	// statement outside a transaction): consecutive transactions of one
	// client may run on different server connections, and one server
	// connection serves many clients.
	Transaction Mode = "transaction"
	// Session lends a server connection for as long as the client stays
	// connected, and runs server_reset_query (DISCARD ALL) when it comes
	// back.
	Session Mode = "session"
)

// Modes lists the pool modes Start starts a PgBouncer for, in order.
var Modes = []Mode{Transaction, Session}

// Options configures Start.
type Options struct {
	// Bin is the pgbouncer binary; GORMLOCK_PGBOUNCER or DefaultBin when
	// empty.
	Bin string
	// PGBin is the directory of the PostgreSQL server binaries (see
	// pgpair.Options.Bin).
	PGBin string
	// Settings are extra postgresql.conf lines for the server.
	Settings []string
}

// Cluster is a running PostgreSQL server with a PgBouncer per Mode in front
// of it. Its methods may be called from any goroutine, but the fault
// methods (KillBouncer, StartBouncer, RestartBouncer, StopServer,
// StartServer, RestartServer) must not run concurrently with each other.
type Cluster struct {
	t     testing.TB
	bin   string
	dir   string
	cred  *syscall.Credential
	pg    *pgpair.Pair
	begin time.Time

	mu       sync.Mutex // guards the bouncers' processes
	bouncers map[Mode]*bouncer

	closeOnce sync.Once
	closeErr  error
}

// bouncer is one PgBouncer instance the cluster runs.
type bouncer struct {
	mode    Mode
	port    int
	conf    string // its configuration file
	pidfile string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{} // closed once the process has exited and been reaped
}

// running reports whether b's process has not exited.
func (b *bouncer) running() bool {
	if b == nil || b.done == nil {
		return false
	}
	select {
	case <-b.done:
		return false
	default:
		return true
	}
}

// Start starts a PostgreSQL server (pgpair, a primary alone) and a
// PgBouncer per Mode in front of it, each on a free loopback port, and
// returns them serving. Everything is stopped, by process id, and the
// directories are removed when the test ends (see Close).
//
// Start skips the test when pgbouncer or the server binaries are missing
// (fails it under CI=true), and fails it when the cluster does not come up.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	begin := time.Now()
	bin := opts.Bin
	if bin == "" {
		bin = os.Getenv(BinEnv)
	}
	if bin == "" {
		bin = DefaultBin
	}
	if fi, err := os.Stat(bin); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		pgpair.Missing(t, "PgBouncer", "pgbouncer: the PgBouncer binary %s is missing or not executable (install Debian's pgbouncer package, or set %s to the binary): %v",
			bin, BinEnv, err)
	}
	c := &Cluster{t: t, bin: bin, begin: begin, bouncers: map[Mode]*bouncer{}}
	if os.Geteuid() == 0 {
		cred, err := pgpair.PostgresCredential()
		if err != nil {
			pgpair.Missing(t, "PgBouncer", "pgbouncer: running as root, PgBouncer runs as the %s user: %v", User, err)
		}
		c.cred = cred
	}
	settings := append([]string{
		// Two poolers of default_pool_size 20 per database, several
		// databases, and the tests' direct connections.
		"max_connections = 300",
	}, opts.Settings...)
	c.pg = pgpair.Start(t, pgpair.Options{Bin: opts.PGBin, NoStandby: true, Settings: settings})
	c.logf("PostgreSQL up (pid %d, port %d)", c.pg.PrimaryPID(), c.ServerPort())

	dir, err := os.MkdirTemp("", "gormlock-pgbouncer-")
	if err != nil {
		t.Fatalf("pgbouncer: %v", err)
	}
	c.dir = dir
	// Registered after pgpair's: the poolers stop before the server.
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("pgbouncer: %v", err)
		}
	})
	if c.cred != nil {
		if err := os.Chown(dir, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			t.Fatalf("pgbouncer: %v", err)
		}
	}
	if err := c.writeFile("users.txt", fmt.Sprintf("%q %q\n", User, "")); err != nil {
		t.Fatalf("pgbouncer: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for _, mode := range Modes {
		phase := time.Now()
		if err := c.launch(ctx, mode); err != nil {
			t.Fatalf("pgbouncer: start the %s-mode PgBouncer: %v%s", mode, err, c.logTails())
		}
		c.logf("%s-mode PgBouncer up in %v (pid %d, port %d)", mode, since(phase), c.BouncerPID(mode), c.Port(mode))
	}
	c.logf("cluster up in %v, in %s and %s", since(begin), c.dir, c.pg.Dir())
	return c
}

func since(t time.Time) time.Duration { return time.Since(t).Round(time.Millisecond) }

// logf logs a phase, prefixed with the time since Start began.
func (c *Cluster) logf(format string, args ...any) {
	c.t.Helper()
	c.t.Logf("pgbouncer [+%v]: %s", since(c.begin), fmt.Sprintf(format, args...))
}

// writeFile writes a file of the cluster's directory, readable by the
// user PgBouncer runs as.
func (c *Cluster) writeFile(name, text string) error {
	path := filepath.Join(c.dir, name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		return err
	}
	if c.cred != nil {
		return os.Chown(path, int(c.cred.Uid), int(c.cred.Gid))
	}
	return nil
}

// config returns the configuration of b.
func (c *Cluster) config(b *bouncer) string {
	return fmt.Sprintf(`[databases]
* = host=127.0.0.1 port=%d user=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
pidfile = %s
auth_type = trust
auth_file = %s
admin_users = %s
pool_mode = %s
max_client_conn = 400
default_pool_size = 20
server_reset_query = DISCARD ALL
ignore_startup_parameters = extra_float_digits
server_login_retry = 1
`, c.ServerPort(), User, b.port, b.pidfile, filepath.Join(c.dir, "users.txt"), User, b.mode)
}

// launch starts the PgBouncer of mode on a free port and waits until it
// serves. A port taken meanwhile is replaced by another.
func (c *Cluster) launch(ctx context.Context, mode Mode) error {
	b := &bouncer{
		mode:    mode,
		conf:    filepath.Join(c.dir, "pgbouncer-"+string(mode)+".ini"),
		pidfile: filepath.Join(c.dir, "pgbouncer-"+string(mode)+".pid"),
		logPath: filepath.Join(c.dir, "pgbouncer-"+string(mode)+".log"),
	}
	c.mu.Lock()
	c.bouncers[mode] = b
	c.mu.Unlock()
	var last error
	for range portAttempts {
		port, err := freePort(func(p int) bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			for _, o := range c.bouncers {
				if o != b && o.port == p {
					return false
				}
			}
			return p != c.ServerPort()
		})
		if err != nil {
			return err
		}
		b.port = port
		if err := c.writeFile(filepath.Base(b.conf), c.config(b)); err != nil {
			return err
		}
		var bindFailed bool
		bindFailed, last = c.spawn(ctx, b)
		if last == nil || !bindFailed {
			return last
		}
	}
	return last
}

// spawn starts b's process on b.port and waits until it serves its admin
// console. bindFailed reports that it exited because it could not listen.
func (c *Cluster) spawn(ctx context.Context, b *bouncer) (bindFailed bool, err error) {
	logStart := int64(0)
	if fi, err := os.Stat(b.logPath); err == nil {
		logStart = fi.Size()
	}
	log, err := os.OpenFile(b.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return false, err
	}
	// Not CommandContext: PgBouncer outlives ctx; Close stops it.
	cmd := exec.Command(c.bin, b.conf)
	cmd.Env = []string{"LC_ALL=C", "LANG=C", "TZ=UTC", "PATH=/usr/bin:/bin", "HOME=" + c.dir}
	cmd.Dir = c.dir
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group; SIGKILL when the test process dies
	// (PR_SET_PDEATHSIG: strictly, when the OS thread that started it
	// exits, which Go does only for a goroutine that locked its thread).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: c.cred}
	err = cmd.Start()
	_ = log.Close()
	if err != nil {
		return false, fmt.Errorf("start %s-mode PgBouncer: %w", b.mode, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	c.mu.Lock()
	b.cmd, b.done = cmd, done
	c.mu.Unlock()
	err = poll(ctx, fmt.Sprintf("the %s-mode PgBouncer serving on port %d", b.mode, b.port), func(ctx context.Context) (bool, error) {
		select {
		case <-done:
			return false, fmt.Errorf("PgBouncer exited: %v", cmd.ProcessState)
		default:
		}
		_, err := c.adminShow(ctx, b, "SHOW VERSION")
		return err == nil, nil
	})
	if err == nil {
		return false, nil
	}
	select {
	case <-done:
	default:
		return false, err
	}
	data, _ := os.ReadFile(b.logPath)
	if int64(len(data)) >= logStart {
		data = data[logStart:]
	}
	return bytes.Contains(data, []byte("Address already in use")), err
}

// freePort returns a loopback port nobody listens on (that ok accepts),
// never pgpair.ForbiddenPort.
func freePort(ok func(int) bool) (int, error) {
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		if err := l.Close(); err != nil {
			return 0, err
		}
		if port != pgpair.ForbiddenPort && (ok == nil || ok(port)) {
			return port, nil
		}
	}
	return 0, errors.New("no free port")
}

// poll calls cond every pollInterval until it reports true, returns an
// error, or ctx ends.
func poll(ctx context.Context, what string, cond func(ctx context.Context) (bool, error)) error {
	for {
		done, err := cond(ctx)
		switch {
		case err != nil:
			return fmt.Errorf("waiting for %s: %w", what, err)
		case done:
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(pollInterval):
		}
	}
}

// adminShow runs a SHOW command on b's admin console and returns its rows,
// each as its columns' text.
func (c *Cluster) adminShow(ctx context.Context, b *bouncer, cmd string) ([][]string, error) {
	// The admin console speaks only the simple protocol.
	conn, err := pgx.Connect(ctx, c.dsn(b.port, AdminDatabase)+" default_query_exec_mode=simple_protocol")
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	rows, err := conn.Query(ctx, cmd)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][]string
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return nil, err
		}
		row := make([]string, len(vals))
		for i, v := range vals {
			row[i] = fmt.Sprint(v)
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

// dsn returns the pgx key=value DSN of database db at port.
func (c *Cluster) dsn(port int, db string) string {
	return fmt.Sprintf("host=127.0.0.1 port=%d user=%s dbname=%s sslmode=disable connect_timeout=5", port, User, db)
}

// bouncer returns the instance of mode; an unknown mode fails the test.
func (c *Cluster) bouncer(mode Mode) *bouncer {
	c.mu.Lock()
	b := c.bouncers[mode]
	c.mu.Unlock()
	if b == nil {
		c.t.Fatalf("pgbouncer: no PgBouncer in %q mode (modes: %v)", mode, Modes)
	}
	return b
}

// DSN returns the pgx key=value DSN of database db through the PgBouncer of
// mode. It names no default_query_exec_mode: opendb/postgres's Open sees
// the pooler and picks exec.
func (c *Cluster) DSN(mode Mode, db string) string { return c.dsn(c.bouncer(mode).port, db) }

// DirectDSN returns the pgx key=value DSN of database db on the server
// itself, past the poolers: for setting up and for checking what the
// database holds after a fault.
func (c *Cluster) DirectDSN(db string) string { return c.pg.PrimaryDSNOf(db) }

// Port returns the port of the PgBouncer of mode.
func (c *Cluster) Port(mode Mode) int { return c.bouncer(mode).port }

// ServerPort returns the PostgreSQL server's port.
func (c *Cluster) ServerPort() int {
	port, _ := c.pg.Ports()
	return port
}

// BouncerPID returns the process id of the PgBouncer of mode, or 0 while it
// is not running.
func (c *Cluster) BouncerPID(mode Mode) int {
	b := c.bouncer(mode)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !b.running() {
		return 0
	}
	return b.cmd.Process.Pid
}

// ServerPID returns the process id of the server's postmaster, or 0 while
// it is stopped.
func (c *Cluster) ServerPID() int { return c.pg.PrimaryPID() }

// Server returns the PostgreSQL server (a pgpair primary alone).
func (c *Cluster) Server() *pgpair.Pair { return c.pg }

// Dir returns the directory of PgBouncer's configurations, pid files and
// logs (pgbouncer-<mode>.ini, .pid, .log); Server().Dir() holds the
// server's.
func (c *Cluster) Dir() string { return c.dir }

// Config returns the settings the PgBouncer of mode runs with (SHOW CONFIG
// on its admin console), by name.
func (c *Cluster) Config(ctx context.Context, mode Mode) (map[string]string, error) {
	rows, err := c.adminShow(ctx, c.bouncer(mode), "SHOW CONFIG")
	if err != nil {
		return nil, fmt.Errorf("pgbouncer: SHOW CONFIG (%s): %w", mode, err)
	}
	cfg := map[string]string{}
	for _, r := range rows {
		if len(r) >= 2 {
			cfg[r[0]] = r[1]
		}
	}
	return cfg, nil
}

// CreateDatabase creates a new, empty database on the server (gl_ and
// random hex) and returns its name; both poolers reach it by that name (the
// fallback database "*"). It is dropped when the test ends, after the
// cleanups registered later (closing the test's pools) ran; DROP DATABASE
// ... WITH (FORCE) ends the poolers' idle server connections to it.
func (c *Cluster) CreateDatabase(t testing.TB) string {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "gl_" + hex.EncodeToString(b)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := c.execDirect(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgbouncer: %v", err)
	}
	t.Cleanup(func() {
		if c.ServerPID() == 0 {
			return // the server is stopped: its directory goes with it
		}
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		if err := c.execDirect(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("pgbouncer: %v", err)
		}
	})
	return name
}

// execDirect runs stmt on a fresh direct connection to the server's
// database postgres.
func (c *Cluster) execDirect(ctx context.Context, stmt string) error {
	conn, err := pgx.Connect(ctx, c.DirectDSN("postgres"))
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if _, err := conn.Exec(ctx, stmt); err != nil {
		return fmt.Errorf("%s: %w", stmt, err)
	}
	return nil
}

// KillBouncer kills the PgBouncer of mode with SIGKILL (kill -9), by its
// process id, and returns once it has exited: its clients' connections are
// cut, and its pid file is left behind, as after a crash. A PgBouncer that
// is not running is left alone.
func (c *Cluster) KillBouncer(ctx context.Context, mode Mode) error {
	c.t.Helper()
	b := c.bouncer(mode)
	c.mu.Lock()
	cmd, done := b.cmd, b.done
	running := b.running()
	c.mu.Unlock()
	if !running {
		return nil
	}
	phase := time.Now()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && b.running() {
		return fmt.Errorf("pgbouncer: kill the %s-mode PgBouncer (pid %d): %w", mode, cmd.Process.Pid, err)
	}
	if err := waitDone(ctx, done); err != nil {
		return fmt.Errorf("pgbouncer: the %s-mode PgBouncer (pid %d) after SIGKILL: %w", mode, cmd.Process.Pid, err)
	}
	c.logf("killed the %s-mode PgBouncer (kill -9, pid %d) in %v", mode, cmd.Process.Pid, since(phase))
	return nil
}

// StartBouncer starts the PgBouncer of mode again, on its port, after
// KillBouncer, and returns once it serves. It first removes the pid file a
// killed PgBouncer leaves: PgBouncer 1.18 refuses to start while it exists
// ("FATAL pidfile exists, another instance running?"). A port taken
// meanwhile by another process is an error. A running PgBouncer is left
// alone.
func (c *Cluster) StartBouncer(ctx context.Context, mode Mode) error {
	c.t.Helper()
	b := c.bouncer(mode)
	c.mu.Lock()
	running := b.running()
	c.mu.Unlock()
	if running {
		return nil
	}
	phase := time.Now()
	if err := os.Remove(b.pidfile); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("pgbouncer: remove %s: %w", b.pidfile, err)
	}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	if _, err := c.spawn(ctx, b); err != nil {
		return fmt.Errorf("pgbouncer: start the %s-mode PgBouncer again on port %d: %w%s", mode, b.port, err, c.logTails())
	}
	c.logf("started the %s-mode PgBouncer again in %v (pid %d, port %d)", mode, since(phase), c.BouncerPID(mode), b.port)
	return nil
}

// RestartBouncer kills the PgBouncer of mode (KillBouncer), waits pause,
// and starts it again (StartBouncer).
func (c *Cluster) RestartBouncer(ctx context.Context, mode Mode, pause time.Duration) error {
	c.t.Helper()
	if err := c.KillBouncer(ctx, mode); err != nil {
		return err
	}
	if err := sleep(ctx, pause); err != nil {
		return err
	}
	return c.StartBouncer(ctx, mode)
}

// StopServer stops the PostgreSQL server behind the poolers as pg_ctl stop
// -m mode does (its signal to the postmaster, by process id), and returns
// once every server process has exited. The poolers keep running: their
// server connections break, and new ones fail until StartServer.
func (c *Cluster) StopServer(ctx context.Context, mode pgpair.StopMode) error {
	c.t.Helper()
	phase := time.Now()
	pid := c.ServerPID()
	if err := c.pg.StopPrimaryWith(ctx, mode); err != nil {
		return fmt.Errorf("pgbouncer: stop the server (-m %s): %w", mode, err)
	}
	c.logf("stopped PostgreSQL (pg_ctl stop -m %s, pid %d) in %v", mode, pid, since(phase))
	return nil
}

// StartServer starts the PostgreSQL server again, on its port and from its
// data, after StopServer, and returns once it accepts connections (directly;
// PgBouncer logs in again once server_login_retry has passed).
func (c *Cluster) StartServer(ctx context.Context) error {
	c.t.Helper()
	phase := time.Now()
	if err := c.pg.StartPrimary(ctx); err != nil {
		return fmt.Errorf("pgbouncer: %w", err)
	}
	c.logf("started PostgreSQL again in %v (pid %d, port %d)", since(phase), c.ServerPID(), c.ServerPort())
	return nil
}

// RestartServer stops the server (StopServer with mode), waits pause, and
// starts it again (StartServer).
func (c *Cluster) RestartServer(ctx context.Context, mode pgpair.StopMode, pause time.Duration) error {
	c.t.Helper()
	if err := c.StopServer(ctx, mode); err != nil {
		return err
	}
	if err := sleep(ctx, pause); err != nil {
		return err
	}
	return c.StartServer(ctx)
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func waitDone(ctx context.Context, done <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, stopTimeout)
	defer cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops both PgBouncers (SIGTERM, PgBouncer's immediate shutdown, by
// process id; SIGKILL to its process group when it has not exited within
// 30 s) and removes their directory; the server is stopped by pgpair's own
// cleanup, which runs after this one. It is idempotent and bounded in time.
// Start registers it with t.Cleanup.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() {
		phase := time.Now()
		if c.t.Failed() {
			c.t.Logf("pgbouncer: PgBouncer's logs:%s", c.logTails())
		}
		var errs []error
		c.mu.Lock()
		bouncers := make([]*bouncer, 0, len(c.bouncers))
		for _, b := range c.bouncers {
			bouncers = append(bouncers, b)
		}
		c.mu.Unlock()
		for _, b := range bouncers {
			c.mu.Lock()
			cmd, done, running := b.cmd, b.done, b.running()
			c.mu.Unlock()
			if !running {
				continue
			}
			_ = cmd.Process.Signal(syscall.SIGTERM)
			if err := waitDone(context.Background(), done); err != nil {
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				if waitDone(context.Background(), done) != nil {
					err = fmt.Errorf("%w; it survived SIGKILL", err)
				}
				errs = append(errs, fmt.Errorf("stop the %s-mode PgBouncer (pid %d): %w", b.mode, cmd.Process.Pid, err))
			}
		}
		switch {
		case c.dir == "":
		case c.t.Failed() && os.Getenv(KeepEnv) == "1":
			c.t.Logf("pgbouncer: %s=1: kept %s", KeepEnv, c.dir)
		default:
			errs = append(errs, os.RemoveAll(c.dir))
		}
		c.closeErr = errors.Join(errs...)
		c.logf("PgBouncers stopped in %v (the server stops next)", since(phase))
	})
	return c.closeErr
}

// logTails returns the last lines of the PgBouncers' logs, for a failure
// message.
func (c *Cluster) logTails() string {
	var sb strings.Builder
	for _, mode := range Modes {
		c.mu.Lock()
		b := c.bouncers[mode]
		c.mu.Unlock()
		if b == nil {
			continue
		}
		data, err := os.ReadFile(b.logPath)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > 30 {
			lines = lines[len(lines)-30:]
		}
		fmt.Fprintf(&sb, "\n--- pgbouncer-%s.log (last %d lines) ---\n%s", mode, len(lines), strings.Join(lines, "\n"))
	}
	return sb.String()
}
