//go:build linux

package pgpair

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	// DefaultBin is where Debian's postgresql-15 package puts the server
	// binaries.
	DefaultBin = "/usr/lib/postgresql/15/bin"
	// BinEnv names the environment variable that overrides DefaultBin.
	BinEnv = "GORMLOCK_PG_BIN"
	// KeepEnv, set to 1, makes Close keep the directory (data and logs) of
	// a test that failed, for inspection.
	KeepEnv = "GORMLOCK_PGPAIR_KEEP"
	// Database is the database Start creates on the primary (and the standby
	// copies); every DSN names it.
	Database = "gormlock"
	// User is the superuser of both servers; they trust loopback.
	User = "postgres"
	// ForbiddenPort is the port of the machine's own PostgreSQL, which a pair
	// never uses.
	ForbiddenPort = 5432
)

// Hang guards, not timing assertions.
const (
	startTimeout = 3 * time.Minute  // all of Start: initdb and a base backup on a loaded machine
	stopTimeout  = 30 * time.Second // one server's exit after its signal
	pollInterval = 10 * time.Millisecond
	portAttempts = 3 // ports tried per server when a port was taken meanwhile
)

// Replication says when the primary acknowledges a commit.
type Replication int

const (
	// Async: when the primary has flushed the commit to its own WAL
	// (synchronous_commit = on, no synchronous standby). A failover can lose
	// acknowledged commits.
	Async Replication = iota
	// Sync: when the standby has also flushed it
	// (synchronous_standby_names = '*', synchronous_commit = on). A failover to
	// the standby loses no acknowledged commit.
	Sync
	// RemoteApply: when the standby has also replayed it, so a read on the
	// standby after the commit sees it (synchronous_commit = remote_apply).
	RemoteApply
)

// String returns the mode's name.
func (r Replication) String() string {
	switch r {
	case Async:
		return "async"
	case Sync:
		return "sync"
	case RemoteApply:
		return "remote_apply"
	}
	return "Replication(" + strconv.Itoa(int(r)) + ")"
}

// Options configures Start.
type Options struct {
	// Replication is when the primary acknowledges a commit; Async by
	// default.
	Replication Replication
	// Bin is the directory of the server binaries (postgres, initdb,
	// pg_basebackup); GORMLOCK_PG_BIN or DefaultBin when empty.
	Bin string
	// Settings are extra postgresql.conf lines ("name = value") for both
	// servers.
	Settings []string
	// NoStandby starts the primary alone: one server, for tests that need
	// a PostgreSQL server of their own (behind a connection pooler, say)
	// rather than a failover. Replication must then be Async. The methods
	// about the standby (StandbyDSN, FailoverDSN, Promote, PauseReplay,
	// ResumeReplay, CatchUp, WaitReceived, SyncRepWaiters, LoseLag) must not
	// be called on such a pair; Ports reports the standby's port as 0.
	NoStandby bool
}

// StopMode is how a server is stopped, named as pg_ctl stop -m names its
// modes; the signal goes to the postmaster by its process id, as pg_ctl
// sends it.
type StopMode int

const (
	// Immediate is pg_ctl stop -m immediate (SIGQUIT): every process exits
	// at once, sessions are cut mid-statement, there is no shutdown
	// checkpoint, and the next start runs crash recovery.
	Immediate StopMode = iota
	// Fast is pg_ctl stop -m fast (SIGINT): open transactions are rolled
	// back, every session is ended with FATAL 57P01, and the server writes
	// a shutdown checkpoint before it exits.
	Fast
)

// String returns the mode's name as pg_ctl spells it.
func (m StopMode) String() string {
	switch m {
	case Immediate:
		return "immediate"
	case Fast:
		return "fast"
	}
	return "StopMode(" + strconv.Itoa(int(m)) + ")"
}

func (m StopMode) signal() (syscall.Signal, error) {
	switch m {
	case Immediate:
		return syscall.SIGQUIT, nil
	case Fast:
		return syscall.SIGINT, nil
	}
	return 0, fmt.Errorf("pgpair: unknown %v", m)
}

// Pair is a running primary and its streaming standby (or the primary alone,
// with Options.NoStandby). Its methods are safe for concurrent use, except
// StartPrimary, which must not run concurrently with any other method.
type Pair struct {
	t       testing.TB
	opts    Options
	bin     string
	dir     string
	cred    *syscall.Credential
	primary *server
	standby *server

	mu         sync.Mutex
	stoppedPID int // a walreceiver LoseLag stopped and has not killed yet

	closeOnce sync.Once
	closeErr  error
}

// server is one postmaster the pair started.
type server struct {
	name    string
	dir     string // its data directory
	logPath string
	port    int
	cmd     *exec.Cmd
	done    chan struct{} // closed once the postmaster has exited and been reaped
}

// running reports whether the postmaster has not exited.
func (s *server) running() bool {
	if s == nil || s.done == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// pid returns the postmaster's process id.
func (s *server) pid() int { return s.cmd.Process.Pid }

// dsn returns the key=value DSN of database db on s.
func (s *server) dsn(db string) string {
	return fmt.Sprintf("host=127.0.0.1 port=%d user=%s dbname=%s sslmode=disable connect_timeout=5", s.port, User, db)
}

// Start creates a primary and a streaming standby of it in a new temporary
// directory, each on a free loopback port (never 5432), with the replication
// opts ask for, and returns them running, the standby streaming (and, for Sync
// and RemoteApply, the primary's synchronous standby). Both servers are
// stopped and the directory is removed when the test ends (see Close).
//
// Start skips the test when the server binaries are missing (fails it under
// CI=true), and fails it when the pair does not come up.
func Start(t testing.TB, opts Options) *Pair {
	t.Helper()
	begin := time.Now()
	bin := opts.Bin
	if bin == "" {
		bin = os.Getenv(BinEnv)
	}
	if bin == "" {
		bin = DefaultBin
	}
	if opts.NoStandby && opts.Replication != Async {
		t.Fatalf("pgpair: Options.NoStandby with %s replication: a primary alone replicates to no one", opts.Replication)
	}
	for _, name := range []string{"postgres", "initdb", "pg_basebackup"} {
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			missing(t, "pgpair: PostgreSQL server binary %s not found in %s (install postgresql-15, or set %s to the directory holding postgres, initdb and pg_basebackup): %v",
				name, bin, BinEnv, err)
		}
	}
	p := &Pair{t: t, opts: opts, bin: bin}
	if os.Geteuid() == 0 {
		cred, err := PostgresCredential()
		if err != nil {
			missing(t, "pgpair: running as root, the servers run as the %s user: %v", User, err)
		}
		p.cred = cred
	}
	dir, err := os.MkdirTemp("", "gormlock-pgpair-")
	if err != nil {
		t.Fatalf("pgpair: %v", err)
	}
	p.dir = dir
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("pgpair: %v", err)
		}
	})
	if p.cred != nil {
		if err := os.Chown(dir, int(p.cred.Uid), int(p.cred.Gid)); err != nil {
			t.Fatalf("pgpair: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := p.start(ctx); err != nil {
		t.Fatalf("pgpair: start %s pair: %v%s", opts.Replication, err, p.logTails())
	}
	if opts.NoStandby {
		t.Logf("pgpair: primary alone up in %v: 127.0.0.1:%d (pid %d), in %s",
			time.Since(begin).Round(time.Millisecond), p.primary.port, p.primary.pid(), dir)
		return p
	}
	t.Logf("pgpair: %s pair up in %v: primary 127.0.0.1:%d (pid %d), standby 127.0.0.1:%d (pid %d), in %s",
		opts.Replication, time.Since(begin).Round(time.Millisecond), p.primary.port, p.primary.pid(), p.standby.port, p.standby.pid(), dir)
	return p
}

// missing skips the test, or fails it under CI=true, where the servers must be
// tested.
func missing(t testing.TB, format string, args ...any) {
	t.Helper()
	Missing(t, "failover", format, args...)
}

// Missing skips the test for want of a component, or fails it under
// CI=true, where the suite's tests must run (the message says so, naming
// suite).
func Missing(t testing.TB, suite, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format+" (CI=true: the "+suite+" tests must run)", args...)
	}
	t.Skipf(format, args...)
}

// PostgresCredential returns the ids of User, for running PostgreSQL's
// binaries (initdb and postgres refuse to run as root), PgBouncer and
// Patroni as that user.
func PostgresCredential() (*syscall.Credential, error) {
	u, err := user.Lookup(User)
	if err != nil {
		return nil, err
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, err
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// conf is postgresql.conf for both servers; the port is given on the command
// line. fsync is off: the faults are process kills, which the page cache
// survives, so the WAL a server wrote stays written.
const conf = `
listen_addresses = '127.0.0.1'
unix_socket_directories = ''
shared_buffers = 32MB
fsync = off
wal_level = replica
max_wal_senders = 4
max_replication_slots = 4
hot_standby = on
wal_keep_size = 64MB
log_line_prefix = '%m [%p] %b '
`

func (p *Pair) start(ctx context.Context) error {
	p.primary = &server{name: "primary", dir: filepath.Join(p.dir, "primary"), logPath: filepath.Join(p.dir, "primary.log")}
	p.standby = &server{name: "standby", dir: filepath.Join(p.dir, "standby"), logPath: filepath.Join(p.dir, "standby.log")}
	if err := p.run(ctx, "initdb", "-D", p.primary.dir, "-U", User, "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
		return err
	}
	extra := conf + strings.Join(p.opts.Settings, "\n") + "\n"
	if err := appendFile(filepath.Join(p.primary.dir, "postgresql.conf"), extra); err != nil {
		return err
	}
	if err := p.launch(ctx, p.primary, nil); err != nil {
		return err
	}
	if err := p.execOn(ctx, p.primary, "postgres", "CREATE DATABASE "+Database); err != nil {
		return err
	}
	if p.opts.NoStandby {
		return nil
	}
	// The standby copies the primary's files, configuration included, so the
	// synchronous settings come after the copy: a promoted standby must not
	// wait for a standby of its own.
	if err := p.run(ctx, "pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(p.primary.port), "-U", User,
		"-D", p.standby.dir, "-R", "-X", "stream", "-C", "-S", "standby1", "-c", "fast", "--no-sync"); err != nil {
		return err
	}
	if err := p.launch(ctx, p.standby, func(port int) bool { return port != p.primary.port }); err != nil {
		return err
	}
	if err := p.poll(ctx, "the standby streaming", func(ctx context.Context) (bool, error) {
		var n int
		err := p.queryOn(ctx, p.primary, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'", nil, &n)
		return n == 1, err
	}); err != nil {
		return err
	}
	if p.opts.Replication == Async {
		return nil
	}
	commit := "on"
	if p.opts.Replication == RemoteApply {
		commit = "remote_apply"
	}
	for _, stmt := range []string{
		"ALTER SYSTEM SET synchronous_standby_names = '*'",
		"ALTER SYSTEM SET synchronous_commit = '" + commit + "'",
		"SELECT pg_reload_conf()",
	} {
		if err := p.execOn(ctx, p.primary, "postgres", stmt); err != nil {
			return err
		}
	}
	return p.poll(ctx, "the standby synchronous", func(ctx context.Context) (bool, error) {
		var n int
		err := p.queryOn(ctx, p.primary, "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'", nil, &n)
		if err != nil || n != 1 {
			return false, err
		}
		var setting string
		err = p.queryOn(ctx, p.primary, "SHOW synchronous_commit", nil, &setting)
		return setting == commit, err
	})
}

func appendFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(text)
	return errors.Join(err, f.Close())
}

// command returns the command running the binary name with args, as the
// postgres user when the test runs as root, in a process group of its own,
// and sent sig when the test process dies (PR_SET_PDEATHSIG: strictly, when
// the OS thread that started it exits, which Go does only for a goroutine
// that locked its thread; Start is never called from one). The directory of
// a test process that died is left behind.
func (p *Pair) command(ctx context.Context, sig syscall.Signal, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(p.bin, name), args...)
	cmd.Env = []string{"LC_ALL=C", "LANG=C", "TZ=UTC", "PATH=/usr/bin:/bin", "HOME=" + p.dir, "PGTZ=UTC"}
	cmd.Dir = p.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: sig, Credential: p.cred}
	return cmd
}

// run runs a binary to its end.
func (p *Pair) run(ctx context.Context, name string, args ...string) error {
	cmd := p.command(ctx, syscall.SIGKILL, name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w\n%s", name, err, out.String())
	}
	return nil
}

// launch starts the postmaster of s on a free port and waits until it
// accepts connections. A port taken meanwhile is replaced by another.
func (p *Pair) launch(ctx context.Context, s *server, ok func(port int) bool) error {
	var last error
	for range portAttempts {
		port, err := freePort(ok)
		if err != nil {
			return err
		}
		s.port = port
		var exitLog []byte
		exitLog, last = p.spawn(ctx, s)
		if last == nil || !bytes.Contains(exitLog, []byte("could not bind")) {
			return last
		}
	}
	return last
}

// spawn starts the postmaster of s on s.port and waits until it accepts
// connections. When it exited instead, exitLog is what it wrote to its log
// (why it exited).
func (p *Pair) spawn(ctx context.Context, s *server) (exitLog []byte, err error) {
	logStart := int64(0)
	if fi, err := os.Stat(s.logPath); err == nil {
		logStart = fi.Size()
	}
	log, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	// Not CommandContext: the postmaster outlives ctx; Close stops it.
	cmd := p.command(context.Background(), syscall.SIGQUIT, "postgres", "-D", s.dir, "-c", "port="+strconv.Itoa(s.port))
	cmd.Stdout, cmd.Stderr = log, log
	err = cmd.Start()
	_ = log.Close()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", s.name, err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func(done chan struct{}) {
		_ = cmd.Wait()
		close(done)
	}(s.done)
	err = p.poll(ctx, s.name+" accepting connections", func(ctx context.Context) (bool, error) {
		if !s.running() {
			return false, fmt.Errorf("%s exited: %v", s.name, s.cmd.ProcessState)
		}
		var one int
		return p.queryOn(ctx, s, "SELECT 1", nil, &one) == nil, nil
	})
	if err == nil || s.running() {
		return nil, err
	}
	b, _ := os.ReadFile(s.logPath)
	if int64(len(b)) >= logStart {
		b = b[logStart:]
	}
	return b, err
}

// freePort returns a loopback port nobody listens on (that ok accepts),
// never ForbiddenPort.
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
		if port != ForbiddenPort && (ok == nil || ok(port)) {
			return port, nil
		}
	}
	return 0, errors.New("no free port")
}

// poll calls cond every pollInterval until it reports true, returns an error,
// or ctx ends.
func (p *Pair) poll(ctx context.Context, what string, cond func(ctx context.Context) (bool, error)) error {
	var lastErr error
	for {
		done, err := cond(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			return fmt.Errorf("waiting for %s: %w", what, err)
		case done:
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last error: %v)", what, ctx.Err(), lastErr)
		case <-time.After(pollInterval):
		}
		lastErr = err
	}
}

// queryOn runs query on a fresh connection to s (its database postgres) and
// scans its one row into dest.
func (p *Pair) queryOn(ctx context.Context, s *server, query string, args []any, dest ...any) error {
	conn, err := pgx.Connect(ctx, s.dsn("postgres"))
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	return conn.QueryRow(ctx, query, args...).Scan(dest...)
}

// execOn runs stmt on a fresh connection to database db of s.
func (p *Pair) execOn(ctx context.Context, s *server, db, stmt string) error {
	conn, err := pgx.Connect(ctx, s.dsn(db))
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	_, err = conn.Exec(ctx, stmt)
	if err != nil {
		return fmt.Errorf("%s on %s: %w", stmt, s.name, err)
	}
	return nil
}

// PrimaryDSN returns the pgx key=value DSN of the primary's database.
func (p *Pair) PrimaryDSN() string { return p.primary.dsn(Database) }

// PrimaryDSNOf returns the pgx key=value DSN of database db on the primary
// (one the test created, or postgres).
func (p *Pair) PrimaryDSNOf(db string) string { return p.primary.dsn(db) }

// PrimaryPID returns the process id of the primary's postmaster, or 0 while
// it is stopped.
func (p *Pair) PrimaryPID() int {
	if !p.primary.running() {
		return 0
	}
	return p.primary.pid()
}

// StandbyDSN returns the pgx key=value DSN of the standby's database (the
// new primary once promoted).
func (p *Pair) StandbyDSN() string { return p.standby.dsn(Database) }

// FailoverDSN returns the DSN an application uses across a failover: both
// hosts, primary first, with target_session_attrs=read-write, so every new
// connection goes to whichever server accepts writes, and a short
// connect_timeout.
func (p *Pair) FailoverDSN() string {
	return fmt.Sprintf("host=127.0.0.1,127.0.0.1 port=%d,%d user=%s dbname=%s sslmode=disable target_session_attrs=read-write connect_timeout=2",
		p.primary.port, p.standby.port, User, Database)
}

// Ports returns the primary's and the standby's ports (0 for the standby
// with Options.NoStandby).
func (p *Pair) Ports() (primary, standby int) {
	if p.standby == nil {
		return p.primary.port, 0
	}
	return p.primary.port, p.standby.port
}

// Dir returns the directory holding both data directories and the servers'
// logs (primary.log, standby.log).
func (p *Pair) Dir() string { return p.dir }

// StopPrimary stops the primary at once, as pg_ctl stop -m immediate does
// (SIGQUIT to its postmaster, by its process id): no checkpoint, sessions cut
// mid-statement. It returns once the postmaster and all its processes have
// exited.
func (p *Pair) StopPrimary(ctx context.Context) error { return p.stop(ctx, p.primary, syscall.SIGQUIT) }

// StopPrimaryWith stops the primary as pg_ctl stop -m mode does (the mode's
// signal to its postmaster, by its process id) and returns once the
// postmaster and all its processes have exited; StartPrimary starts it
// again. A stopped primary is left alone.
func (p *Pair) StopPrimaryWith(ctx context.Context, mode StopMode) error {
	sig, err := mode.signal()
	if err != nil {
		return err
	}
	return p.stop(ctx, p.primary, sig)
}

// StartPrimary starts the primary again after StopPrimary or
// StopPrimaryWith: from its data directory (after a crash recovery when it
// was stopped at once), on the port it had, so that DSNs and poolers
// pointing at it reach it again. It returns once the server accepts
// connections, and does nothing while the primary runs. A port taken
// meanwhile by another process is an error. It must not run concurrently
// with any other method of the pair.
func (p *Pair) StartPrimary(ctx context.Context) error {
	if p.primary.running() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	for {
		exitLog, err := p.spawn(ctx, p.primary)
		if err == nil {
			return nil
		}
		// Right after a kill -9 the new postmaster can find the killed
		// server's shared memory still attached and refuse to start
		// (seen on the loaded CI machine 15 ms after the kill, once its
		// process group was gone); it exits without touching the data
		// directory. Try again until the segment is free.
		if bytes.Contains(exitLog, []byte("pre-existing shared memory block")) && ctx.Err() == nil {
			p.t.Logf("pgpair: the killed primary's shared memory is still in use; starting again in %v", shmRetryDelay)
			select {
			case <-time.After(shmRetryDelay):
				continue
			case <-ctx.Done():
			}
		}
		return fmt.Errorf("pgpair: start the primary again on port %d: %w%s", p.primary.port, err, p.logTails())
	}
}

// shmRetryDelay is how long StartPrimary waits before starting a primary
// again whose killed predecessor's shared memory was still in use.
const shmRetryDelay = 200 * time.Millisecond

func (p *Pair) stop(ctx context.Context, s *server, sig syscall.Signal) error {
	if !s.running() {
		return nil
	}
	if err := s.cmd.Process.Signal(sig); err != nil && s.running() {
		return fmt.Errorf("stop %s: %w", s.name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, stopTimeout)
	defer cancel()
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop %s (pid %d): %w", s.name, s.pid(), ctx.Err())
	}
}

// Promote ends the standby's recovery and makes it a primary
// (pg_promote(wait => true)), and returns once it accepts writes. It waits
// for the standby to accept connections first (after a crash restart, say).
func (p *Pair) Promote(ctx context.Context) error {
	return p.poll(ctx, "the standby promoted", func(ctx context.Context) (bool, error) {
		var inRecovery bool
		if err := p.queryOn(ctx, p.standby, "SELECT pg_is_in_recovery()", nil, &inRecovery); err != nil {
			if !p.standby.running() {
				return false, errors.New("the standby is not running")
			}
			return false, nil // starting up, or restarting after a crash
		}
		if !inRecovery {
			return true, nil
		}
		var promoted bool
		err := p.queryOn(ctx, p.standby, "SELECT pg_promote(true, 60)", nil, &promoted)
		if err != nil {
			return false, fmt.Errorf("pg_promote: %w", err)
		}
		if !promoted {
			return false, errors.New("pg_promote returned false")
		}
		return true, nil
	})
}

// PauseReplay pauses the standby's replay (pg_wal_replay_pause) and returns
// once it is paused. The standby keeps receiving and flushing WAL; its
// readers see the data as of the pause. With RemoteApply, every commit on the
// primary waits until ResumeReplay.
func (p *Pair) PauseReplay(ctx context.Context) error {
	if err := p.execOn(ctx, p.standby, "postgres", "SELECT pg_wal_replay_pause()"); err != nil {
		return err
	}
	return p.poll(ctx, "replay paused", func(ctx context.Context) (bool, error) {
		var state string
		err := p.queryOn(ctx, p.standby, "SELECT pg_get_wal_replay_pause_state()", nil, &state)
		return state == "paused", err
	})
}

// ResumeReplay resumes the standby's replay (pg_wal_replay_resume).
func (p *Pair) ResumeReplay(ctx context.Context) error {
	return p.execOn(ctx, p.standby, "postgres", "SELECT pg_wal_replay_resume()")
}

// CatchUp waits until the standby has replayed all the WAL the primary had
// written when CatchUp was called, so the standby's readers see every commit
// acknowledged before it.
func (p *Pair) CatchUp(ctx context.Context) error {
	return p.waitStandby(ctx, "pg_last_wal_replay_lsn()")
}

// WaitReceived waits until the standby has received and flushed all the WAL
// the primary had written when it was called (replayed or not).
func (p *Pair) WaitReceived(ctx context.Context) error {
	return p.waitStandby(ctx, "pg_last_wal_receive_lsn()")
}

func (p *Pair) waitStandby(ctx context.Context, position string) error {
	var lsn string
	if err := p.queryOn(ctx, p.primary, "SELECT pg_current_wal_lsn()::text", nil, &lsn); err != nil {
		return err
	}
	return p.poll(ctx, "the standby at "+lsn, func(ctx context.Context) (bool, error) {
		var ok bool
		err := p.queryOn(ctx, p.standby, "SELECT coalesce("+position+" >= $1::pg_lsn, false)", []any{lsn}, &ok)
		return ok, err
	})
}

// SyncRepWaiters returns how many client sessions on the primary are waiting
// for the synchronous standby to confirm their commit (wait_event SyncRep):
// commits the primary has written but not yet acknowledged. Background
// processes (autovacuum) are not counted.
func (p *Pair) SyncRepWaiters(ctx context.Context) (int, error) {
	var n int
	err := p.queryOn(ctx, p.primary, "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep' AND backend_type = 'client backend'", nil, &n)
	return n, err
}

// Loss is what LoseLag measured.
type Loss struct {
	// PrimaryLSN is the end of the primary's WAL just before it was stopped
	// (the primary may have written a little more before the stop took
	// effect).
	PrimaryLSN string
	// StandbyLSN is the end of the WAL the standby replayed before its
	// promotion.
	StandbyLSN string
	// Bytes is PrimaryLSN - StandbyLSN: WAL the primary wrote that the
	// promoted server never had.
	Bytes int64
}

// LoseLag makes a failover that really loses the WAL the standby has not yet
// received. It stops the standby's walreceiver (SIGSTOP, by its process id,
// and waits until the kernel reports it stopped), calls window (the primary
// keeps taking writes meanwhile: with Async it acknowledges them, with Sync
// and RemoteApply their commits wait for the standby), then stops the primary
// at once, kills the walreceiver (SIGKILL, which also drops the WAL waiting
// in its socket buffer; its postmaster then restarts the standby after a
// crash, from the WAL it had flushed), and promotes the standby.
//
// window should return when the test has made the writes it wants in flight
// (wait for a condition, not a time); an error from it resumes the
// walreceiver and is returned. The primary is stopped before the walreceiver
// dies, so the restarted standby cannot fetch the missing WAL.
func (p *Pair) LoseLag(ctx context.Context, window func(ctx context.Context) error) (Loss, error) {
	var loss Loss
	var pid int
	if err := p.poll(ctx, "the standby's walreceiver streaming", func(ctx context.Context) (bool, error) {
		err := p.queryOn(ctx, p.standby, "SELECT pid FROM pg_stat_wal_receiver WHERE status = 'streaming'", nil, &pid)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, nil
		}
		return err == nil, err
	}); err != nil {
		return loss, fmt.Errorf("LoseLag: %w", err)
	}
	if ppid, _, err := procStat(pid); err != nil || ppid != p.standby.pid() {
		return loss, fmt.Errorf("LoseLag: process %d is not a child of the standby's postmaster %d (parent %d, %v)", pid, p.standby.pid(), ppid, err)
	}
	p.mu.Lock()
	p.stoppedPID = pid
	p.mu.Unlock()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return loss, fmt.Errorf("LoseLag: SIGSTOP walreceiver %d: %w", pid, err)
	}
	resume := func(cause error) (Loss, error) {
		_ = syscall.Kill(pid, syscall.SIGCONT)
		p.mu.Lock()
		p.stoppedPID = 0
		p.mu.Unlock()
		return loss, cause
	}
	if err := p.poll(ctx, "the walreceiver stopped", func(context.Context) (bool, error) {
		_, state, err := procStat(pid)
		return state == 'T' || state == 't', err
	}); err != nil {
		return resume(fmt.Errorf("LoseLag: %w", err))
	}
	if err := window(ctx); err != nil {
		return resume(fmt.Errorf("LoseLag: window: %w", err))
	}
	if err := p.queryOn(ctx, p.primary, "SELECT pg_current_wal_lsn()::text", nil, &loss.PrimaryLSN); err != nil {
		return resume(fmt.Errorf("LoseLag: the primary's WAL position: %w", err))
	}
	if err := p.StopPrimary(ctx); err != nil {
		return resume(fmt.Errorf("LoseLag: %w", err))
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return loss, fmt.Errorf("LoseLag: SIGKILL walreceiver %d: %w", pid, err)
	}
	p.mu.Lock()
	p.stoppedPID = 0
	p.mu.Unlock()
	if err := p.poll(ctx, "the walreceiver gone", func(context.Context) (bool, error) {
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH), nil
	}); err != nil {
		return loss, fmt.Errorf("LoseLag: %w", err)
	}
	if err := p.Promote(ctx); err != nil {
		return loss, fmt.Errorf("LoseLag: %w", err)
	}
	if err := p.queryOn(ctx, p.standby, "SELECT pg_last_wal_replay_lsn()::text, pg_wal_lsn_diff($1::pg_lsn, pg_last_wal_replay_lsn())::bigint",
		[]any{loss.PrimaryLSN}, &loss.StandbyLSN, &loss.Bytes); err != nil {
		return loss, fmt.Errorf("LoseLag: the promoted server's WAL position: %w", err)
	}
	return loss, nil
}

// procStat returns the parent and the state of process pid, from
// /proc/<pid>/stat.
func procStat(pid int) (ppid int, state byte, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %q", pid, b)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 || len(f[0]) != 1 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %q", pid, b)
	}
	ppid, err = strconv.Atoi(f[1])
	return ppid, f[0][0], err
}

// Close stops both servers, by their process ids, and removes the
// directory. It is idempotent and bounded in time: each server gets SIGQUIT
// (an immediate shutdown) and, when it has not exited within 10 s, its
// process group gets SIGKILL. Start registers it with t.Cleanup.
func (p *Pair) Close() error {
	p.closeOnce.Do(func() {
		if p.t.Failed() {
			p.t.Logf("pgpair: the servers' logs:%s", p.logTails())
		}
		p.mu.Lock()
		if p.stoppedPID != 0 {
			_ = syscall.Kill(p.stoppedPID, syscall.SIGCONT)
			p.stoppedPID = 0
		}
		p.mu.Unlock()
		var errs []error
		for _, s := range []*server{p.standby, p.primary} {
			if !s.running() {
				continue
			}
			if err := p.stop(context.Background(), s, syscall.SIGQUIT); err != nil {
				_ = syscall.Kill(-s.pid(), syscall.SIGKILL)
				select {
				case <-s.done:
				case <-time.After(stopTimeout):
					err = fmt.Errorf("%w; %s (pid %d) survived SIGKILL", err, s.name, s.pid())
				}
				errs = append(errs, err)
			}
		}
		switch {
		case p.dir == "":
		case p.t.Failed() && os.Getenv(KeepEnv) == "1":
			p.t.Logf("pgpair: %s=1: kept %s", KeepEnv, p.dir)
		default:
			errs = append(errs, os.RemoveAll(p.dir))
		}
		p.closeErr = errors.Join(errs...)
	})
	return p.closeErr
}

// logTails returns the last lines of both servers' logs, for a failure
// message.
func (p *Pair) logTails() string {
	var b strings.Builder
	for _, s := range []*server{p.primary, p.standby} {
		if s == nil {
			continue
		}
		data, err := os.ReadFile(s.logPath)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > 30 {
			lines = lines[len(lines)-30:]
		}
		fmt.Fprintf(&b, "\n--- %s.log (last %d lines) ---\n%s", s.name, len(lines), strings.Join(lines, "\n"))
	}
	return b.String()
}
