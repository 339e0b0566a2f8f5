//go:build unix

package galera_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/gormlock/gormlock/internal/tests/galera"
)

// Error numbers the cluster answers with.
const (
	erDeadlock    = 1213 // a certification failure or a brute-force abort
	erLockWait    = 1205 // NOWAIT, or a lock wait timeout
	erUnsupported = 1235 // a SEQUENCE with CACHE
)

// long reports whether the long variant runs (more operations).
func long() bool { return os.Getenv("GORMLOCK_GALERA") == "long" }

// cluster is a fresh database on the test binary's cluster: the three
// nodes' DSNs.
func cluster(t *testing.T) []string {
	t.Helper()
	return galera.Start(t).NewDatabase(t)
}

// withParams returns dsn with the parameters added.
func withParams(t testing.TB, dsn string, params map[string]string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	require.NoError(t, err)
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	for k, v := range params {
		cfg.Params[k] = v
	}
	cfg.ClientFoundRows = true
	return cfg.FormatDSN()
}

// rawNodes opens the three nodes with database/sql (clientFoundRows, as
// gormlock opens them), closed when the test ends.
func rawNodes(t testing.TB, dsns []string) []*sql.DB {
	t.Helper()
	var dbs []*sql.DB
	for _, dsn := range dsns {
		db, err := sql.Open("mysql", withParams(t, dsn, nil))
		require.NoError(t, err)
		db.SetMaxOpenConns(20)
		t.Cleanup(func() { _ = db.Close() })
		dbs = append(dbs, db)
	}
	return dbs
}

// causal opens node dsn for causal reads: every read first waits until
// the node applied what the cluster committed before it (wsrep_sync_wait).
func causal(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", withParams(t, dsn, map[string]string{"wsrep_sync_wait": "1"}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// errNumber is the MySQL error number err carries, or 0.
func errNumber(err error) uint16 {
	var my *mysql.MySQLError
	if errors.As(err, &my) {
		return my.Number
	}
	return 0
}

// converge waits until every node applied what the cluster committed.
func converge(t testing.TB, dsns []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, galera.Converge(ctx, dsns))
}

// execAll runs the statements on node db (DDL on one node; converge before
// using the tables on the others).
func execAll(t testing.TB, db *sql.DB, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		_, err := db.Exec(s)
		require.NoError(t, err, s)
	}
}

// readInt reads one integer with a causal read on node dsn.
func readInt(t testing.TB, db *sql.DB, query string, args ...any) int64 {
	t.Helper()
	var n int64
	require.NoError(t, db.QueryRow(query, args...).Scan(&n), query)
	return n
}

// abortCounters are the cluster's counts of transactions it aborted: the
// ones that failed certification at COMMIT and the local ones a replicated
// write brute-force aborted (each of which the client saw as error 1213).
type abortCounters struct{ certFailures, bfAborts int64 }

// aborts sums the counters over the nodes.
func aborts(t testing.TB, dbs []*sql.DB) abortCounters {
	t.Helper()
	var c abortCounters
	for _, db := range dbs {
		rows, err := db.Query("SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_local_cert_failures', 'wsrep_local_bf_aborts')")
		require.NoError(t, err)
		for rows.Next() {
			var k, v string
			require.NoError(t, rows.Scan(&k, &v))
			n, _ := strconv.ParseInt(v, 10, 64)
			if k == "wsrep_local_cert_failures" {
				c.certFailures += n
			} else {
				c.bfAborts += n
			}
		}
		require.NoError(t, rows.Err())
		rows.Close()
	}
	return c
}

// sub returns the counts since before.
func (c abortCounters) sub(before abortCounters) abortCounters {
	return abortCounters{c.certFailures - before.certFailures, c.bfAborts - before.bfAborts}
}

// spread runs workers goroutines, worker i on node i%3, released at once by
// a start barrier, and waits for them all.
func spread(t testing.TB, workers int, fn func(ctx context.Context, worker, node int) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := make(chan struct{})
	g, ctx := errgroup.WithContext(ctx)
	var ready sync.WaitGroup
	for w := range workers {
		ready.Add(1)
		g.Go(func() error {
			ready.Done()
			<-start
			return fn(ctx, w, w%galera.Size)
		})
	}
	ready.Wait()
	close(start)
	require.NoError(t, g.Wait())
}
