package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	mysqlopen "github.com/gormlock/gormlock/opendb/mysql"

	"github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/migrations"
)

// The databases -db names.
const (
	dbSQLite   = "sqlite"
	dbPostgres = "postgres"
	dbMariaDB  = "mariadb" // MariaDB, or MySQL 8, one server
	dbGalera   = "galera"  // a MariaDB Galera cluster, workers spread over its nodes
)

// databases lists what -db accepts.
var databases = []string{dbSQLite, dbPostgres, dbMariaDB, dbGalera}

// galeraEnv holds a Galera cluster's DSNs, separated by commas, when -db
// galera has no -dsn: what `go run ./internal/tests/galera/cmd/galera start`
// prints (galera.DSNsEnv).
const galeraEnv = "GORMLOCK_GALERA_DSNS"

// target is the database of a run: one server, or the nodes of a Galera
// cluster, each with a pool of its own. Worker w of a cell uses node
// w % len(nodes).
type target struct {
	nodes []*gorm.DB
	// dsns are the nodes' DSNs ("" for SQLite's temporary file).
	dsns []string
	// sync holds, on Galera, a pool per node whose sessions read with
	// wsrep_sync_wait=1: a read through it waits until the node has applied
	// every write the cluster committed before the read began.
	sync  []*sql.DB
	close func() error
}

// galeraDSNs splits -dsn, or GORMLOCK_GALERA_DSNS when it is empty, into
// the nodes' DSNs.
func galeraDSNs(dsn string) ([]string, error) {
	src := "-dsn"
	if dsn == "" {
		dsn, src = os.Getenv(galeraEnv), galeraEnv
	}
	if strings.TrimSpace(dsn) == "" {
		return nil, fmt.Errorf("-db galera needs -dsn 'dsn1,dsn2,dsn3' or %s (go run ./internal/tests/galera/cmd/galera start prints it)", galeraEnv)
	}
	var out []string
	for _, d := range strings.Split(dsn, ",") {
		if d = strings.TrimSpace(d); d != "" {
			out = append(out, d)
		}
	}
	if len(out) < 2 {
		return nil, fmt.Errorf("%s: -db galera needs the DSNs of at least two nodes, separated by commas; got %d", src, len(out))
	}
	return out, nil
}

// openTarget opens (and migrates) the database of a run, with pools large
// enough for maxWorkers workers in all.
func openTarget(ctx context.Context, stderr io.Writer, db, dsn string, maxWorkers int) (_ *target, err error) {
	t := &target{}
	var closers []func() error
	t.close = func() error {
		var errs []error
		for i := len(closers) - 1; i >= 0; i-- {
			errs = append(errs, closers[i]())
		}
		closers = nil
		return errors.Join(errs...)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, t.close())
		}
	}()
	dsns := []string{dsn}
	switch db {
	case dbSQLite:
		if dsn != "" {
			dsns[0] = "sqlite:" + dsn
		}
	case dbMariaDB:
		if _, err := mysqlopen.DSN(dsn); err != nil {
			return nil, fmt.Errorf("-db mariadb: -dsn: %w", err)
		}
	case dbGalera:
		if dsns, err = galeraDSNs(dsn); err != nil {
			return nil, err
		}
		for i, d := range dsns {
			if _, err := mysqlopen.DSN(d); err != nil {
				return nil, fmt.Errorf("-db galera: node %d: %w", i+1, err)
			}
		}
	}
	perNode := (maxWorkers+len(dsns)-1)/len(dsns) + 4
	for i, d := range dsns {
		var g *gorm.DB
		if i == 0 {
			// The first node migrates; on Galera the others see its tables
			// once the cluster converged (below).
			var closeDB func() error
			if g, closeDB, err = fixtures.Open(ctx, d, "bench"); err != nil {
				return nil, err
			}
			closers = append(closers, closeDB)
			// The lease-row mode keeps its leases in the accounts' rows.
			if err = migrations.AddLeaseColumns(ctx, g, &fixtures.Account{}); err != nil {
				return nil, err
			}
		} else {
			if g, err = fixtures.OpenDSN(d); err != nil {
				return nil, fmt.Errorf("node %d: %w", i+1, err)
			}
			closers = append(closers, func() error { return fixtures.Close(g) })
		}
		if want := map[string]string{dbPostgres: "postgres", dbMariaDB: "mysql", dbGalera: "mysql"}[db]; want != "" && g.Dialector.Name() != want {
			return nil, fmt.Errorf("-db %s: the DSN opened a %s database", db, g.Dialector.Name())
		}
		sqlDB, err := g.DB()
		if err != nil {
			return nil, err
		}
		sqlDB.SetMaxOpenConns(perNode)
		sqlDB.SetMaxIdleConns(perNode)
		t.nodes = append(t.nodes, g)
		t.dsns = append(t.dsns, d)
		if db != dbGalera {
			continue
		}
		s, err := syncPool(d)
		if err != nil {
			return nil, fmt.Errorf("node %d: %w", i+1, err)
		}
		closers = append(closers, s.Close)
		t.sync = append(t.sync, s)
		// Wait for the migration of node 1 before the next node is used.
		var n int
		if err := s.QueryRowContext(ctx, "SELECT COUNT(*) FROM accounts").Scan(&n); err != nil {
			return nil, fmt.Errorf("node %d: %w", i+1, err)
		}
	}
	switch db {
	case dbMariaDB:
		if on, _ := wsrepOn(ctx, t.nodes[0]); on {
			fmt.Fprintln(stderr, "bench: this MariaDB server is a node of a Galera cluster; -db galera spreads the workers over its nodes")
		}
	case dbGalera:
		names := map[string]int{}
		for i, g := range t.nodes {
			on, name := wsrepOn(ctx, g)
			if !on {
				return nil, fmt.Errorf("-db galera: node %d is not a Galera node (wsrep_on is not ON)", i+1)
			}
			if j, dup := names[name]; dup {
				return nil, fmt.Errorf("-db galera: DSNs %d and %d name the same node, %s", j+1, i+1, name)
			}
			names[name] = i
		}
	}
	return t, nil
}

// wsrepOn reports whether the server db talks to is a Galera node, and the
// node's name.
func wsrepOn(ctx context.Context, db *gorm.DB) (bool, string) {
	var on, name sql.NullString
	if err := db.WithContext(ctx).Raw("SELECT @@wsrep_on, @@wsrep_node_name").Row().Scan(&on, &name); err != nil {
		return false, ""
	}
	return strings.EqualFold(on.String, "ON") || on.String == "1", name.String
}

// syncPool opens a small pool on the node dsn names whose sessions read
// with wsrep_sync_wait=1 (Galera's causal reads).
func syncPool(dsn string) (*sql.DB, error) {
	safe, err := mysqlopen.DSN(dsn)
	if err != nil {
		return nil, err
	}
	cfg, err := mysql.ParseDSN(safe)
	if err != nil {
		return nil, err
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["wsrep_sync_wait"] = "1"
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(2)
	return db, nil
}

// withDatabase returns the MySQL DSN dsn with name as its database.
func withDatabase(dsn, name string) (string, error) {
	safe, err := mysqlopen.DSN(dsn)
	if err != nil {
		return "", err
	}
	cfg, err := mysql.ParseDSN(safe)
	if err != nil {
		return "", err
	}
	cfg.DBName = name
	return cfg.FormatDSN(), nil
}
