//go:build unix

package galera

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// DSNsEnv names the environment variable that points the tests at a
// running cluster instead of launching one: the three nodes' DSNs in
// go-sql-driver/mysql's form, separated by commas (what the galera command's
// start prints). The user must be allowed to create and drop databases.
const DSNsEnv = "GORMLOCK_GALERA_DSNS"

// shared is the cluster of this test binary.
var shared struct {
	mu       sync.Mutex
	main     bool // Main runs the tests
	launched bool
	c        *Cluster
	err      error
}

// Main runs a test package's tests and then stops the cluster Start
// launched for them. A package whose tests call Start calls it from
// TestMain:
//
//	func TestMain(m *testing.M) { galera.Main(m) }
func Main(m *testing.M) {
	shared.mu.Lock()
	shared.main = true
	shared.mu.Unlock()
	code := m.Run()
	shared.mu.Lock()
	c := shared.c
	shared.mu.Unlock()
	if c != nil {
		began := time.Now()
		if err := c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "galera: stopping the cluster:", err)
			if code == 0 {
				code = 1
			}
		} else if testing.Verbose() {
			fmt.Fprintf(os.Stderr, "galera: cluster stopped in %v\n", time.Since(began).Round(time.Millisecond))
		}
	}
	os.Exit(code)
}

// Start returns the cluster this test binary's tests share: the one
// GORMLOCK_GALERA_DSNS names, or else one launched on the first call (and
// stopped by Main). Later calls return the same cluster, or the same
// failure. The test is skipped when the binaries are missing — failed under
// CI=true — and under -short.
func Start(t testing.TB) *Cluster {
	t.Helper()
	env := os.Getenv(DSNsEnv)
	if env == "" {
		if testing.Short() {
			t.Skip("galera: cluster tests skipped in -short mode")
		}
		if _, err := Requirements(); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("galera: CI=true and the Galera cluster cannot be launched: %v", err)
			}
			t.Skipf("galera: cluster tests skipped: %v; or set %s to a running cluster's DSNs", err, DSNsEnv)
		}
	}
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if env == "" && !shared.main {
		t.Fatal("galera: Start needs galera.Main in the package's TestMain, which stops the cluster")
	}
	if !shared.launched {
		shared.launched = true
		if env != "" {
			shared.c, shared.err = External(strings.Split(env, ","))
			if shared.err != nil {
				shared.err = fmt.Errorf("%s: %w", DSNsEnv, shared.err)
			}
		} else {
			shared.c, shared.err = Launch(context.Background(), Config{Logf: func(f string, a ...any) {
				if testing.Verbose() {
					fmt.Fprintf(os.Stderr, f+"\n", a...)
				}
			}})
		}
	}
	if shared.err != nil {
		t.Fatalf("galera: launching the cluster: %v", shared.err)
	}
	return shared.c
}

// External returns the cluster whose nodes' DSNs are dsns (three of them).
// Stop does nothing to it.
func External(dsns []string) (*Cluster, error) {
	if len(dsns) != Size {
		return nil, fmt.Errorf("want %d DSNs separated by commas, got %d", Size, len(dsns))
	}
	c := &Cluster{}
	for _, d := range dsns {
		cfg, err := mysql.ParseDSN(strings.TrimSpace(d))
		if err != nil {
			return nil, err
		}
		cfg.ParseTime = true
		c.dsns = append(c.dsns, cfg.FormatDSN())
		c.Database = cfg.DBName
	}
	return c, nil
}

// NewDatabase creates a new, empty database (gl_ and random hex) on the
// cluster, waits until every node has it, and returns the three nodes' DSNs
// for it. The database is dropped when the test ends, after the cleanups
// registered later (closing the test's connections) ran.
func (c *Cluster) NewDatabase(t testing.TB) []string {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "gl_" + hex.EncodeToString(b)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dsns := make([]string, Size)
	for i := range Size {
		cfg, err := mysql.ParseDSN(c.DSN(i))
		if err != nil {
			t.Fatalf("galera: %v", err)
		}
		cfg.DBName = name
		dsns[i] = cfg.FormatDSN()
	}
	admin, err := adminDB(c.DSN(0))
	if err != nil {
		t.Fatalf("galera: %v", err)
	}
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name+" CHARACTER SET utf8mb4"); err != nil {
		_ = admin.Close()
		t.Fatalf("galera: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP DATABASE "+name); err != nil {
			t.Errorf("galera: drop database %s: %v", name, err)
		}
		_ = admin.Close()
	})
	if err := Converge(ctx, c.DSNs()); err != nil {
		t.Fatalf("galera: %v", err)
	}
	return dsns
}

// adminDB opens a node for creating and dropping databases. A DROP waits
// for the metadata locks of transactions left open; lock_wait_timeout
// bounds that wait (the server's default is a day).
func adminDB(dsn string) (*sql.DB, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	cfg.DBName = ""
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["lock_wait_timeout"] = "30"
	return sql.Open("mysql", cfg.FormatDSN())
}

// Converge waits until every node given by dsns has applied every write the
// cluster committed before the call — DDL included, which another node
// applies after the statement returned on its own. It reads each node
// once with wsrep_sync_wait, Galera's causal read. Tests call it after
// creating tables on one node and before using them on the others.
func Converge(ctx context.Context, dsns []string) error {
	var errs []error
	for i, dsn := range dsns {
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			return err
		}
		cfg.DBName = ""
		if cfg.Params == nil {
			cfg.Params = map[string]string{}
		}
		cfg.Params["wsrep_sync_wait"] = "15"
		db, err := sql.Open("mysql", cfg.FormatDSN())
		if err != nil {
			return err
		}
		var n int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.schemata").Scan(&n); err != nil {
			errs = append(errs, fmt.Errorf("node %d: causal read: %w", i+1, err))
		}
		_ = db.Close()
	}
	return errors.Join(errs...)
}
