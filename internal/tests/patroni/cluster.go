//go:build linux

package patroni

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gormlock/gormlock/internal/tests/pgpair"
)

const (
	// DefaultPGBin is where Debian's postgresql-15 package puts the server
	// binaries.
	DefaultPGBin = "/usr/lib/postgresql/15/bin"
	// PGBinEnv names the environment variable that overrides DefaultPGBin.
	PGBinEnv = "GORMLOCK_PG_BIN"
	// DefaultPatroni is Debian's patroni (3.0.2 in Debian 12).
	DefaultPatroni = "/usr/bin/patroni"
	// PatroniEnv names the environment variable that overrides
	// DefaultPatroni.
	PatroniEnv = "GORMLOCK_PATRONI"
	// DefaultEtcd is Debian's etcd-server (3.4 in Debian 12).
	DefaultEtcd = "/usr/bin/etcd"
	// EtcdEnv names the environment variable that overrides DefaultEtcd.
	EtcdEnv = "GORMLOCK_ETCD"
	// KeepEnv, set to 1, makes Stop keep the directory (data, configuration
	// and logs) of a test that failed, for inspection.
	KeepEnv = "GORMLOCK_PATRONI_KEEP"
	// Database is the database Start creates on the leader; DSN names it.
	Database = "gormlock"
	// User is the superuser of every node; the nodes trust loopback.
	User = "postgres"
	// Size is the number of Patroni nodes: n1, n2 and n3.
	Size = 3
)

// The bootstrap DCS configuration of the research (production-components.md,
// section 2).
const (
	TTL                  = 10 * time.Second // leader key's time to live: a dead leader's lock expires after it
	LoopWait             = 2 * time.Second  // Patroni's HA loop
	RetryTimeout         = 4 * time.Second  // DCS and PostgreSQL operation retries
	MaximumLagOnFailover = 1048576          // bytes a replica may lag and still be promoted
)

// Hang guards, not timing assertions: generous, for a loaded 2-core machine.
const (
	startTimeout   = 5 * time.Minute  // all of Start: etcd, initdb, two base backups, the sync standby
	stopTimeout    = 15 * time.Second // one process's exit after its signal
	requestTimeout = 10 * time.Second // one REST call or SQL query
	switchoverWait = 90 * time.Second // POST /switchover: Patroni itself answers within 20 s
	pollInterval   = 250 * time.Millisecond
	progressEvery  = 15 * time.Second // how often a long wait logs what it still waits for
)

// forbiddenPorts are the machine's shared servers' ports, never used.
var forbiddenPorts = []int{5432, 3306}

// Cluster is a running etcd member and three Patroni nodes. Its methods are
// safe for concurrent use.
type Cluster struct {
	t     testing.TB
	begin time.Time
	dir   string
	cred  *syscall.Credential
	scope string // the Patroni cluster's name, unique per Start

	pgBin, patroniBin, etcdBin string

	etcd                         *proc
	etcdClientPort, etcdPeerPort int
	members                      []*Member

	stopOnce sync.Once
	stopErr  error
}

// Member is one Patroni node and its PostgreSQL.
type Member struct {
	// Name is the member's name in Patroni (n1, n2, n3), which is also its
	// application_name on the leader (pg_stat_replication,
	// synchronous_standby_names).
	Name string
	// Port is its PostgreSQL port on 127.0.0.1.
	Port int
	// RESTPort is its Patroni REST API port on 127.0.0.1.
	RESTPort int

	dir     string // its directory: configuration, log, socket
	dataDir string
	config  string
	logPath string

	mu      sync.Mutex
	patroni *proc // nil once KillLeader killed it
}

// current returns the member's Patroni process, nil when it was killed.
func (m *Member) current() *proc {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.patroni
}

// DSN returns the key=value DSN of database db on this member alone, for
// inspection (it may be a read-only replica).
func (m *Member) DSN(db string) string {
	return fmt.Sprintf("host=127.0.0.1 port=%d user=%s dbname=%s sslmode=disable connect_timeout=5", m.Port, User, db)
}

// Start starts etcd and the three Patroni nodes in a new temporary directory
// and returns once there is a leader, both replicas stream from it, one of
// them is its synchronous standby, and Database exists. Every phase is logged
// with the time it took. Stop is registered with t.Cleanup.
//
// Start skips the test when a binary is missing (fails it under CI=true), and
// fails it when the cluster does not come up within startTimeout.
func Start(t testing.TB) *Cluster {
	t.Helper()
	c := &Cluster{t: t, begin: time.Now()}
	c.pgBin = envOr(PGBinEnv, DefaultPGBin)
	c.patroniBin = envOr(PatroniEnv, DefaultPatroni)
	c.etcdBin = envOr(EtcdEnv, DefaultEtcd)
	for _, b := range []struct{ path, what string }{
		{c.patroniBin, "patroni (install Debian's patroni, or set " + PatroniEnv + ")"},
		{c.etcdBin, "etcd (install Debian's etcd-server, or set " + EtcdEnv + ")"},
		{filepath.Join(c.pgBin, "postgres"), "PostgreSQL's postgres (install postgresql-15, or set " + PGBinEnv + ")"},
		{filepath.Join(c.pgBin, "initdb"), "PostgreSQL's initdb"},
		{filepath.Join(c.pgBin, "pg_basebackup"), "PostgreSQL's pg_basebackup"},
		{filepath.Join(c.pgBin, "pg_rewind"), "PostgreSQL's pg_rewind"},
		{filepath.Join(c.pgBin, "pg_ctl"), "PostgreSQL's pg_ctl"},
		{filepath.Join(c.pgBin, "pg_controldata"), "PostgreSQL's pg_controldata"},
	} {
		if fi, err := os.Stat(b.path); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			pgpair.Missing(t, "Patroni", "patroni: %s not found at %s: %v", b.what, b.path, err)
		}
	}
	// patroni is a Python program: it exists and still may not run (a
	// missing Python module).
	vctx, vcancel := context.WithTimeout(context.Background(), time.Minute)
	out, err := exec.CommandContext(vctx, c.patroniBin, "--version").CombinedOutput()
	vcancel()
	if err != nil {
		pgpair.Missing(t, "Patroni", "patroni: %s --version fails (its Python modules?): %v\n%s", c.patroniBin, err, out)
	}
	if os.Geteuid() == 0 {
		cred, err := pgpair.PostgresCredential()
		if err != nil {
			pgpair.Missing(t, "Patroni", "patroni: running as root, the nodes run as the %s user: %v", User, err)
		}
		c.cred = cred
	}
	dir, err := os.MkdirTemp("", "gormlock-patroni-")
	if err != nil {
		t.Fatalf("patroni: %v", err)
	}
	c.dir = dir
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("patroni: %v", err)
		}
	})
	if c.cred != nil {
		if err := os.Chown(dir, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			t.Fatalf("patroni: %v", err)
		}
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	c.scope = "gormlock-" + hex.EncodeToString(b)

	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := c.start(ctx); err != nil {
		t.Fatalf("patroni: start: %v", err) // Stop logs the logs' tails
	}
	var desc []string
	for _, m := range c.members {
		desc = append(desc, fmt.Sprintf("%s pg 127.0.0.1:%d rest :%d", m.Name, m.Port, m.RESTPort))
	}
	c.logf("cluster %s up in %v: etcd 127.0.0.1:%d; %s; in %s", c.scope, time.Since(c.begin).Round(time.Millisecond),
		c.etcdClientPort, strings.Join(desc, "; "), c.dir)
	return c
}

func envOr(env, def string) string {
	if v := os.Getenv(env); v != "" {
		return v
	}
	return def
}

// logf logs with the time since Start began.
func (c *Cluster) logf(format string, args ...any) {
	c.t.Helper()
	c.t.Logf("patroni [+%v] "+format, append([]any{time.Since(c.begin).Round(100 * time.Millisecond)}, args...)...)
}

func (c *Cluster) start(ctx context.Context) error {
	c.t.Helper()
	ports, err := freePorts(2 + 2*Size)
	if err != nil {
		return err
	}
	c.etcdClientPort, c.etcdPeerPort = ports[0], ports[1]
	for i := range Size {
		name := "n" + strconv.Itoa(i+1)
		md := filepath.Join(c.dir, name)
		c.members = append(c.members, &Member{
			Name: name, Port: ports[2+2*i], RESTPort: ports[3+2*i],
			dir: md, dataDir: filepath.Join(md, "data"), config: filepath.Join(md, "patroni.yml"), logPath: filepath.Join(c.dir, name+".log"),
		})
	}
	if err := c.startEtcd(ctx); err != nil {
		return err
	}
	for _, m := range c.members {
		if err := c.writeConfig(m); err != nil {
			return err
		}
	}
	// All three at once: they race for the initialize key in etcd; the
	// winner runs initdb and becomes the leader, the others clone it.
	for _, m := range c.members {
		if err := c.launch(m); err != nil {
			return err
		}
	}
	c.logf("started patroni on n1, n2, n3")
	if _, err := c.WaitHealthy(ctx); err != nil {
		return err
	}
	leader, err := c.Leader(ctx)
	if err != nil {
		return err
	}
	if err := execOn(ctx, c.member(leader).DSN("postgres"), "CREATE DATABASE "+Database); err != nil {
		return err
	}
	c.logf("created database %s on the leader %s", Database, leader)
	// pgx tries a multi-host DSN's hosts in turn, but gives up at the first
	// that answers 3D000 (the database does not exist) instead of trying
	// the next: a replica that has not replayed CREATE DATABASE yet
	// (synchronous_commit = on waits for the flush, not the replay) fails
	// every connection. So every member must have it before DSN is used.
	return c.wait(ctx, "database "+Database+" on every member", func(ctx context.Context) (bool, string, error) {
		for _, m := range c.members {
			var one int
			if err := queryOn(ctx, m.DSN(Database), "SELECT 1", &one); err != nil {
				return false, "", fmt.Errorf("%s: %w", m.Name, err)
			}
		}
		return true, "", nil
	})
}

// freePorts returns n distinct loopback ports nobody listens on, none of
// forbiddenPorts. The listeners are held until all are chosen, so the ports
// differ; another process may still take one before its server binds it.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	var ports []int
	for len(ports) < n && len(ls) < n+20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		if p := l.Addr().(*net.TCPAddr).Port; !slices.Contains(forbiddenPorts, p) {
			ports = append(ports, p)
		}
	}
	if len(ports) < n {
		return nil, errors.New("no free ports")
	}
	return ports, nil
}

// env is the environment of every process the cluster starts: nothing of
// the test's own (no PG* variable reaches Patroni or PostgreSQL).
func (c *Cluster) env() []string {
	return []string{"PATH=/usr/bin:/bin", "HOME=" + c.dir, "LANG=C.UTF-8", "LC_ALL=C.UTF-8", "TZ=UTC", "PYTHONUNBUFFERED=1"}
}

func (c *Cluster) startEtcd(ctx context.Context) error {
	c.t.Helper()
	client := fmt.Sprintf("http://127.0.0.1:%d", c.etcdClientPort)
	peer := fmt.Sprintf("http://127.0.0.1:%d", c.etcdPeerPort)
	p, err := startProc("etcd", c.dir, filepath.Join(c.dir, "etcd.log"), c.cred, syscall.SIGKILL, c.env(), c.etcdBin,
		"--name", "etcd1",
		"--data-dir", filepath.Join(c.dir, "etcd"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "etcd1="+peer, "--initial-cluster-state", "new", "--initial-cluster-token", c.scope,
		// Patroni's etcd3 section speaks the v3 API through etcd's gRPC
		// gateway (/v3/...), which etcd 3.4 serves on the client URL; the
		// v2 API (Patroni's etcd section) stays off, etcd 3.4's default.
		"--enable-v2=false",
		"--logger", "zap", "--log-outputs", "stderr")
	if err != nil {
		return err
	}
	c.etcd = p
	return c.wait(ctx, "etcd healthy on 127.0.0.1:"+strconv.Itoa(c.etcdClientPort), func(ctx context.Context) (bool, string, error) {
		var h struct {
			Health string `json:"health"`
		}
		if err := getJSON(ctx, client+"/health", &h); err != nil {
			return false, "", err
		}
		return h.Health == "true", "health " + h.Health, nil
	})
}

// writeConfig writes the member's Patroni configuration. It is JSON, which
// YAML (Patroni's format) reads as well.
func (c *Cluster) writeConfig(m *Member) error {
	if err := os.MkdirAll(m.dir, 0o700); err != nil {
		return err
	}
	hba := []string{
		"local all all trust",
		"host all all 127.0.0.1/32 trust",
		"host replication all 127.0.0.1/32 trust",
	}
	cfg := map[string]any{
		"scope":     c.scope,
		"namespace": "/gormlock-test/",
		"name":      m.Name,
		"log":       map[string]any{"level": "INFO"},
		"restapi": map[string]any{
			"listen":          fmt.Sprintf("127.0.0.1:%d", m.RESTPort),
			"connect_address": fmt.Sprintf("127.0.0.1:%d", m.RESTPort),
		},
		"etcd3": map[string]any{
			"hosts":    []string{fmt.Sprintf("127.0.0.1:%d", c.etcdClientPort)},
			"protocol": "http",
		},
		"bootstrap": map[string]any{
			"dcs": map[string]any{
				"ttl":                     int(TTL / time.Second),
				"loop_wait":               int(LoopWait / time.Second),
				"retry_timeout":           int(RetryTimeout / time.Second),
				"maximum_lag_on_failover": MaximumLagOnFailover,
				"synchronous_mode":        true, // Patroni's default is false: asynchronous
				"postgresql": map[string]any{
					"use_pg_rewind": true,
					"use_slots":     true,
					"parameters": map[string]any{
						"wal_level":             "replica",
						"hot_standby":           "on",
						"max_wal_senders":       10,
						"max_replication_slots": 10,
						"wal_log_hints":         "on",
						"synchronous_commit":    "on",
						"max_connections":       100,
					},
					"pg_hba": hba,
				},
			},
			"initdb": []any{map[string]string{"encoding": "UTF8"}, map[string]string{"locale": "C"}},
		},
		"postgresql": map[string]any{
			"listen":          fmt.Sprintf("127.0.0.1:%d", m.Port),
			"connect_address": fmt.Sprintf("127.0.0.1:%d", m.Port),
			"data_dir":        m.dataDir,
			"bin_dir":         c.pgBin,
			// Each node its own: they would otherwise share ~/.pgpass.
			"pgpass": filepath.Join(m.dir, "pgpass"),
			"authentication": map[string]any{
				"superuser":   map[string]string{"username": User},
				"replication": map[string]string{"username": User},
				"rewind":      map[string]string{"username": User},
			},
			// Local settings, not the DCS's: this node's socket
			// directory (not the shared server's /var/run/postgresql),
			// and dynamic shared memory in files under the data
			// directory (pg_dynshmem), not in /dev/shm, where a node
			// killed and never restarted would leave them.
			"parameters": map[string]any{
				"unix_socket_directories":    m.dir,
				"log_line_prefix":            "%m [%p] %b ",
				"dynamic_shared_memory_type": "mmap",
			},
			// A spread checkpoint for the clone's base backup could take
			// minutes.
			"basebackup": []any{map[string]string{"checkpoint": "fast"}},
		},
		// Never the machine's /dev/watchdog.
		"watchdog": map[string]any{"mode": "off"},
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(cfg); err != nil {
		return err
	}
	if err := os.WriteFile(m.config, buf.Bytes(), 0o600); err != nil {
		return err
	}
	if c.cred != nil {
		for _, p := range []string{m.dir, m.config} {
			if err := os.Chown(p, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
				return err
			}
		}
	}
	return nil
}

// launch starts the member's Patroni. Patroni starts the member's postmaster
// itself, in a session of its own (so it is no child of the test process);
// on the test process's death Patroni gets SIGTERM and stops it.
func (c *Cluster) launch(m *Member) error {
	p, err := startProc("patroni "+m.Name, c.dir, m.logPath, c.cred, syscall.SIGTERM, c.env(), c.patroniBin, m.config)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.patroni = p
	m.mu.Unlock()
	return nil
}

// member returns the member called name, nil when there is none.
func (c *Cluster) member(name string) *Member {
	for _, m := range c.members {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// Member returns the member called name (n1, n2, n3), nil when there is
// none.
func (c *Cluster) Member(name string) *Member { return c.member(name) }

// Members returns the members' names.
func (c *Cluster) Members() []string {
	var names []string
	for _, m := range c.members {
		names = append(names, m.Name)
	}
	return names
}

// DSN returns the DSN an application uses: every node, with
// target_session_attrs=read-write, so every new connection goes to
// whichever node takes writes, and a short connect_timeout:
//
//	host=127.0.0.1,127.0.0.1,127.0.0.1 port=p1,p2,p3 user=postgres dbname=gormlock sslmode=disable target_session_attrs=read-write connect_timeout=2
func (c *Cluster) DSN() string {
	var hosts, ports []string
	for _, m := range c.members {
		hosts = append(hosts, "127.0.0.1")
		ports = append(ports, strconv.Itoa(m.Port))
	}
	return fmt.Sprintf("host=%s port=%s user=%s dbname=%s sslmode=disable target_session_attrs=read-write connect_timeout=2",
		strings.Join(hosts, ","), strings.Join(ports, ","), User, Database)
}

// Dir returns the cluster's directory: etcd's data, each member's data and
// configuration, and the logs (etcd.log; n1.log .. n3.log, Patroni's and
// its PostgreSQL's output).
func (c *Cluster) Dir() string { return c.dir }

// MemberStatus is one member as Patroni's REST API (GET /cluster) shows it.
type MemberStatus struct {
	Name string `json:"name"`
	// Role is leader, sync_standby or replica.
	Role string `json:"role"`
	// State is running, starting, stopped, crashed, creating replica,
	// restarting after failure, ...
	State    string `json:"state"`
	Port     int    `json:"port"`
	Timeline int    `json:"timeline"`
	// Lag is the replica's lag in bytes, or "unknown".
	Lag any `json:"lag,omitempty"`
}

// Status is the cluster as Patroni's REST API (GET /cluster) shows it: what
// the DCS holds.
type Status struct {
	Members []MemberStatus `json:"members"`
}

// Leader returns the leader's name, "" when there is none.
func (s Status) Leader() string {
	for _, m := range s.Members {
		if m.Role == "leader" {
			return m.Name
		}
	}
	return ""
}

// SyncStandbys returns the names of the synchronous standbys Patroni named.
func (s Status) SyncStandbys() []string {
	var names []string
	for _, m := range s.Members {
		if m.Role == "sync_standby" {
			names = append(names, m.Name)
		}
	}
	return names
}

// member returns name's entry.
func (s Status) member(name string) (MemberStatus, bool) {
	for _, m := range s.Members {
		if m.Name == name {
			return m, true
		}
	}
	return MemberStatus{}, false
}

func (s Status) String() string {
	var parts []string
	for _, m := range s.Members {
		parts = append(parts, fmt.Sprintf("%s %s/%s tl %d lag %v", m.Name, m.Role, m.State, m.Timeline, m.Lag))
	}
	return "[" + strings.Join(parts, "; ") + "]"
}

// Status returns the cluster as Patroni shows it (GET /cluster), asked of
// the first member whose Patroni runs and answers.
func (c *Cluster) Status(ctx context.Context) (Status, error) {
	var errs []error
	for _, m := range c.members {
		if !m.current().running() {
			continue
		}
		var st Status
		err := getJSON(ctx, fmt.Sprintf("http://127.0.0.1:%d/cluster", m.RESTPort), &st)
		if err == nil {
			return st, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", m.Name, err))
	}
	if len(errs) == 0 {
		return Status{}, errors.New("no member's Patroni is running")
	}
	return Status{}, errors.Join(errs...)
}

// Leader returns the name of the member Patroni shows as the leader,
// running.
func (c *Cluster) Leader(ctx context.Context) (string, error) {
	st, err := c.Status(ctx)
	if err != nil {
		return "", err
	}
	l := st.Leader()
	if m, ok := st.member(l); !ok || m.State != "running" {
		return "", fmt.Errorf("no running leader: %v", st)
	}
	return l, nil
}

// Health is what WaitHealthy and WaitSyncStandby saw.
type Health struct {
	Leader      string
	SyncStandby string
	// Streaming are the replicas streaming from the leader
	// (pg_stat_replication), by name.
	Streaming []string
	Status    Status
}

// WaitHealthy waits until every member whose Patroni runs is in: one leader
// that takes writes, every other one streaming from it, and one of them its
// synchronous standby (Patroni's /cluster names it, and the leader's
// pg_stat_replication shows it sync). A member killed by KillLeader and not
// restarted is not waited for.
func (c *Cluster) WaitHealthy(ctx context.Context) (Health, error) {
	c.t.Helper()
	return c.waitHealth(ctx, "a leader, every running member streaming from it, a synchronous standby", true)
}

// WaitSyncStandby waits until the leader has a synchronous standby again:
// Patroni names one (/cluster), and the leader's pg_stat_replication shows it
// streaming, sync. Other replicas are not waited for.
func (c *Cluster) WaitSyncStandby(ctx context.Context) (Health, error) {
	c.t.Helper()
	return c.waitHealth(ctx, "a synchronous standby named and streaming", false)
}

func (c *Cluster) waitHealth(ctx context.Context, what string, all bool) (Health, error) {
	c.t.Helper()
	var h Health
	err := c.wait(ctx, what, func(ctx context.Context) (bool, string, error) {
		var ok bool
		var why string
		var err error
		h, ok, why, err = c.health(ctx, all)
		return ok, why, err
	})
	if err == nil {
		c.logf("leader %s, sync standby %s, streaming %v; %v", h.Leader, h.SyncStandby, h.Streaming, h.Status)
	}
	return h, err
}

// health reports whether the cluster is as waitHealth wants it, and if not,
// why.
func (c *Cluster) health(ctx context.Context, all bool) (Health, bool, string, error) {
	var h Health
	st, err := c.Status(ctx)
	if err != nil {
		return h, false, "", err
	}
	h.Status = st
	h.Leader = st.Leader()
	lm, ok := st.member(h.Leader)
	if !ok || lm.State != "running" {
		return h, false, fmt.Sprintf("no running leader %v", st), nil
	}
	syncs := st.SyncStandbys()
	if len(syncs) == 0 {
		return h, false, fmt.Sprintf("no sync standby named %v", st), nil
	}
	h.SyncStandby = syncs[0]
	leader := c.member(h.Leader)
	if leader == nil || !leader.current().running() {
		return h, false, fmt.Sprintf("the leader %s is not a running member %v", h.Leader, st), nil
	}
	if all {
		for _, m := range c.members {
			if !m.current().running() || m.Name == h.Leader {
				continue
			}
			if ms, ok := st.member(m.Name); !ok || ms.State != "running" {
				return h, false, fmt.Sprintf("%s not running %v", m.Name, st), nil
			}
		}
	}
	conn, err := pgx.Connect(ctx, leader.DSN("postgres"))
	if err != nil {
		return h, false, "", fmt.Errorf("the leader %s: %w", h.Leader, err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	var inRecovery bool
	var ssn string
	if err := conn.QueryRow(ctx, "SELECT pg_is_in_recovery(), current_setting('synchronous_standby_names')").Scan(&inRecovery, &ssn); err != nil {
		return h, false, "", fmt.Errorf("the leader %s: %w", h.Leader, err)
	}
	if inRecovery {
		return h, false, fmt.Sprintf("the leader %s is still in recovery", h.Leader), nil
	}
	rows, err := conn.Query(ctx, "SELECT application_name, state, sync_state FROM pg_stat_replication")
	if err != nil {
		return h, false, "", fmt.Errorf("the leader %s: %w", h.Leader, err)
	}
	type rep struct{ state, sync string }
	reps := map[string]rep{}
	for rows.Next() {
		var name, state, sync string
		if err := rows.Scan(&name, &state, &sync); err != nil {
			return h, false, "", err
		}
		reps[name] = rep{state, sync}
		if state == "streaming" {
			h.Streaming = append(h.Streaming, name)
		}
	}
	if err := rows.Err(); err != nil {
		return h, false, "", err
	}
	slices.Sort(h.Streaming)
	desc := fmt.Sprintf("leader %s synchronous_standby_names %q, replication %v, %v", h.Leader, ssn, reps, st)
	if r := reps[h.SyncStandby]; r.state != "streaming" || r.sync != "sync" {
		return h, false, desc, nil
	}
	if all {
		for _, m := range c.members {
			if m.current().running() && m.Name != h.Leader && reps[m.Name].state != "streaming" {
				return h, false, desc, nil
			}
		}
	}
	return h, true, desc, nil
}

// WaitLeader waits until a member other than not leads and takes writes,
// and returns its name.
func (c *Cluster) WaitLeader(ctx context.Context, not string) (string, error) {
	c.t.Helper()
	var leader string
	err := c.wait(ctx, "a leader other than "+not+" taking writes", func(ctx context.Context) (bool, string, error) {
		st, err := c.Status(ctx)
		if err != nil {
			return false, "", err
		}
		l := st.Leader()
		if ms, ok := st.member(l); !ok || l == not || ms.State != "running" {
			return false, st.String(), nil
		}
		var inRecovery bool
		if err := queryOn(ctx, c.member(l).DSN("postgres"), "SELECT pg_is_in_recovery()", &inRecovery); err != nil {
			return false, "", err
		}
		leader = l
		return !inRecovery, fmt.Sprintf("%s in recovery: %v", l, inRecovery), nil
	})
	return leader, err
}

// Switchover asks the leader's Patroni (POST /switchover, with the leader
// and the candidate to) to hand the leadership to to, which in synchronous
// mode must be the synchronous standby, and returns once to leads and takes
// writes. It returns the former leader's name.
func (c *Cluster) Switchover(ctx context.Context, to string) (from string, err error) {
	c.t.Helper()
	if c.member(to) == nil {
		return "", fmt.Errorf("switchover: no member %q", to)
	}
	from, err = c.Leader(ctx)
	if err != nil {
		return "", fmt.Errorf("switchover: %w", err)
	}
	if from == to {
		return from, fmt.Errorf("switchover: %s leads already", to)
	}
	body, _ := json.Marshal(map[string]string{"leader": from, "candidate": to})
	began := time.Now()
	code, text, err := post(ctx, fmt.Sprintf("http://127.0.0.1:%d/switchover", c.member(from).RESTPort), body)
	if err != nil {
		return from, fmt.Errorf("switchover %s -> %s: %w", from, to, err)
	}
	c.logf("POST /switchover %s -> %s answered %d %q after %v", from, to, code, text, time.Since(began).Round(time.Millisecond))
	// 503 "Switchover status unknown": Patroni stopped polling; the DCS
	// tells.
	if code != 200 && !(code == 503 && strings.Contains(text, "unknown")) {
		return from, fmt.Errorf("switchover %s -> %s: %d %s", from, to, code, text)
	}
	if err := c.wait(ctx, to+" leading and taking writes", func(ctx context.Context) (bool, string, error) {
		st, err := c.Status(ctx)
		if err != nil {
			return false, "", err
		}
		if l := st.Leader(); l != to {
			return false, st.String(), nil
		}
		var inRecovery bool
		if err := queryOn(ctx, c.member(to).DSN("postgres"), "SELECT pg_is_in_recovery()", &inRecovery); err != nil {
			return false, "", err
		}
		return !inRecovery, "", nil
	}); err != nil {
		return from, fmt.Errorf("switchover %s -> %s: %w", from, to, err)
	}
	return from, nil
}

// KillLeader kills the leader node as a crash of its machine would: its
// Patroni (and Patroni's process group), its postmaster and the postmaster's
// children are all stopped (SIGSTOP) and then killed (SIGKILL), by process
// id. It returns the killed member's name once they are gone. Patroni's
// leader key in etcd stays until its TTL expires; then a replica is promoted
// (WaitLeader). Restart brings the member back.
func (c *Cluster) KillLeader(ctx context.Context) (string, error) {
	c.t.Helper()
	name, err := c.Leader(ctx)
	if err != nil {
		return "", fmt.Errorf("kill leader: %w", err)
	}
	m := c.member(name)
	pm := postmasterPID(m.dataDir)
	if pm == 0 {
		return name, fmt.Errorf("kill leader %s: no postmaster runs on %s", name, m.dataDir)
	}
	m.mu.Lock()
	p := m.patroni
	m.patroni = nil
	m.mu.Unlock()
	if !p.running() {
		return name, fmt.Errorf("kill leader %s: its Patroni is not running", name)
	}
	// Freeze everything first, so that the crash is one instant: Patroni
	// cannot restart or demote its PostgreSQL, the postmaster forks nothing.
	_ = syscall.Kill(-p.pid(), syscall.SIGSTOP)
	_ = syscall.Kill(pm, syscall.SIGSTOP)
	kids := children(pm)
	for _, k := range kids {
		_ = syscall.Kill(k, syscall.SIGSTOP)
	}
	_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
	for _, pid := range append([]int{pm}, kids...) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	errs := []error{p.kill(), waitGone(append([]int{pm}, kids...), stopTimeout)}
	if err := errors.Join(errs...); err != nil {
		return name, fmt.Errorf("kill leader %s: %w", name, err)
	}
	c.logf("killed the leader %s: patroni pid %d, postmaster pid %d and its %d children (kill -9)", name, p.pid(), pm, len(kids))
	return name, nil
}

// Restart starts the Patroni of a member KillLeader killed. It returns once
// Patroni runs; the member rejoins on its own (Patroni rewinds its data
// directory with pg_rewind when it diverged from the new leader's timeline):
// WaitHealthy waits for it.
func (c *Cluster) Restart(ctx context.Context, name string) error {
	c.t.Helper()
	m := c.member(name)
	if m == nil {
		return fmt.Errorf("restart: no member %q", name)
	}
	if m.current().running() {
		return fmt.Errorf("restart %s: its Patroni is running", name)
	}
	if pm := postmasterPID(m.dataDir); pm != 0 {
		return fmt.Errorf("restart %s: its postmaster %d still runs", name, pm)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := c.launch(m); err != nil {
		return fmt.Errorf("restart %s: %w", name, err)
	}
	c.logf("restarted patroni on %s (pid %d)", name, m.current().pid())
	return nil
}

// LogLines returns the lines of member name's log (Patroni's output, and
// its PostgreSQL's and pg_rewind's) that contain any of substrings.
func (c *Cluster) LogLines(name string, substrings ...string) []string {
	m := c.member(name)
	if m == nil {
		return nil
	}
	data, err := os.ReadFile(m.logPath)
	if err != nil {
		return nil
	}
	var out []string
	for line := range strings.SplitSeq(string(data), "\n") {
		for _, s := range substrings {
			if strings.Contains(line, s) {
				out = append(out, line)
				break
			}
		}
	}
	return out
}

// wait calls cond every pollInterval until it reports done or ctx ends,
// logging how long it took, and every progressEvery what it still waits
// for. An error from cond is remembered and waited through (a node
// restarting refuses connections); a Patroni or etcd process that exited
// without being killed ends the wait.
func (c *Cluster) wait(ctx context.Context, what string, cond func(ctx context.Context) (bool, string, error)) error {
	c.t.Helper()
	began := time.Now()
	next := began.Add(progressEvery)
	var last string
	for {
		if err := c.exited(); err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		cctx, cancel := context.WithTimeout(ctx, requestTimeout)
		done, state, err := cond(cctx)
		cancel()
		if err != nil {
			state = "error: " + err.Error()
		}
		if state != "" {
			last = state
		}
		if done {
			c.logf("%s: after %v", what, time.Since(began).Round(100*time.Millisecond))
			return nil
		}
		if time.Now().After(next) {
			c.logf("still waiting for %s (%v): %s", what, time.Since(began).Round(time.Second), last)
			next = time.Now().Add(progressEvery)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w after %v (last: %s)", what, ctx.Err(), time.Since(began).Round(time.Second), last)
		case <-time.After(pollInterval):
		}
	}
}

// exited returns an error when etcd or a Patroni the cluster did not kill
// has exited.
func (c *Cluster) exited() error {
	if c.etcd != nil && !c.etcd.running() {
		return fmt.Errorf("etcd exited: %v", c.etcd.cmd.ProcessState)
	}
	for _, m := range c.members {
		if p := m.current(); p != nil && !p.running() {
			return fmt.Errorf("patroni on %s exited: %v", m.Name, p.cmd.ProcessState)
		}
	}
	return nil
}

// Stop stops everything the cluster started, by process id, and removes its
// directory. Every Patroni gets SIGKILL (with its process group: a
// pg_basebackup or pg_rewind it runs), so none of them acts on the others'
// shutdown; then every postmaster gets SIGQUIT (an immediate shutdown, which
// removes its shared memory) and SIGKILL with its children after
// stopTimeout; then etcd gets SIGTERM, SIGKILL after stopTimeout. It is
// idempotent and bounded in time; Start registers it with t.Cleanup.
func (c *Cluster) Stop() error {
	c.t.Helper()
	c.stopOnce.Do(func() {
		if c.t.Failed() {
			c.t.Logf("patroni: the logs:%s", c.logTails())
		}
		var errs []error
		for _, m := range c.members {
			m.mu.Lock()
			p := m.patroni
			m.patroni = nil
			m.mu.Unlock()
			errs = append(errs, p.kill())
		}
		for _, m := range c.members {
			if pm := postmasterPID(m.dataDir); pm != 0 {
				errs = append(errs, quitPostmaster(pm))
			}
			errs = append(errs, removeStaleShm(m.dataDir))
		}
		// A postmaster whose postmaster.pid was not written yet, or
		// another process left running with this cluster's directory in
		// its arguments: by construction, one of this cluster's.
		errs = append(errs, c.sweep())
		if c.etcd != nil {
			errs = append(errs, c.etcd.stop(syscall.SIGTERM))
		}
		switch {
		case c.dir == "":
		case c.t.Failed() && os.Getenv(KeepEnv) == "1":
			c.t.Logf("patroni: %s=1: kept %s", KeepEnv, c.dir)
		default:
			errs = append(errs, os.RemoveAll(c.dir))
		}
		c.stopErr = errors.Join(errs...)
		c.logf("stopped")
	})
	return c.stopErr
}

// sweep kills any process, other than etcd, whose arguments name a path in
// the cluster's directory (a postmaster, or a Patroni helper), with its
// children.
func (c *Cluster) sweep() error {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var errs []error
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() || (c.etcd != nil && pid == c.etcd.pid()) {
			continue
		}
		for _, a := range cmdline(pid) {
			if strings.HasPrefix(a, c.dir+"/") || strings.HasPrefix(a, "-D"+c.dir+"/") || strings.HasPrefix(a, "--config-file="+c.dir+"/") {
				c.t.Logf("patroni: left running: pid %d %v", pid, cmdline(pid))
				errs = append(errs, killTree(pid))
				break
			}
		}
	}
	return errors.Join(errs...)
}

// logTails returns the last lines of etcd's and the members' logs, for a
// failure message.
func (c *Cluster) logTails() string {
	var b strings.Builder
	logs := []string{filepath.Join(c.dir, "etcd.log")}
	for _, m := range c.members {
		logs = append(logs, m.logPath)
	}
	for _, path := range logs {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		fmt.Fprintf(&b, "\n--- %s (last %d lines) ---\n%s", filepath.Base(path), len(lines), strings.Join(lines, "\n"))
	}
	return b.String()
}

// queryOn runs query on a fresh connection to dsn and scans its one row
// into dest.
func queryOn(ctx context.Context, dsn, query string, dest ...any) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	return conn.QueryRow(ctx, query).Scan(dest...)
}

// execOn runs stmt on a fresh connection to dsn.
func execOn(ctx context.Context, dsn, stmt string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if _, err := conn.Exec(ctx, stmt); err != nil {
		return fmt.Errorf("%s: %w", stmt, err)
	}
	return nil
}
