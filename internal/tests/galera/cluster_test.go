//go:build unix

package galera_test

import (
	"context"
	"database/sql"
	"testing"

	_ "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/gormlock/gormlock/internal/tests/galera"
)

func TestMain(m *testing.M) { galera.Main(m) }

// TestCluster checks the harness: three nodes, each Synced in a cluster of
// three, none on 3306, and a row written on one node read on the others.
func TestCluster(t *testing.T) {
	c := galera.Start(t)
	t.Logf("cluster launched in %v (dir %s)", c.StartTime, c.Dir)
	require.Same(t, c, galera.Start(t), "Start is idempotent")
	ctx := context.Background()
	dsns := c.NewDatabase(t)
	var dbs []*sql.DB
	for i, dsn := range dsns {
		if c.Nodes != nil {
			require.NotEqual(t, 3306, c.Nodes[i].Port)
		}
		db, err := sql.Open("mysql", dsn)
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		dbs = append(dbs, db)
		var on, state, size string
		require.NoError(t, db.QueryRowContext(ctx, "SELECT @@wsrep_on").Scan(&on))
		require.NoError(t, db.QueryRowContext(ctx, "SELECT variable_value FROM information_schema.global_status WHERE variable_name = 'wsrep_local_state_comment'").Scan(&state))
		require.NoError(t, db.QueryRowContext(ctx, "SELECT variable_value FROM information_schema.global_status WHERE variable_name = 'wsrep_cluster_size'").Scan(&size))
		require.Equal(t, []string{"1", "Synced", "3"}, []string{on, state, size}, "node %d", i+1)
	}
	_, err := dbs[0].ExecContext(ctx, "CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL)")
	require.NoError(t, err)
	_, err = dbs[0].ExecContext(ctx, "INSERT INTO t VALUES (1, 42)")
	require.NoError(t, err)
	require.NoError(t, galera.Converge(ctx, dsns))
	for i, db := range dbs {
		var v int
		require.NoError(t, db.QueryRowContext(ctx, "SELECT v FROM t WHERE id = 1").Scan(&v), "node %d", i+1)
		require.Equal(t, 42, v, "node %d", i+1)
	}
}
