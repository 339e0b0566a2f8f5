//go:build unix

package galera_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mysqlopen "github.com/gormlock/gormlock/opendb/mysql"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/repository"
)

// counting is a GORM logger that counts what the statements answered:
// gormlock shows every statement it sends to the logger (not BEGIN and
// COMMIT), with its error and rows.
type counting struct {
	deadlocks atomic.Int64 // error 1213 on a statement
	stale     atomic.Int64 // a guarded UPDATE that matched no row
}

func (c *counting) LogMode(logger.LogLevel) logger.Interface { return c }
func (c *counting) Info(context.Context, string, ...any)     {}
func (c *counting) Warn(context.Context, string, ...any)     {}
func (c *counting) Error(context.Context, string, ...any)    {}
func (c *counting) reset()                                   { c.deadlocks.Store(0); c.stale.Store(0) }
func (c *counting) snapshot() (deadlocks, stale int64)       { return c.deadlocks.Load(), c.stale.Load() }
func (c *counting) Trace(_ context.Context, _ time.Time, fc func() (string, int64), err error) {
	if errNumber(err) == erDeadlock {
		c.deadlocks.Add(1)
		return
	}
	if err == nil {
		sql, rows := fc()
		// A bounded write comes as SET STATEMENT max_statement_time=... FOR
		// UPDATE ...
		if strings.HasPrefix(sql, "SET STATEMENT ") {
			if i := strings.Index(sql, " FOR "); i > 0 {
				sql = sql[i+len(" FOR "):]
			}
		}
		if rows == 0 && strings.HasPrefix(strings.TrimSpace(sql), "UPDATE") {
			c.stale.Add(1)
		}
	}
}

// nodes is a fresh database on the cluster, migrated with the example
// models' tables (and gormlock's own) on node 1, opened on every node with
// mysql.Open.
type nodes struct {
	dsns []string
	dbs  []*gorm.DB
	log  *counting
}

func openNodes(t *testing.T) *nodes {
	t.Helper()
	n := &nodes{dsns: cluster(t), log: &counting{}}
	for _, dsn := range n.dsns {
		db, err := mysqlopen.Open(dsn, &gorm.Config{Logger: n.log})
		require.NoError(t, err)
		sqlDB, err := db.DB()
		require.NoError(t, err)
		sqlDB.SetMaxOpenConns(20)
		t.Cleanup(func() { _ = fixtures.Close(db) })
		n.dbs = append(n.dbs, db)
	}
	require.NoError(t, fixtures.Migrate(context.Background(), n.dbs[0]))
	converge(t, n.dsns)
	return n
}

// accounts returns one Repository per node, as three processes would
// have (one Repository per table, shared by the process's workers).
func (n *nodes) accounts(t *testing.T, opts ...repository.Option) []*repository.Repository[fixtures.Account] {
	t.Helper()
	var rs []*repository.Repository[fixtures.Account]
	for _, db := range n.dbs {
		r, err := repository.New[fixtures.Account](db, opts...)
		require.NoError(t, err)
		rs = append(rs, r)
	}
	return rs
}

// seed creates accounts 1..rows with balance 0 on node 1 and waits until
// every node has them.
func (n *nodes) seed(t *testing.T, rows int) {
	t.Helper()
	r, err := repository.New[fixtures.Account](n.dbs[0])
	require.NoError(t, err)
	for id := 1; id <= rows; id++ {
		require.NoError(t, r.Create(context.Background(), &fixtures.Account{Model: models.Model{ID: int64(id)}, Owner: "seed"}))
	}
	converge(t, n.dsns)
}

// balances reads every account's balance on each node, requires the nodes
// to agree, and returns node 1's.
func (n *nodes) balances(t *testing.T) map[int64]int64 {
	t.Helper()
	converge(t, n.dsns)
	var first map[int64]int64
	for i, db := range n.dbs {
		var rows []fixtures.Account
		require.NoError(t, db.Order("id").Find(&rows).Error)
		got := map[int64]int64{}
		for _, a := range rows {
			got[a.ID] = a.Balance
		}
		if i == 0 {
			first = got
		} else {
			require.Equal(t, first, got, "node %d disagrees with node 1", i+1)
		}
	}
	return first
}

// tally is the accounting of one workload: how many increments of each
// record were acknowledged, and what it took.
type tally struct {
	mu        sync.Mutex
	acked     map[int64]int64
	ops       int64 // calls that returned nil
	attempts  int64 // in those calls
	maxTries  int
	exhausted int64 // calls that ran out of attempts: not applied
	// calls that returned locking.ErrDeadlock: not applied, but a retry
	// helper (Mutate, Upsert, MutateRowLocked) must have retried it
	deadlocked int64
}

func newTally() *tally { return &tally{acked: map[int64]int64{}} }

func (y *tally) ack(attempts int, ids ...int64) {
	y.mu.Lock()
	defer y.mu.Unlock()
	for _, id := range ids {
		y.acked[id]++
	}
	y.ops++
	y.attempts += int64(attempts)
	y.maxTries = max(y.maxTries, attempts)
}

// fail records a call that returned err, and says whether err is an
// outcome the accounting knows (not applied); others end the workload.
func (y *tally) fail(err error) bool {
	y.mu.Lock()
	defer y.mu.Unlock()
	switch {
	case errors.Is(err, locking.ErrRetriesExhausted):
		y.exhausted++
	case errors.Is(err, locking.ErrDeadlock) && !errors.Is(err, locking.ErrCommitUnknown):
		y.deadlocked++
	default:
		return false
	}
	return true
}

// check requires every record to hold exactly its acknowledged
// increments, and logs the figures.
//
// retrying says the calls were a retry helper's, which must not return a
// 1213 while attempts remain.
func (y *tally) check(t *testing.T, name string, n *nodes, before abortCounters, final map[int64]int64, retrying bool) {
	t.Helper()
	var acked, present int64
	for _, k := range y.acked {
		acked += k
	}
	for _, v := range final {
		present += v
	}
	deadlocks, stale := n.log.snapshot()
	ab := aborts(t, rawNodes(t, n.dsns)).sub(before)
	t.Logf("%s: acknowledged %d, present %d, lost %d; %d calls, %.2f attempts per call (max %d), %d ran out of attempts and %d returned ErrDeadlock (not applied); "+
		"1213 on statements %d, stale guarded writes %d; cluster: %d certification failures, %d brute-force aborts",
		name, acked, present, acked-present, y.ops, float64(y.attempts)/float64(max(y.ops, 1)), y.maxTries, y.exhausted, y.deadlocked,
		deadlocks, stale, ab.certFailures, ab.bfAborts)
	want, got := map[int64]int64{}, map[int64]int64{}
	for id := range y.acked {
		want[id], got[id] = y.acked[id], final[id]
	}
	for id := range final {
		want[id], got[id] = y.acked[id], final[id]
	}
	require.Equal(t, want, got, "every record must hold exactly its acknowledged increments")
	if retrying {
		require.Zero(t, y.deadlocked, "%s returned locking.ErrDeadlock %d times: a retry helper must retry a 1213 from a fresh read", name, y.deadlocked)
	}
}

// workload sizes: workers (2 per node) and calls per worker.
func sizes() (workers, calls int) {
	if long() {
		return 9, 200
	}
	return 6, 40
}

// retryPolicy gives the workloads room: on a hot row written from three
// nodes a call can lose many rounds in a row.
var retryPolicy = locking.RetryPolicy{MaxAttempts: 40, BaseDelay: 2 * time.Millisecond, MaxDelay: 100 * time.Millisecond}

// pick returns the record a call works on: the hot row, or one of 100.
func pick(r *rand.Rand, rows int) int64 { return 1 + int64(r.IntN(rows)) }

// TestMutateAcrossNodes runs Mutate increments from clients on all three
// nodes, on one hot row and on 100 rows: every record ends with exactly its
// acknowledged increments, although the guarded writes meet stale versions
// and 1213s from the other nodes (retried from a fresh read). The negative
// control runs the same increments with plain GORM (First, Balance++, Save:
// an UPDATE by key alone) and must lose some.
func TestMutateAcrossNodes(t *testing.T) {
	workers, calls := sizes()
	for _, rows := range []int{1, 100} {
		for _, guarded := range []bool{true, false} {
			name := map[int]string{1: "hot row", 100: "100 rows"}[rows]
			if !guarded {
				if rows > 1 {
					continue // the negative control runs on the hot row, where a loss is certain
				}
				name += "/unguarded Save"
			}
			t.Run(name, func(t *testing.T) {
				n := openNodes(t)
				n.seed(t, rows)
				repos := n.accounts(t)
				before := aborts(t, rawNodes(t, n.dsns))
				n.log.reset()
				y := newTally()
				spread(t, workers, func(ctx context.Context, w, node int) error {
					r := rand.New(rand.NewPCG(uint64(w), 1))
					for range calls {
						id := pick(r, rows)
						if !guarded {
							tries, err := unguardedIncrement(ctx, n.dbs[node], id)
							if err != nil {
								return err
							}
							y.ack(tries, id)
							continue
						}
						var triesRep repository.MutateReport
						_, err := repos[node].Mutate(ctx, id, func(a *fixtures.Account) error {
							a.Balance++
							return nil
						}, repository.Report(&triesRep), repository.Retry(retryPolicy))
						switch {
						case err == nil:
							y.ack(triesRep.Attempts, id)
						case !y.fail(err):
							return err
						}
					}
					return nil
				})
				final := n.balances(t)
				if guarded {
					y.check(t, "Mutate "+name, n, before, final, true)
					return
				}
				var acked, present int64
				for _, k := range y.acked {
					acked += k
				}
				for _, v := range final {
					present += v
				}
				t.Logf("Save %s (negative control): acknowledged %d, present %d, lost %d", name, acked, present, acked-present)
				require.Less(t, present, acked, "plain Save must lose updates here, or the test could not catch a loss")
			})
		}
	}
}

// unguardedIncrement is the negative control's increment: read, add one,
// Save (UPDATE ... WHERE id = ?, no version). A 1213 is retried, as a
// careful application would; the lost updates are the ones Save overwrote.
func unguardedIncrement(ctx context.Context, db *gorm.DB, id int64) (int, error) {
	for tries := 1; ; tries++ {
		var a fixtures.Account
		if err := db.WithContext(ctx).First(&a, id).Error; err != nil {
			return tries, err
		}
		a.Balance++
		err := db.WithContext(ctx).Save(&a).Error
		if errNumber(err) == erDeadlock {
			continue
		}
		return tries, err
	}
}

// TestUpsertAcrossNodes runs Upsert increments from all three nodes on
// records that do not exist yet, so the first writers race to create them
// (from different nodes, each with the id the application chose): every
// record is created once and ends with exactly its acknowledged
// increments.
func TestUpsertAcrossNodes(t *testing.T) {
	workers, calls := sizes()
	for _, rows := range []int{1, 100} {
		name := map[int]string{1: "hot row", 100: "100 rows"}[rows]
		t.Run(name, func(t *testing.T) {
			n := openNodes(t)
			repos := n.accounts(t)
			before := aborts(t, rawNodes(t, n.dsns))
			n.log.reset()
			y := newTally()
			spread(t, workers, func(ctx context.Context, w, node int) error {
				r := rand.New(rand.NewPCG(uint64(w), 2))
				for range calls {
					id := pick(r, rows)
					var triesRep repository.MutateReport
					_, err := repos[node].Upsert(ctx, id, func() *fixtures.Account { return &fixtures.Account{Owner: "upsert"} },
						func(a *fixtures.Account) error {
							a.Balance++
							return nil
						}, repository.Report(&triesRep), repository.Retry(retryPolicy))
					switch {
					case err == nil:
						y.ack(triesRep.Attempts, id)
					case !y.fail(err):
						return err
					}
				}
				return nil
			})
			final := n.balances(t)
			for id := range y.acked {
				_, ok := final[id]
				require.True(t, ok, "record %d was acknowledged but does not exist", id)
			}
			y.check(t, "Upsert "+name, n, before, final, true)
		})
	}
}

// TestUpdateManyAcrossNodes runs batches of three increments, all or
// nothing, from all three nodes: a batch that meets a stale version or a
// 1213 (on a statement or at COMMIT) is read again and retried with
// locking.OnError and locking.IsRetryable. Every record ends with exactly
// its acknowledged increments.
func TestUpdateManyAcrossNodes(t *testing.T) {
	workers, calls := sizes()
	for _, rows := range []int{3, 100} {
		name := map[int]string{3: "3 hot rows", 100: "100 rows"}[rows]
		t.Run(name, func(t *testing.T) {
			n := openNodes(t)
			n.seed(t, rows)
			repos := n.accounts(t)
			before := aborts(t, rawNodes(t, n.dsns))
			n.log.reset()
			y := newTally()
			var commitDeadlocks atomic.Int64
			spread(t, workers, func(ctx context.Context, w, node int) error {
				r := rand.New(rand.NewPCG(uint64(w), 3))
				for range calls {
					ids := []int64{1, 2, 3}
					if rows > 3 {
						perm := r.Perm(rows)
						ids = []int64{int64(perm[0] + 1), int64(perm[1] + 1), int64(perm[2] + 1)}
					}
					tries := 0
					err := locking.OnError(ctx, retryPolicy, locking.IsRetryable, func(ctx context.Context) error {
						tries++
						batch := make([]*fixtures.Account, 0, len(ids))
						for _, id := range ids {
							a, err := repos[node].Get(ctx, id)
							if err != nil {
								return err
							}
							a.Balance++
							batch = append(batch, a)
						}
						err := repos[node].UpdateMany(ctx, batch)
						if errors.Is(err, locking.ErrDeadlock) && errNumber(err) == erDeadlock {
							commitDeadlocks.Add(1)
						}
						return err
					})
					switch {
					case err == nil:
						y.ack(tries, ids...)
					case !y.fail(err):
						return err
					}
				}
				return nil
			})
			final := n.balances(t)
			stmt, _ := n.log.snapshot()
			t.Logf("UpdateMany %s: %d batches failed with ErrDeadlock: %d on a statement, %d at COMMIT", name,
				commitDeadlocks.Load(), stmt, commitDeadlocks.Load()-stmt)
			y.check(t, "UpdateMany "+name, n, before, final, false)
		})
	}
}

// TestApplyAcrossNodes runs Apply increments (one UPDATE ... SET balance =
// balance + 1 and a SELECT, in a transaction: MySQL has no UPDATE ...
// RETURNING) from all three nodes on one hot row and on 100 rows: every
// acknowledged increment is there, none twice.
func TestApplyAcrossNodes(t *testing.T) {
	workers, calls := sizes()
	for _, rows := range []int{1, 100} {
		name := map[int]string{1: "hot row", 100: "100 rows"}[rows]
		t.Run(name, func(t *testing.T) {
			n := openNodes(t)
			n.seed(t, rows)
			repos := n.accounts(t)
			before := aborts(t, rawNodes(t, n.dsns))
			n.log.reset()
			y := newTally()
			add := []repository.Change{repository.Add("Balance", 1)}
			spread(t, workers, func(ctx context.Context, w, node int) error {
				r := rand.New(rand.NewPCG(uint64(w), 2))
				for range calls {
					id := pick(r, rows)
					_, err := repos[node].Apply(ctx, id, add)
					switch {
					case err == nil:
						y.ack(1, id)
					case !y.fail(err):
						return err
					}
				}
				return nil
			})
			y.check(t, "Apply "+name, n, before, n.balances(t), true)
		})
	}
}
