//go:build unix

package galera_test

import (
	"context"
	"testing"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	mysqlopen "github.com/gormlock/gormlock/opendb/mysql"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/repository"
)

// TestCausalReads writes a record on node 1 and reads it back at once on
// node 2, round after round. Without wsrep_sync_wait (the default, 0) node
// 2 may not have applied the write yet and return the version before it: a
// stale read, which a guarded write then catches as stale data. With
// wsrep_sync_wait=1 in node 2's DSN every read waits for what the cluster
// committed before it: no read is stale.
func TestCausalReads(t *testing.T) {
	const rounds = 200
	n := openNodes(t)
	n.seed(t, 1)
	writer, err := repository.New[fixtures.Account](n.dbs[0])
	require.NoError(t, err)
	causalDB, err := mysqlopen.Open(withParams(t, n.dsns[1], map[string]string{"wsrep_sync_wait": "1"}), &gorm.Config{Logger: n.log})
	require.NoError(t, err)
	t.Cleanup(func() { _ = fixtures.Close(causalDB) })
	var syncWait int
	require.NoError(t, causalDB.Raw("SELECT @@wsrep_sync_wait").Scan(&syncWait).Error)
	require.Equal(t, 1, syncWait, "mysql.Open keeps the DSN's session variables")
	ctx := context.Background()
	for _, causal := range []bool{false, true} {
		db := n.dbs[1]
		if causal {
			db = causalDB
		}
		reader, err := repository.New[fixtures.Account](db)
		require.NoError(t, err)
		stale := 0
		for range rounds {
			a, err := writer.Mutate(ctx, int64(1), func(a *fixtures.Account) error {
				a.Balance++
				return nil
			})
			require.NoError(t, err)
			b, err := reader.Get(ctx, int64(1))
			require.NoError(t, err)
			require.LessOrEqual(t, b.Version, a.Version)
			if b.Version < a.Version {
				stale++
			}
		}
		t.Logf("wsrep_sync_wait=%v: %d of %d reads on node 2 right after a write on node 1 were stale", map[bool]int{false: 0, true: 1}[causal], stale, rounds)
		if causal {
			require.Zero(t, stale, "a causal read must see every write committed before it")
		}
	}
}
