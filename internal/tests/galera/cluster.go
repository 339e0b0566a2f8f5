//go:build unix

package galera

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Size is the number of nodes of a cluster.
const Size = 3

// DefaultDatabase is the database Launch creates when Config.Database is
// empty.
const DefaultDatabase = "gormlock"

// DefaultTimeout bounds a launch when Config.Timeout is zero: on 2 cores a
// launch takes about 12 s, most of it the two state transfers.
const DefaultTimeout = 5 * time.Minute

// stopGrace is how long Stop waits for a node to shut down after SIGTERM
// before it kills it.
const stopGrace = 20 * time.Second

// dirPrefix starts the name of every directory Launch creates under
// os.TempDir(), so that a later launch can find the ones a killed process
// left behind.
const dirPrefix = "gormlock-galera-"

// stateFile is the file in a cluster's directory that records who launched
// it and the nodes' ports and pids (see Attach).
const stateFile = "cluster.json"

// ErrMissing is matched by the error Launch and Requirements return when a
// binary the cluster needs is not installed.
var ErrMissing = errors.New("galera: not installed")

// Config says how to launch a cluster.
type Config struct {
	// Dir is the cluster's directory; it must not exist or be empty. ""
	// means a new directory under os.TempDir().
	Dir string
	// Database is the database created on the cluster; "" means
	// DefaultDatabase.
	Database string
	// Detached leaves the nodes running after the launching process exits
	// (the galera command). Otherwise they are killed when it dies, even by
	// SIGKILL (Linux's parent-death signal).
	Detached bool
	// Timeout bounds the launch; 0 means DefaultTimeout.
	Timeout time.Duration
	// Logf, when set, is told each step of the launch.
	Logf func(format string, args ...any)
}

// Node is one mariadbd of a cluster.
type Node struct {
	Name      string `json:"name"`       // n1, n2, n3
	Port      int    `json:"port"`       // the client (SQL) port
	GcommPort int    `json:"gcomm_port"` // group communication
	SSTPort   int    `json:"sst_port"`   // state snapshot transfer (rsync)
	ISTPort   int    `json:"ist_port"`   // incremental state transfer
	Dir       string `json:"dir"`        // my.cnf, data/, error.log
	PID       int    `json:"pid"`        // 0 before it started

	exited chan struct{} // closed when the process ended (a process this one started)
}

// Config is the path of the node's option file.
func (n *Node) Config() string { return filepath.Join(n.Dir, "my.cnf") }

// ErrorLog is the path of the node's error log.
func (n *Node) ErrorLog() string { return filepath.Join(n.Dir, "error.log") }

// DataDir is the path of the node's data directory.
func (n *Node) DataDir() string { return filepath.Join(n.Dir, "data") }

// Cluster is a running three-node Galera cluster.
type Cluster struct {
	// Dir is the cluster's directory ("" for a cluster named by DSNs).
	Dir string `json:"dir"`
	// Database is the database Launch created.
	Database string `json:"database"`
	// Nodes are the nodes, node 1 (the one that bootstrapped) first.
	Nodes []*Node `json:"nodes"`
	// Owner is the pid of the process that launched the cluster.
	Owner int `json:"owner"`
	// Detached says whether the nodes outlive Owner.
	Detached bool `json:"detached"`
	// StartTime is how long the launch took, from the first install step to
	// the database created on a Synced cluster of three (not counting a
	// wait for another process's launch).
	StartTime time.Duration `json:"start_time"`

	dsns    []string // a cluster named by DSNs (External)
	removes bool     // Stop removes Dir
	mu      sync.Mutex
	stopped bool
}

// DSN returns the go-sql-driver/mysql DSN of node i (0, 1 or 2) and the
// cluster's database: root@tcp(127.0.0.1:PORT)/DB?parseTime=true.
func (c *Cluster) DSN(i int) string {
	if c.dsns != nil {
		return c.dsns[i]
	}
	return nodeDSN(c.Nodes[i].Port, c.Database, nil)
}

// DSNs returns the DSNs of the three nodes, in order.
func (c *Cluster) DSNs() []string {
	out := make([]string, Size)
	for i := range out {
		out[i] = c.DSN(i)
	}
	return out
}

// nodeDSN is the DSN of a node on loopback, with params added.
func nodeDSN(port int, db string, params map[string]string) string {
	cfg := mysql.NewConfig()
	cfg.User = "root"
	cfg.Net = "tcp"
	cfg.Addr = "127.0.0.1:" + strconv.Itoa(port)
	cfg.DBName = db
	cfg.ParseTime = true
	cfg.Params = params
	return cfg.FormatDSN()
}

// Launch creates and starts a cluster as cfg says, and returns once every
// node is Synced in a cluster of three and the database exists. On an error
// it stops whatever it started, removes what it created, and the error
// carries the tail of the failing node's error log. ctx and cfg.Timeout
// bound the launch.
func Launch(ctx context.Context, cfg Config) (_ *Cluster, err error) {
	began := time.Now()
	bins, err := Requirements()
	if err != nil {
		return nil, err
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Database == "" {
		cfg.Database = DefaultDatabase
	}
	if !validName(cfg.Database) {
		return nil, fmt.Errorf("galera: database name %q: use letters, digits and _", cfg.Database)
	}
	logf := cfg.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()

	// Picking free ports and binding them is one step for every launch on
	// the machine: two test binaries launching at once never pick the same
	// port.
	unlock, err := lockLaunches(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if waited := time.Since(began); waited > time.Second {
		logf("galera: waited %v for another launch to finish", waited.Round(time.Millisecond))
	}
	began = time.Now()
	if cfg.Dir == "" {
		sweepStale(logf)
	}

	c := &Cluster{Database: cfg.Database, Owner: os.Getpid(), Detached: cfg.Detached}
	if c.Dir, c.removes, err = makeDir(cfg.Dir); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = c.Stop()
		}
	}()
	ports, err := freePorts(4 * Size)
	if err != nil {
		return nil, err
	}
	for i := range Size {
		c.Nodes = append(c.Nodes, &Node{Name: fmt.Sprintf("n%d", i+1), Dir: filepath.Join(c.Dir, fmt.Sprintf("n%d", i+1)),
			Port: ports[4*i], GcommPort: ports[4*i+1], SSTPort: ports[4*i+2], ISTPort: ports[4*i+3]})
	}
	if err := c.save(); err != nil {
		return nil, err
	}
	run, err := runAs()
	if err != nil {
		return nil, err
	}
	for _, n := range c.Nodes {
		if err := os.MkdirAll(n.Dir, 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(n.Config(), []byte(c.optionFile(n, bins)), 0o644); err != nil {
			return nil, err
		}
	}
	if err := run.chown(c.Dir); err != nil {
		return nil, err
	}

	// One install; the joiners start from a copy, which the state transfer
	// replaces anyway.
	n1 := c.Nodes[0]
	install := exec.CommandContext(ctx, bins.InstallDB, "--defaults-file="+n1.Config(), "--skip-test-db",
		// root@127.0.0.1 without a password, for the tests on loopback.
		"--auth-root-authentication-method=normal")
	install.Env = childEnv()
	install.SysProcAttr = run.attr(false)
	if out, err := install.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("galera: mariadb-install-db: %w\n%s", err, tail(out, 20))
	}
	for _, n := range c.Nodes[1:] {
		if err := copyTree(n1.DataDir(), n.DataDir()); err != nil {
			return nil, err
		}
	}
	if err := run.chown(c.Dir); err != nil {
		return nil, err
	}
	logf("galera: installed %s in %v", c.Dir, time.Since(began).Round(time.Millisecond))

	// Node 1 bootstraps the cluster; the others join one at a time (a
	// donor serves one state transfer at a time: starting them together
	// saves nothing).
	for i, n := range c.Nodes {
		args := []string{"--defaults-file=" + n.Config()}
		if i == 0 {
			args = append(args, "--wsrep-new-cluster")
		}
		if err := c.startNode(n, bins.Mariadbd, args, run, cfg.Detached); err != nil {
			return nil, err
		}
		if err := c.save(); err != nil {
			return nil, err
		}
		if err := waitNode(ctx, n, i == 0); err != nil {
			return nil, err
		}
		logf("galera: %s (port %d) synced after %v", n.Name, n.Port, time.Since(began).Round(time.Millisecond))
	}
	for _, n := range c.Nodes {
		if err := waitClusterSize(ctx, n); err != nil {
			return nil, err
		}
	}
	if err := createDatabase(ctx, c.Nodes, c.Database); err != nil {
		return nil, err
	}
	c.StartTime = time.Since(began)
	if err := c.save(); err != nil {
		return nil, err
	}
	logf("galera: cluster of %d up in %v, database %s", Size, c.StartTime.Round(time.Millisecond), c.Database)
	return c, nil
}

// Attach returns the cluster whose directory is dir, as its launch recorded
// it, for stopping a cluster another process launched (Detached). With
// keep, Stop shuts the nodes down cleanly and keeps the directory.
func Attach(dir string, keep bool) (*Cluster, error) {
	c, err := readState(dir)
	if err != nil {
		return nil, err
	}
	c.Dir = dir
	c.removes = !keep
	return c, nil
}

// Running reports whether every node of the cluster is a running process.
func (c *Cluster) Running() bool {
	if len(c.Nodes) != Size {
		return false
	}
	for _, n := range c.Nodes {
		if n.PID == 0 || !isNode(n.PID, n) {
			return false
		}
	}
	return true
}

// Stop stops the nodes Launch started, by pid, and removes the cluster's
// directory. The nodes are killed (SIGKILL): their data goes with the
// directory. A cluster opened with Attach(dir, true) is shut down instead
// (SIGTERM, SIGKILL for a node still running stopGrace later) and its
// directory kept. Stopping a cluster named by DSNs, or one already stopped,
// does nothing.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped || c.dsns != nil {
		return nil
	}
	c.stopped = true
	var wg sync.WaitGroup
	errs := make([]error, len(c.Nodes))
	for i, n := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = stopNode(n, c.removes)
		}()
	}
	wg.Wait()
	err := errors.Join(errs...)
	if err == nil && c.removes && c.Dir != "" {
		err = os.RemoveAll(c.Dir)
	}
	return err
}

// stopNode ends one node's process, if it is still the node's: with
// SIGKILL when its data is discarded, else with SIGTERM and SIGKILL when it
// is still running stopGrace later.
func stopNode(n *Node, discard bool) error {
	if n.PID == 0 {
		return nil
	}
	gone := func() bool {
		if n.exited != nil {
			select {
			case <-n.exited:
				return true
			default:
				return false
			}
		}
		return !isNode(n.PID, n)
	}
	if gone() {
		return nil
	}
	// A cluster whose directory goes is thrown away: nothing to shut down
	// cleanly for.
	sig := syscall.SIGTERM
	if discard {
		sig = syscall.SIGKILL
	}
	if err := syscall.Kill(n.PID, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("galera: stop %s (pid %d): %w", n.Name, n.PID, err)
	}
	deadline := time.Now().Add(stopGrace)
	for !gone() {
		if time.Now().After(deadline) {
			_ = syscall.Kill(n.PID, syscall.SIGKILL)
			deadline = time.Now().Add(stopGrace)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// startNode starts mariadbd for n. A process the launcher owns runs in a
// goroutine locked to its OS thread for the process's whole life: the
// parent-death signal is tied to the thread that started the child, and Go
// would otherwise be free to end that thread first.
func (c *Cluster) startNode(n *Node, mariadbd string, args []string, run *runner, detached bool) error {
	out, err := os.OpenFile(filepath.Join(n.Dir, "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(mariadbd, args...)
	cmd.Env = childEnv()
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = run.attr(detached)
	started := make(chan error, 1)
	n.exited = make(chan struct{})
	go func() {
		defer close(n.exited)
		defer out.Close()
		lockThread()
		if err := cmd.Start(); err != nil {
			started <- fmt.Errorf("galera: start %s: %w", n.Name, err)
			return
		}
		started <- nil
		_ = cmd.Wait()
	}()
	if err := <-started; err != nil {
		return err
	}
	n.PID = cmd.Process.Pid
	return nil
}

// optionFile is node n's my.cnf.
func (c *Cluster) optionFile(n *Node, bins Binaries) string {
	var gcomm []string
	for _, m := range c.Nodes {
		gcomm = append(gcomm, fmt.Sprintf("127.0.0.1:%d", m.GcommPort))
	}
	lines := []string{
		"[mysqld]",
		"datadir=" + n.DataDir(),
		"socket=" + filepath.Join(n.Dir, "mysqld.sock"),
		"pid-file=" + filepath.Join(n.Dir, "mysqld.pid"),
		"log-error=" + n.ErrorLog(),
		"port=" + strconv.Itoa(n.Port),
		"bind-address=127.0.0.1",
		"skip-name-resolve",
		"character-set-server=utf8mb4",
		"collation-server=utf8mb4_general_ci",
		"binlog_format=ROW",
		"default_storage_engine=InnoDB",
		"innodb_autoinc_lock_mode=2",
		"innodb_buffer_pool_size=64M",
		"innodb_log_file_size=32M",
		// Galera's own advice: durability comes from the other nodes.
		"innodb_flush_log_at_trx_commit=2",
		"performance_schema=OFF",
		"max_connections=300",
		"wsrep_on=ON",
		"wsrep_provider=" + bins.Provider,
		// One name for every node of the cluster, another for every cluster.
		"wsrep_cluster_name=gormlock-" + strconv.Itoa(c.Nodes[0].Port),
		"wsrep_cluster_address=gcomm://" + strings.Join(gcomm, ","),
		"wsrep_node_name=" + n.Name,
		fmt.Sprintf("wsrep_node_address=127.0.0.1:%d", n.GcommPort),
		"wsrep_sst_method=rsync",
		fmt.Sprintf("wsrep_sst_receive_address=127.0.0.1:%d", n.SSTPort),
		// ist.recv_addr must be set: its default, the gcomm port + 1, may
		// be another node's gcomm port.
		fmt.Sprintf(`wsrep_provider_options="gmcast.listen_addr=tcp://127.0.0.1:%d;ist.recv_addr=127.0.0.1:%d;gcache.size=32M"`, n.GcommPort, n.ISTPort),
	}
	return strings.Join(lines, "\n") + "\n"
}

// waitNode waits until n is ready: node 1 in a primary component, a joiner
// Synced. A node that exits, or the end of ctx, ends the wait with the tail
// of its error log.
func waitNode(ctx context.Context, n *Node, bootstrap bool) error {
	db, err := sql.Open("mysql", nodeDSN(n.Port, "", map[string]string{"timeout": "2s", "readTimeout": "10s"}))
	if err != nil {
		return err
	}
	defer db.Close()
	var last error
	for {
		st, err := status(ctx, db)
		var my *mysql.MySQLError
		switch {
		case errors.As(err, &my) && (my.Number == 1045 || my.Number == 1130):
			return fmt.Errorf("galera: %s refuses root@127.0.0.1: %w", n.Name, err)
		case err != nil:
			last = err
		case bootstrap && st["wsrep_ready"] == "ON" && st["wsrep_cluster_status"] == "Primary":
			return nil
		case !bootstrap && st["wsrep_local_state_comment"] == "Synced" && st["wsrep_ready"] == "ON":
			return nil
		default:
			last = fmt.Errorf("state %s, ready %s", st["wsrep_local_state_comment"], st["wsrep_ready"])
		}
		select {
		case <-n.exited:
			return fmt.Errorf("galera: %s exited while starting\n%s", n.Name, logTail(n))
		case <-ctx.Done():
			return fmt.Errorf("galera: %s not ready (%v): %w\n%s", n.Name, last, ctx.Err(), logTail(n))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitClusterSize waits until n sees a cluster of Size nodes.
func waitClusterSize(ctx context.Context, n *Node) error {
	db, err := sql.Open("mysql", nodeDSN(n.Port, "", map[string]string{"timeout": "2s", "readTimeout": "10s"}))
	if err != nil {
		return err
	}
	defer db.Close()
	for {
		st, err := status(ctx, db)
		if err == nil && st["wsrep_cluster_size"] == strconv.Itoa(Size) && st["wsrep_local_state_comment"] == "Synced" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("galera: %s does not see %d synced nodes (%v, %v): %w\n%s", n.Name, Size, st, err, ctx.Err(), logTail(n))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// status reads a node's wsrep status variables.
func status(ctx context.Context, db *sql.DB) (map[string]string, error) {
	rows, err := db.QueryContext(ctx, "SHOW GLOBAL STATUS LIKE 'wsrep%'")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	st := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		st[k] = v
	}
	return st, rows.Err()
}

// createDatabase creates db on the first node and waits until every node
// has it: a DDL statement is applied on the other nodes after it returned
// on the first, and a causal read (wsrep_sync_wait) waits for that.
func createDatabase(ctx context.Context, nodes []*Node, name string) error {
	for i, n := range nodes {
		db, err := sql.Open("mysql", nodeDSN(n.Port, "", map[string]string{"timeout": "2s", "wsrep_sync_wait": "1"}))
		if err != nil {
			return err
		}
		if i == 0 {
			_, err = db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+name+" CHARACTER SET utf8mb4")
		}
		var got string
		if err == nil {
			err = db.QueryRowContext(ctx, "SELECT schema_name FROM information_schema.schemata WHERE schema_name = ?", name).Scan(&got)
		}
		_ = db.Close()
		if err != nil {
			return fmt.Errorf("galera: database %s on %s: %w", name, n.Name, err)
		}
	}
	return nil
}

// save writes the cluster's state file.
func (c *Cluster) save() error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(c.Dir, stateFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(c.Dir, stateFile))
}

// readState reads the state file of the cluster in dir.
func readState(dir string) (*Cluster, error) {
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return nil, fmt.Errorf("galera: no cluster in %s: %w", dir, err)
	}
	c := &Cluster{}
	if err := json.Unmarshal(b, c); err != nil {
		return nil, fmt.Errorf("galera: %s: %w", filepath.Join(dir, stateFile), err)
	}
	return c, nil
}

// makeDir creates the cluster's directory and says whether Stop removes
// it.
func makeDir(dir string) (string, bool, error) {
	if dir == "" {
		d, err := os.MkdirTemp("", dirPrefix)
		if err != nil {
			return "", false, err
		}
		return d, true, os.Chmod(d, 0o755)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", false, err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return "", false, err
	}
	if entries, err := os.ReadDir(abs); err != nil || len(entries) > 0 {
		return "", false, fmt.Errorf("galera: %s is not empty (a cluster already there? stop it first)", abs)
	}
	return abs, true, nil
}

// sweepStale removes what launches by processes that died left under
// os.TempDir(): the directory of a cluster whose owner is gone, after
// killing any node process still running from it (by the pid recorded
// there, and only if that process is still the node). Detached clusters
// are left alone.
func sweepStale(logf func(string, ...any)) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, dir := range dirs {
		c, err := readState(dir)
		if err != nil || c.Detached || c.Owner == 0 || alive(c.Owner) {
			continue
		}
		for _, n := range c.Nodes {
			if n.PID != 0 && isNode(n.PID, n) {
				_ = syscall.Kill(n.PID, syscall.SIGKILL)
			}
		}
		logf("galera: removing %s, left by process %d", dir, c.Owner)
		_ = os.RemoveAll(dir)
	}
}

// alive reports whether a process with the pid exists.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// validName reports whether s is a plain SQL identifier.
func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// logTail is the end of node n's error log, for an error message.
func logTail(n *Node) string {
	b, err := os.ReadFile(n.ErrorLog())
	if err != nil {
		b, _ = os.ReadFile(filepath.Join(n.Dir, "stdout.log"))
	}
	// A refused connection attempt while the node starts is logged as
	// "Aborted connection": noise here.
	var keep []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.Contains(l, "Aborted connection") {
			keep = append(keep, l)
		}
	}
	return fmt.Sprintf("--- last lines of %s ---\n%s", n.ErrorLog(), tail([]byte(strings.Join(keep, "\n")), 30))
}

// tail returns the last n lines of b.
func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// childEnv is the environment of the processes Launch starts: the state
// transfer scripts mariadbd runs need the system directories on PATH.
func childEnv() []string {
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"}
	if tz, ok := os.LookupEnv("TZ"); ok {
		env = append(env, "TZ="+tz)
	}
	return env
}
