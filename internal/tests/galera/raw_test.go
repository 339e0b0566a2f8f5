//go:build unix

package galera_test

import (
	"context"
	"database/sql"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gormlock/gormlock/internal/tests/galera"
)

// rmwCounts is what one raw read-modify-write workload did.
type rmwCounts struct {
	acked, stale, deadlocks atomic.Int64
}

// TestRawReadModifyWrite is the baseline in plain SQL, the statements
// gormlock sends, with clients spread over the three nodes (worker i on node
// i%3), on one hot row: an unguarded read-modify-write (read n, write
// read+1) loses updates — the negative control — and the guarded one
// (WHERE version = the version read) loses none, once every 1213 is taken
// as "not applied" and the increment tried again from a fresh read.
func TestRawReadModifyWrite(t *testing.T) {
	workers, ops := 6, 40
	if long() {
		workers, ops = 8, 200
	}
	for _, guarded := range []bool{false, true} {
		name := "unguarded"
		if guarded {
			name = "guarded"
		}
		t.Run(name, func(t *testing.T) {
			dsns := cluster(t)
			dbs := rawNodes(t, dsns)
			execAll(t, dbs[0], "CREATE TABLE counters (id INT PRIMARY KEY, n BIGINT NOT NULL, version BIGINT NOT NULL)",
				"INSERT INTO counters VALUES (1, 0, 1)")
			converge(t, dsns)
			before := aborts(t, dbs)
			var c rmwCounts
			spread(t, workers, func(ctx context.Context, _, node int) error {
				db := dbs[node]
				for range ops {
					for {
						var n, v int64
						if err := db.QueryRowContext(ctx, "SELECT n, version FROM counters WHERE id = 1").Scan(&n, &v); err != nil {
							return err
						}
						var res sql.Result
						var err error
						if guarded {
							res, err = db.ExecContext(ctx, "UPDATE counters SET n = ?, version = ? WHERE id = 1 AND version = ?", n+1, v+1, v)
						} else {
							res, err = db.ExecContext(ctx, "UPDATE counters SET n = ? WHERE id = 1", n+1)
						}
						if errNumber(err) == erDeadlock {
							c.deadlocks.Add(1) // not applied: read again
							continue
						}
						if err != nil {
							return err
						}
						if ra, _ := res.RowsAffected(); ra == 0 {
							c.stale.Add(1)
							continue
						}
						c.acked.Add(1)
						break
					}
				}
				return nil
			})
			converge(t, dsns)
			final := readInt(t, dbs[2], "SELECT n FROM counters WHERE id = 1")
			ab := aborts(t, dbs).sub(before)
			t.Logf("%s: acknowledged %d, final %d, lost %d; stale %d, 1213 %d (cluster: %d certification failures, %d brute-force aborts)",
				name, c.acked.Load(), final, c.acked.Load()-final, c.stale.Load(), c.deadlocks.Load(), ab.certFailures, ab.bfAborts)
			require.EqualValues(t, workers*ops, c.acked.Load())
			for i, db := range dbs {
				require.Equal(t, final, readInt(t, db, "SELECT n FROM counters WHERE id = 1"), "node %d", i+1)
			}
			if guarded {
				require.Equal(t, c.acked.Load(), final, "the guarded read-modify-write lost an acknowledged increment")
			} else {
				require.Less(t, final, c.acked.Load(), "the negative control must lose updates, or the test could not catch a loss")
			}
		})
	}
}

// TestRawCommitAfterDeadlockAnswersOK shows the trap gormlock must not fall
// into. Transaction A on node 1 locks a row; B on node 2 writes the row at
// once (the lock is node 1's only) and commits. Applying B on node 1
// aborts A (a brute-force abort). A's next statement fails with 1213, and
// then a COMMIT from A answers OK: it commits nothing, since the
// transaction was already gone. A client that ignores the 1213 and commits
// believes its write is in; the row holds B's value only.
func TestRawCommitAfterDeadlockAnswersOK(t *testing.T) {
	dsns := cluster(t)
	dbs := rawNodes(t, dsns)
	execAll(t, dbs[0], "CREATE TABLE t (id INT PRIMARY KEY, n BIGINT NOT NULL)", "INSERT INTO t VALUES (1, 0)")
	converge(t, dsns)
	ctx := context.Background()
	n1 := causal(t, dsns[0])

	a, err := dbs[0].BeginTx(ctx, nil)
	require.NoError(t, err)
	var n int64
	require.NoError(t, a.QueryRowContext(ctx, "SELECT n FROM t WHERE id = 1 FOR UPDATE").Scan(&n))

	res, err := dbs[1].ExecContext(ctx, "UPDATE t SET n = 100 WHERE id = 1")
	require.NoError(t, err, "node 2 does not see node 1's row lock")
	ra, _ := res.RowsAffected()
	require.EqualValues(t, 1, ra)
	// Once node 1 has applied B, A is aborted.
	require.EqualValues(t, 100, readInt(t, n1, "SELECT n FROM t WHERE id = 1"))

	_, err = a.ExecContext(ctx, "UPDATE t SET n = n + 1 WHERE id = 1")
	require.Equal(t, uint16(erDeadlock), errNumber(err), "A's statement after the abort: %v", err)
	require.NoError(t, a.Commit(), "the trap: COMMIT after the 1213 answers OK")

	for i := range dbs {
		require.EqualValues(t, 100, readInt(t, causal(t, dsns[i]), "SELECT n FROM t WHERE id = 1"),
			"node %d: A's write is not there, although its COMMIT answered OK", i+1)
	}

	// And when A's COMMIT is the first statement after the abort, the
	// COMMIT itself fails with 1213.
	a, err = dbs[0].BeginTx(ctx, nil)
	require.NoError(t, err)
	res, err = a.ExecContext(ctx, "UPDATE t SET n = n + 1 WHERE id = 1")
	require.NoError(t, err)
	ra, _ = res.RowsAffected()
	require.EqualValues(t, 1, ra)
	_, err = dbs[1].ExecContext(ctx, "UPDATE t SET n = 200 WHERE id = 1")
	require.NoError(t, err)
	require.EqualValues(t, 200, readInt(t, n1, "SELECT n FROM t WHERE id = 1"))
	err = a.Commit()
	require.Equal(t, uint16(erDeadlock), errNumber(err), "COMMIT of the aborted transaction: %v", err)
	require.EqualValues(t, 200, readInt(t, causal(t, dsns[2]), "SELECT n FROM t WHERE id = 1"))
}

// TestRawLocksAreNodeLocal shows that row locks, NOWAIT, SKIP LOCKED and
// GET_LOCK see one node only: node 1 holds rows 1 and 2 FOR UPDATE, and a
// second session on node 1 is kept out (NOWAIT fails with 1205, SKIP LOCKED
// skips them) while a session on node 2 locks row 1 too, NOWAIT, and SKIP
// LOCKED returns every row. Both "holders" then write row 1: the cluster
// commits the first COMMIT and refuses the other with 1213, so one write
// is in and none is lost unnoticed.
func TestRawLocksAreNodeLocal(t *testing.T) {
	dsns := cluster(t)
	dbs := rawNodes(t, dsns)
	execAll(t, dbs[0], "CREATE TABLE t (id INT PRIMARY KEY, n BIGINT NOT NULL)", "INSERT INTO t VALUES (1, 0), (2, 0), (3, 0)")
	converge(t, dsns)
	ctx := context.Background()

	a, err := dbs[0].BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = a.Rollback() }()
	require.Equal(t, []int64{1, 2}, ids(t, a, "SELECT id FROM t WHERE id IN (1, 2) ORDER BY id FOR UPDATE"))

	// The same node: the lock holds.
	same, err := dbs[0].BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = same.ExecContext(ctx, "SELECT id FROM t WHERE id = 1 FOR UPDATE NOWAIT")
	require.Equal(t, uint16(erLockWait), errNumber(err), "NOWAIT on the lock holder's node: %v", err)
	require.Equal(t, []int64{3}, ids(t, same, "SELECT id FROM t ORDER BY id FOR UPDATE SKIP LOCKED"))
	require.NoError(t, same.Rollback())

	// Another node: no lock to see.
	b, err := dbs[1].BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = b.Rollback() }()
	require.Equal(t, []int64{1}, ids(t, b, "SELECT id FROM t WHERE id = 1 FOR UPDATE NOWAIT"), "node 2 locks the row node 1 holds")
	c, err := dbs[2].BeginTx(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2, 3}, ids(t, c, "SELECT id FROM t ORDER BY id FOR UPDATE SKIP LOCKED"), "node 3 skips nothing")
	require.NoError(t, c.Rollback())

	// Both holders write the row; the first COMMIT wins.
	_, err = a.ExecContext(ctx, "UPDATE t SET n = n + 1 WHERE id = 1")
	require.NoError(t, err)
	_, err = b.ExecContext(ctx, "UPDATE t SET n = n + 10 WHERE id = 1")
	require.NoError(t, err)
	require.NoError(t, b.Commit())
	err = a.Commit()
	require.Equal(t, uint16(erDeadlock), errNumber(err), "the other holder's COMMIT: %v", err)
	converge(t, dsns)
	for i, db := range dbs {
		require.EqualValues(t, 10, readInt(t, db, "SELECT n FROM t WHERE id = 1"), "node %d", i+1)
	}

	// GET_LOCK is node-local too.
	l1, err := dbs[0].Conn(ctx)
	require.NoError(t, err)
	defer l1.Close()
	l1b, err := dbs[0].Conn(ctx)
	require.NoError(t, err)
	defer l1b.Close()
	l2, err := dbs[1].Conn(ctx)
	require.NoError(t, err)
	defer l2.Close()
	var got1, got1b, got2 int
	require.NoError(t, l1.QueryRowContext(ctx, "SELECT GET_LOCK('gormlock-lease', 0)").Scan(&got1))
	require.NoError(t, l1b.QueryRowContext(ctx, "SELECT GET_LOCK('gormlock-lease', 0)").Scan(&got1b))
	require.NoError(t, l2.QueryRowContext(ctx, "SELECT GET_LOCK('gormlock-lease', 0)").Scan(&got2))
	require.Equal(t, []int{1, 0, 1}, []int{got1, got1b, got2}, "GET_LOCK: node 1, node 1 again, node 2")
}

// ids runs a query returning ids in tx.
func ids(t testing.TB, tx *sql.Tx, query string) []int64 {
	t.Helper()
	rows, err := tx.Query(query)
	require.NoError(t, err, query)
	defer rows.Close()
	out := []int64{}
	for rows.Next() {
		var id int64
		require.NoError(t, rows.Scan(&id))
		out = append(out, id)
	}
	require.NoError(t, rows.Err())
	return out
}

// TestRawClusterQuirks pins the facts gormlock's MySQL dialect and
// migrations build on: a SEQUENCE with a CACHE is refused (1235), the
// nodes hand out interleaved auto-increment values, and UPDATE has no
// RETURNING.
func TestRawClusterQuirks(t *testing.T) {
	dsns := cluster(t)
	dbs := rawNodes(t, dsns)
	_, err := dbs[0].Exec("CREATE SEQUENCE s")
	require.Equal(t, uint16(erUnsupported), errNumber(err), "CREATE SEQUENCE with the default CACHE: %v", err)
	execAll(t, dbs[0], "CREATE TABLE a (id BIGINT AUTO_INCREMENT PRIMARY KEY, node INT NOT NULL)")
	converge(t, dsns)
	var got []int64
	for round := range 2 {
		for i, db := range dbs {
			res, err := db.Exec("INSERT INTO a (node) VALUES (?)", i+1)
			require.NoError(t, err, "round %d node %d", round, i+1)
			id, err := res.LastInsertId()
			require.NoError(t, err)
			got = append(got, id)
		}
	}
	var incr, offsets [galera.Size]int64
	for i, db := range dbs {
		incr[i] = readInt(t, db, "SELECT @@auto_increment_increment")
		offsets[i] = readInt(t, db, "SELECT @@auto_increment_offset")
	}
	t.Logf("auto-increment ids inserted round-robin on nodes 1,2,3,1,2,3: %v (increment %v, offsets %v)", got, incr, offsets)
	require.Equal(t, [galera.Size]int64{3, 3, 3}, incr)
	for i := range got {
		require.EqualValues(t, offsets[i%3], (got[i]-1)%3+1, "id %d came from node %d", got[i], i%3+1)
	}
	_, err = dbs[0].Exec("UPDATE a SET node = 9 WHERE id = ? RETURNING id", got[0])
	require.Error(t, err, "MariaDB has no UPDATE ... RETURNING")
}

// TestClockAcrossNodes measures how far apart the three nodes' clocks are
// — the clock a lease's expiry is judged by, and versions are read from.
// Each reading of UNIX_TIMESTAMP(SYSDATE(6)) is bracketed by this
// process's clock; the nodes share this host's clock, so every reading must
// fall inside its bracket (to the microsecond it is rounded to), and the
// measured skew between nodes is the difference of the brackets' midpoints.
func TestClockAcrossNodes(t *testing.T) {
	c := galera.Start(t)
	dbs := rawNodes(t, c.DSNs())
	ctx := context.Background()
	const rounds = 100
	var maxSkew, maxBracket time.Duration
	for range rounds {
		var mids [galera.Size]time.Duration
		for i, db := range dbs {
			conn, err := db.Conn(ctx)
			require.NoError(t, err)
			var us int64
			t0 := time.Now()
			err = conn.QueryRowContext(ctx, "SELECT CAST(UNIX_TIMESTAMP(SYSDATE(6)) * 1000000 AS SIGNED)").Scan(&us)
			t1 := time.Now()
			require.NoError(t, err)
			require.NoError(t, conn.Close())
			db := time.UnixMicro(us)
			require.False(t, db.Before(t0.Truncate(time.Microsecond)), "node %d read %v before the query was sent (%v)", i+1, db, t0)
			require.False(t, db.After(t1), "node %d read %v after the answer came (%v)", i+1, db, t1)
			mids[i] = db.Sub(t0.Add(t1.Sub(t0) / 2))
			maxBracket = max(maxBracket, t1.Sub(t0))
		}
		for i := range mids {
			for j := range mids {
				maxSkew = max(maxSkew, mids[i]-mids[j])
			}
		}
	}
	t.Logf("clock: %d rounds over 3 nodes; every node's reading inside its round trip; largest difference between nodes %v (round trips up to %v)",
		rounds, maxSkew, maxBracket)
}

// TestRawPreparedReadAfterAbort is the trap TestRunInTxEndingWithAReadAcrossNodes
// guards against, in plain SQL from all three nodes: a transaction
// increments a counter, reads it back with a prepared SELECT (a statement
// with a parameter, as GORM sends it) and commits. When the cluster aborts
// the transaction between the UPDATE and the SELECT, the SELECT is not told
// (it runs after the rollback, outside any transaction) and the COMMIT
// answers OK: acknowledged increments go missing. The same SELECT without
// a parameter (a plain text statement) is told, with 1213.
func TestRawPreparedReadAfterAbort(t *testing.T) {
	for _, prepared := range []bool{true, false} {
		name := map[bool]string{true: "prepared SELECT", false: "text SELECT"}[prepared]
		t.Run(name, func(t *testing.T) {
			dsns := cluster(t)
			dbs := rawNodes(t, dsns)
			execAll(t, dbs[0], "CREATE TABLE counters (id INT PRIMARY KEY, n BIGINT NOT NULL)", "INSERT INTO counters VALUES (1, 0)")
			converge(t, dsns)
			var acked, deadlocks atomic.Int64
			read := func(ctx context.Context, tx *sql.Tx) error {
				var n int64
				if prepared {
					return tx.QueryRowContext(ctx, "SELECT n FROM counters WHERE id = ?", 1).Scan(&n)
				}
				return tx.QueryRowContext(ctx, "SELECT n FROM counters WHERE id = 1").Scan(&n)
			}
			// Several rounds, so that a run that happens to lose nothing
			// is rare enough for the prepared case to be asserted.
			for round := 0; round < 5; round++ {
				spread(t, 6, func(ctx context.Context, _, node int) error {
					db := dbs[node]
					for range 40 {
						for {
							err := func() error {
								tx, err := db.BeginTx(ctx, nil)
								if err != nil {
									return err
								}
								defer func() { _ = tx.Rollback() }()
								if _, err := tx.ExecContext(ctx, "UPDATE counters SET n = n + 1 WHERE id = 1"); err != nil {
									return err
								}
								if err := read(ctx, tx); err != nil {
									return err
								}
								return tx.Commit()
							}()
							if errNumber(err) == erDeadlock {
								deadlocks.Add(1)
								continue
							}
							if err != nil {
								return err
							}
							acked.Add(1)
							break
						}
					}
					return nil
				})
				converge(t, dsns)
				if prepared && readInt(t, dbs[2], "SELECT n FROM counters WHERE id = 1") < acked.Load() {
					break
				}
			}
			final := readInt(t, dbs[2], "SELECT n FROM counters WHERE id = 1")
			t.Logf("%s: acknowledged %d, present %d, lost %d (%d times 1213)", name, acked.Load(), final, acked.Load()-final, deadlocks.Load())
			if prepared {
				require.Less(t, final, acked.Load(), "the trap: a prepared read after the abort, and COMMIT answers OK")
			} else {
				require.Equal(t, acked.Load(), final)
			}
		})
	}
}
