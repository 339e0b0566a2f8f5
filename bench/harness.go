package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gormlock/gormlock/internal/tests/fixtures"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/repository"
)

// The modes: each increments a counter (an account's balance) in a random
// record of the cell's keys, doing the same logical work.
const (
	ModeRaw  = "raw"  // the same SQL through database/sql: the floor
	ModeGORM = "gorm" // plain GORM with a hand-written WHERE version = ?
	// ModeMutate is Repository.Mutate as repository.New gives it (adaptive:
	// optimistic until a record proves hot, then with its row lock),
	// through one Repository shared by the process's workers: what an
	// application gets by default.
	ModeMutate = "mutate"
	// ModeMutateFlock is ModeMutate on SQLite with -procs above 1, the
	// processes taking SQLite's write lock in turns on the lock file with
	// flock alone (sqlitegate.SetTurnQueue(false)) instead of first come
	// first served: the baseline of the turn queue, side by side.
	ModeMutateFlock = "mutate-flock"
	// ModeOptimistic is Mutate with WithAdaptive(false), through one
	// shared Repository: optimistic attempts only (callers of one record
	// still queue in the process).
	ModeOptimistic = "optimistic"
	// ModeOptimisticMulti is Mutate with WithAdaptive(false) through a
	// Repository of each worker's own, as separate processes would run it:
	// no in-process queue for a record, only the version guard and the
	// retry policy.
	ModeOptimisticMulti = "optimistic-multi"
	ModePessimistic     = "pessimistic" // Repository.MutateRowLocked
	ModeLease           = "lease"       // Leases.Acquire + Leases.Update
	// ModeLeaseRow is ModeLease with the leases in the records' own rows
	// (WithLeasesInRow): one UPDATE to take the lease (which reads the
	// record on PostgreSQL; a SELECT by the token reads it elsewhere), one
	// to write it and end the lease.
	ModeLeaseRow = "lease-row"
	// ModeLeaseRowSQL is the statements ModeLeaseRow sends on SQLite and
	// PostgreSQL, written by hand on database/sql (on SQLite without
	// gormlock's gate): the floor of a lease in the row. It runs only when
	// named, on SQLite and PostgreSQL only.
	ModeLeaseRowSQL = "lease-row-sql"
	// ModeAdaptive is Mutate as New gives it (adaptive) through a
	// Repository of each worker's own, as separate processes would run it.
	ModeAdaptive = "adaptive"
	// ModeAtomic is Repository.Apply with Add: one UPDATE ... SET balance =
	// balance + 1 that advances the version, no read, no retry.
	ModeAtomic = "atomic"
	// ModePgxPool is raw's statements through pgx's own pool (pgxpool,
	// its defaults: cached prepared statements, at most max(4, CPUs)
	// connections), on PostgreSQL only: the floor of a program that does
	// not use database/sql.
	ModePgxPool = "pgxpool"
	// ModeClaim is the work-queue read: in a transaction, Claim (FOR UPDATE
	// SKIP LOCKED) the first record from the chosen one on that no one
	// else holds, increment it, commit. It runs only when named, and is
	// skipped where gormlock refuses Claim (SQLite, Galera).
	ModeClaim = "claim"
	// ModeUnguarded reads and writes back with no version and no lock: the
	// negative control, which loses updates and so fails the run.
	ModeUnguarded = "unguarded"
)

// AllModes lists the modes that run by default, in the order they are
// reported.
var AllModes = []string{ModeRaw, ModePgxPool, ModeGORM, ModeMutate, ModeOptimisticMulti, ModeAdaptive, ModePessimistic, ModeAtomic, ModeLease, ModeLeaseRow}

// OptInModes run only when -modes names them.
var OptInModes = []string{ModeOptimistic, ModeMutateFlock, ModeClaim, ModeUnguarded, ModeLeaseRowSQL}

// Cell is one measurement: a mode, a number of keys and of workers.
type Cell struct {
	Mode    string `json:"mode"`
	Keys    int    `json:"keys"`
	Workers int    `json:"workers"`
}

// Result is what one cell measured, over all its rounds.
type Result struct {
	Cell
	// Procs is how many processes the cell's workers ran in: without
	// -procs 1, this one; with -procs N above 1, min(N, workers) child
	// processes.
	Procs   int           `json:"procs"`
	Ops     int64         `json:"ops"`    // successful increments
	Errors  int64         `json:"errors"` // operations that gave up (retries exhausted)
	Elapsed time.Duration `json:"elapsed_ns"`
	// OpsPerSec is the median of the rounds' throughputs (RoundOpsPerSec).
	OpsPerSec      float64   `json:"ops_per_sec"`
	RoundOpsPerSec []float64 `json:"round_ops_per_sec"`
	// VsRaw is the throughput relative to the raw mode in the same keys
	// and workers: the median over rounds of this cell's ops/s over raw's in
	// the same round (0 when raw did not run).
	VsRaw        float64 `json:"vs_raw,omitempty"`
	RetriesPerOp float64 `json:"retries_per_op"`
	// CPUPerOp is this process's CPU time (user and system: gormlock or
	// the hand-written loop, the driver, the Go runtime) per successful
	// operation, over all rounds: the client's own cost, which machine
	// noise and the database's waits do not blur. A PostgreSQL server's CPU
	// is not in it; SQLite's is, since it runs in this process. With
	// -cpuprofile the profiler's own cost is in it too. With -procs above
	// 1 it is the child processes' CPU time in the round, summed.
	CPUPerOp time.Duration `json:"cpu_per_op_ns"`
	P50      time.Duration `json:"p50_ns"` // over every operation of every round
	P99      time.Duration `json:"p99_ns"`
	Max      time.Duration `json:"max_ns"`
	// Lost is successful increments minus the counters' growth: anything
	// but 0 is a lost update, and fails the run. On Galera the counters
	// are read on every node, each after it applied every write the
	// cluster committed (wsrep_sync_wait), and the nodes must agree.
	Lost int64 `json:"lost"`
	// Note says how the mode behaves on this database where that differs
	// from its description (Galera's node-local row locks).
	Note string `json:"note,omitempty"`
	// NodeOps are the successful operations of the workers of each node
	// (Galera: worker w runs on node w % nodes).
	NodeOps []int64 `json:"node_ops,omitempty"`
	// ProcOps are, with -procs above 1, the successful operations of each
	// child process (worker w in process w % procs), over all rounds.
	ProcOps []int64 `json:"proc_ops,omitempty"`
	// ClusterAborts is, on Galera, how many transactions the cluster
	// aborted during the cell's rounds — certification failures and
	// brute-force aborts (wsrep_local_cert_failures + wsrep_local_bf_aborts
	// on every node): each either answered with error 1213 and retried by
	// the client, or an autocommit statement the node retried by itself
	// (wsrep_retry_autocommit) — and AbortsPerOp that per successful
	// operation.
	ClusterAborts int64   `json:"cluster_aborts,omitempty"`
	AbortsPerOp   float64 `json:"cluster_aborts_per_op,omitempty"`

	attempts int64           // every attempt, for RetriesPerOp
	cpu      time.Duration   // this process's CPU time in the rounds
	lat      []time.Duration // every operation's latency, for the percentiles
}

// merge adds round q of the same cell to r; finish computes the summary.
func (r *Result) merge(q Result) {
	r.Cell = q.Cell
	r.Procs = q.Procs
	r.Ops += q.Ops
	r.Errors += q.Errors
	r.Elapsed += q.Elapsed
	r.Lost += q.Lost
	r.Note = q.Note
	r.ClusterAborts += q.ClusterAborts
	for i, n := range q.NodeOps {
		if i == len(r.NodeOps) {
			r.NodeOps = append(r.NodeOps, 0)
		}
		r.NodeOps[i] += n
	}
	for i, n := range q.ProcOps {
		if i == len(r.ProcOps) {
			r.ProcOps = append(r.ProcOps, 0)
		}
		r.ProcOps[i] += n
	}
	r.attempts += q.attempts
	r.cpu += q.cpu
	r.lat = append(r.lat, q.lat...)
	r.RoundOpsPerSec = append(r.RoundOpsPerSec, q.OpsPerSec)
}

// finish computes the median throughput, retries and latency percentiles.
func (r *Result) finish() {
	r.OpsPerSec = median(r.RoundOpsPerSec)
	if total := r.Ops + r.Errors; total > 0 {
		r.RetriesPerOp = float64(r.attempts-total) / float64(total)
	}
	if r.Ops > 0 {
		r.CPUPerOp = r.cpu / time.Duration(r.Ops)
		r.AbortsPerOp = float64(r.ClusterAborts) / float64(r.Ops)
	}
	if len(r.lat) > 0 {
		slices.Sort(r.lat)
		all := r.lat
		r.P50, r.P99, r.Max = all[len(all)*50/100], all[min(len(all)-1, len(all)*99/100)], all[len(all)-1]
	}
	r.lat = nil
}

// errLost marks a cell whose counters do not add up.
var errLost = errors.New("lost updates")

// errNothingToRun is the error of a run whose modes are all skipped.
var errNothingToRun = errors.New("nothing to run")

// errNothingFree is the claim mode's attempt that found every record it
// could take locked by other workers: it waits and tries again.
var errNothingFree = errors.New("no free record to claim")

// node is one database server the workers write through: the only one, or
// one node of a Galera cluster, with a pool and repositories of its own.
type node struct {
	db       *gorm.DB
	sqlDB    *sql.DB
	accounts *repository.Repository[fixtures.Account] // mutate, pessimistic, atomic, claim
	// optimistic is the shared Repository with adaptive Mutate off.
	optimistic *repository.Repository[fixtures.Account]
	leased     *repository.Repository[fixtures.Account] // lease mode: WithLeases
	leasedRow  *repository.Repository[fixtures.Account] // lease-row mode: WithLeasesInRow
	// dsn is the node's DSN; pool its pgxpool, opened by the first
	// pgxpool worker (PostgreSQL only).
	dsn    string
	poolMu sync.Mutex
	pool   *pgxpool.Pool
}

// pgxPool returns the node's pgxpool, opening it with the DSN as it is
// (pgx's defaults) the first time.
func (n *node) pgxPool(ctx context.Context) (*pgxpool.Pool, error) {
	n.poolMu.Lock()
	defer n.poolMu.Unlock()
	if n.pool == nil {
		p, err := pgxpool.New(ctx, n.dsn)
		if err != nil {
			return nil, err
		}
		n.pool = p
	}
	return n.pool, nil
}

// close closes the pgxpools the harness opened.
func (h *harness) close() {
	for _, n := range h.nodes {
		if n.pool != nil {
			n.pool.Close()
		}
	}
}

// harness runs cells against one database, or one Galera cluster.
type harness struct {
	// nodes are the servers; worker w of a cell writes through
	// nodes[w % len(nodes)]. Records are created and deleted through
	// nodes[0].
	nodes []*node
	// sync are, on Galera, the nodes' pools that read with
	// wsrep_sync_wait=1; nil elsewhere.
	sync    []*sql.DB
	db      string // -db: sqlite, postgres, mariadb or galera
	dialect string // GORM's dialector: sqlite, postgres or mysql
	policy  locking.RetryPolicy
	// procs is -procs: above 1, a cell's workers run in up to procs child
	// processes, each opening procDSNs (the nodes' DSNs, SQLite's file
	// by path) with pools and repositories of its own.
	procs    int
	procDSNs []string
}

// newHarness prepares the modes on t's nodes, every retrying one with
// policy.
func newHarness(t *target, db string, policy locking.RetryPolicy) (*harness, error) {
	h := &harness{sync: t.sync, db: db, dialect: t.nodes[0].Dialector.Name(), policy: policy}
	for i, g := range t.nodes {
		sqlDB, err := g.DB()
		if err != nil {
			return nil, err
		}
		accounts, err := repository.New[fixtures.Account](g, repository.WithRetryPolicy(policy))
		if err != nil {
			return nil, err
		}
		optimistic, err := repository.New[fixtures.Account](g, repository.WithRetryPolicy(policy), repository.WithAdaptive(false))
		if err != nil {
			return nil, err
		}
		leased, err := repository.New[fixtures.Account](g, repository.WithLeases(), repository.WithRetryPolicy(policy))
		if err != nil {
			return nil, err
		}
		leasedRow, err := repository.New[fixtures.Account](g, repository.WithLeasesInRow(), repository.WithRetryPolicy(policy))
		if err != nil {
			return nil, err
		}
		nd := &node{db: g, sqlDB: sqlDB, accounts: accounts, optimistic: optimistic, leased: leased, leasedRow: leasedRow}
		if i < len(t.dsns) {
			nd.dsn = t.dsns[i]
		}
		h.nodes = append(h.nodes, nd)
	}
	return h, nil
}

// skip returns why mode cannot run on this database ("" when it can), as
// gormlock itself answers: Claim is refused with locking.ErrNotSupported
// where SKIP LOCKED cannot share work out (SQLite, Galera).
func (h *harness) skip(ctx context.Context, mode string) string {
	if mode == ModePgxPool && h.dialect != "postgres" {
		return "pgxpool is pgx's pool: PostgreSQL only"
	}
	if mode == ModeLeaseRowSQL && h.dialect != "sqlite" && h.dialect != "postgres" {
		return "lease-row-sql is SQLite's and PostgreSQL's statements: SQLite and PostgreSQL only"
	}
	if mode == ModeMutateFlock && (h.dialect != "sqlite" || h.procs <= 1) {
		return "mutate-flock differs from mutate only on SQLite with -procs above 1"
	}
	if mode != ModeClaim {
		return ""
	}
	// Outside a transaction Claim fails either way; the check of the
	// dialect comes first.
	if _, err := h.nodes[0].accounts.Claim(ctx, 1); errors.Is(err, locking.ErrNotSupported) {
		return err.Error()
	}
	return ""
}

// note says how mode behaves on this database where that differs from its
// description.
func (h *harness) note(mode string) string {
	if h.db == dbGalera && mode == ModePessimistic {
		return "node-local: FOR UPDATE holds the row on the worker's node only; a writer on another node is not kept out but loses at certification (1213, ErrDeadlock) and MutateRowLocked retries it from a fresh transaction"
	}
	return ""
}

// op is one increment of record id; it returns how many attempts it took.
type op func(ctx context.Context, id int64) (attempts int, err error)

// run measures one round of a cell for about d, on fresh records, and
// checks that no increment was lost. The workers run in this process, or
// (with -procs above 1) spread over child processes (runProcs); either way
// the check runs here, on the database. The Result's summary is left to
// finish.
func (h *harness) run(ctx context.Context, c Cell, d time.Duration) (Result, error) {
	owner := fmt.Sprintf("bench-%s-%d-%d-%d", c.Mode, c.Keys, c.Workers, time.Now().UnixNano())
	defer func() { _ = h.inTx(context.WithoutCancel(ctx), "DELETE FROM accounts WHERE owner = ?", owner) }()
	ids, err := h.seed(ctx, owner, c.Keys)
	if err != nil {
		return Result{}, err
	}
	var incs []op
	if h.procs <= 1 {
		incs = make([]op, c.Workers)
		for w := range incs {
			if incs[w], err = h.op(c.Mode, h.nodes[w%len(h.nodes)], owner); err != nil {
				return Result{}, err
			}
		}
	}
	aborts0, err := h.clusterAborts(ctx)
	if err != nil {
		return Result{}, err
	}

	var t tally
	var procOps []int64
	procs := 1
	if h.procs <= 1 {
		ws := make([]int, c.Workers)
		for w := range ws {
			ws[w] = w
		}
		start := time.Now()
		t, err = work(ctx, c, ws, incs, len(h.nodes), ids, start, start.Add(d))
	} else {
		procs = min(h.procs, c.Workers)
		t, procOps, err = h.runProcs(ctx, c, d, ids, owner)
	}
	if err != nil {
		return Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	aborts1, err := h.clusterAborts(ctx)
	if err != nil {
		return Result{}, err
	}
	sum, err := h.sum(ctx, owner)
	if err != nil {
		return Result{}, err
	}
	r := Result{Cell: c, Procs: procs, Ops: t.Ops, Errors: t.Errors, Elapsed: t.Elapsed, Lost: t.Ops - sum,
		OpsPerSec: float64(t.Ops) / t.Elapsed.Seconds(), attempts: t.Attempts, cpu: t.CPU, lat: t.Lat,
		Note: h.note(c.Mode), ClusterAborts: aborts1 - aborts0, ProcOps: procOps}
	if len(h.nodes) > 1 {
		r.NodeOps = t.NodeOps
	}
	if r.Lost != 0 {
		where := ""
		if procs > 1 {
			where = fmt.Sprintf(" procs=%d", procs)
		}
		return r, fmt.Errorf("%w: %s keys=%d workers=%d%s: %d successful increments, counters grew by %d", errLost, c.Mode, c.Keys, c.Workers, where, r.Ops, sum)
	}
	return r, nil
}

// tally is what a set of workers measured in one round: all the cell's
// workers in this process, or one child process's share of them (sent to
// the parent as JSON).
type tally struct {
	Ops      int64 `json:"ops"`      // successful increments
	Errors   int64 `json:"errors"`   // operations that gave up (retries exhausted)
	Attempts int64 `json:"attempts"` // every attempt
	// NodeOps are the successful operations per node (worker w on node
	// w % nodes).
	NodeOps []int64 `json:"node_ops"`
	// Elapsed runs from the round's start to the end of the last of these
	// workers' operations.
	Elapsed time.Duration `json:"elapsed_ns"`
	// CPU is this process's CPU time (user and system) in that window.
	CPU time.Duration   `json:"cpu_ns"`
	Lat []time.Duration `json:"lat_ns"` // every operation's latency
}

// work runs the workers ws (global worker indices of cell c; incs[i] is
// the operation of worker ws[i]) from start until deadline, each on a
// random record of ids, and counts what they did; nodes is how many
// servers the workers are spread over. A worker's operation under way at
// the deadline finishes. An error other than running out of retries stops
// its worker, and is returned once all are done.
func work(ctx context.Context, c Cell, ws []int, incs []op, nodes int, ids []int64, start, deadline time.Time) (tally, error) {
	if wait := time.Until(start); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return tally{}, ctx.Err()
		}
	}
	var ok, failed, attempts atomic.Int64
	nodeOps := make([]atomic.Int64, nodes)
	lat := make([][]time.Duration, len(ws))
	errs := make([]error, len(ws))
	var wg sync.WaitGroup
	cpu0 := processCPU()
	for i, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), uint64(c.Keys)))
			for time.Now().Before(deadline) && ctx.Err() == nil {
				id := ids[rng.IntN(len(ids))]
				t0 := time.Now()
				n, err := incs[i](ctx, id)
				lat[i] = append(lat[i], time.Since(t0))
				attempts.Add(int64(n))
				switch {
				case err == nil:
					ok.Add(1)
					nodeOps[w%nodes].Add(1)
				case errors.Is(err, locking.ErrRetriesExhausted):
					failed.Add(1)
				default:
					errs[i] = fmt.Errorf("%s: %w", c.Mode, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	t := tally{Ops: ok.Load(), Errors: failed.Load(), Attempts: attempts.Load(), Elapsed: time.Since(start),
		CPU: processCPU() - cpu0, Lat: slices.Concat(lat...)}
	for i := range nodeOps {
		t.NodeOps = append(t.NodeOps, nodeOps[i].Load())
	}
	if err := errors.Join(errs...); err != nil {
		return tally{}, err
	}
	return t, nil
}

// seed creates n accounts at balance 0 and returns their ids. On Galera it
// returns once every node has them.
func (h *harness) seed(ctx context.Context, owner string, n int) ([]int64, error) {
	rows := make([]fixtures.Account, n)
	now := time.Now().UTC().Truncate(time.Microsecond)
	for i := range rows {
		rows[i] = fixtures.Account{Owner: owner, Model: models.Model{Versioned: models.Versioned{Version: 1, CreatedAt: now, UpdatedAt: now}}}
	}
	err := repository.RunInTx(ctx, h.nodes[0].db, func(ctx context.Context) error {
		return h.nodes[0].accounts.DB(ctx).CreateInBatches(&rows, 500).Error
	})
	if err != nil {
		return nil, err
	}
	db := h.nodes[0].db.WithContext(ctx)
	// Read the keys back rather than trust the ones GORM filled in: on
	// Galera each node hands out every third auto-increment value, which
	// a batch's LAST_INSERT_ID cannot tell.
	var ids []int64
	if err := db.Raw("SELECT id FROM accounts WHERE owner = ? ORDER BY id", owner).Scan(&ids).Error; err != nil {
		return nil, err
	}
	if len(ids) != n {
		return nil, fmt.Errorf("seeding %d accounts: %d exist", n, len(ids))
	}
	for i, s := range h.sync {
		var k int
		if err := s.QueryRowContext(ctx, "SELECT COUNT(*) FROM accounts WHERE owner = ?", owner).Scan(&k); err != nil {
			return nil, fmt.Errorf("node %d: %w", i+1, err)
		}
		if k != n {
			return nil, fmt.Errorf("node %d sees %d of the %d accounts seeded on node 1 after a causal read", i+1, k, n)
		}
	}
	return ids, nil
}

// inTx runs the statement q in a transaction of gormlock's (RunInTx) on the
// first node: the bench's own writes (seeding, cleanup) wait their turn for
// SQLite's write lock as gormlock's do, bounded by ctx, rather than in
// SQLite's busy handler, which serves waiters in no order and on a busy
// machine can fail one with "database is locked".
func (h *harness) inTx(ctx context.Context, q string, args ...any) error {
	n := h.nodes[0]
	return repository.RunInTx(ctx, n.db, func(ctx context.Context) error {
		return n.accounts.DB(ctx).Exec(q, args...).Error
	})
}

// sum returns the sum of owner's counters. On Galera it reads every node
// after the node applied every write the cluster committed, and fails
// when two nodes disagree.
func (h *harness) sum(ctx context.Context, owner string) (int64, error) {
	const q = "SELECT COALESCE(SUM(balance), 0) FROM accounts WHERE owner = ?"
	if len(h.sync) == 0 {
		var sum int64
		err := h.nodes[0].db.WithContext(ctx).Raw(q, owner).Scan(&sum).Error
		return sum, err
	}
	sums := make([]int64, len(h.sync))
	for i, s := range h.sync {
		if err := s.QueryRowContext(ctx, q, owner).Scan(&sums[i]); err != nil {
			return 0, fmt.Errorf("node %d: %w", i+1, err)
		}
	}
	for i := range sums {
		if sums[i] != sums[0] {
			return 0, fmt.Errorf("the nodes disagree after causal reads: counters sum to %v on nodes 1..%d", sums, len(sums))
		}
	}
	return sums[0], nil
}

// clusterAborts is, on Galera, the cluster's aborted transactions so far:
// wsrep_local_cert_failures + wsrep_local_bf_aborts over every node. 0
// elsewhere.
func (h *harness) clusterAborts(ctx context.Context) (int64, error) {
	var total int64
	for i, s := range h.sync {
		var n sql.NullInt64
		err := s.QueryRowContext(ctx, `SELECT SUM(VARIABLE_VALUE) FROM information_schema.GLOBAL_STATUS
WHERE VARIABLE_NAME IN ('WSREP_LOCAL_CERT_FAILURES', 'WSREP_LOCAL_BF_ABORTS')`).Scan(&n)
		if err != nil {
			return 0, fmt.Errorf("node %d: reading its wsrep counters: %w", i+1, err)
		}
		total += n.Int64
	}
	return total, nil
}

// retryable reports whether an attempt of a hand-written loop may run
// again from a fresh read, as gormlock's Mutate does: the version was
// stale, or the database refused to apply the write (a deadlock; on Galera
// a certification conflict with another node, 1213; a serialization
// failure). On SQLite also "database is locked": the connection's busy
// timeout ran out while other writers held the lock, and nothing was
// written. SQLite's busy handler serves its waiters in no order, so on a
// busy machine one can lose the lock for that long; the loop then waits its
// turn again, as gormlock's writers do, instead of failing the run.
func retryable(err error) bool {
	return locking.IsRetryable(locking.Classify(err)) || locking.IsSQLiteBusy(err)
}

// op returns the operation of one worker in mode, writing through n; owner
// names the cell's records.
func (h *harness) op(mode string, n *node, owner string) (op, error) {
	inc := func(a *fixtures.Account) error { a.Balance++; return nil }
	// mutate runs Mutate or MutateRowLocked of one repository.
	mutate := func(call func(context.Context, any, func(*fixtures.Account) error, ...repository.MutateOption) (*fixtures.Account, error)) op {
		return func(ctx context.Context, id int64) (int, error) {
			var rep repository.MutateReport
			_, err := call(ctx, id, inc, repository.Report(&rep))
			return rep.Attempts, err
		}
	}
	mutateLocked := func(call func(context.Context, any, func(*fixtures.Account) error, ...repository.LockedMutateOption) (*fixtures.Account, error)) op {
		return func(ctx context.Context, id int64) (int, error) {
			var rep repository.MutateReport
			_, err := call(ctx, id, inc, repository.Report(&rep))
			return rep.Attempts, err
		}
	}
	switch mode {
	case ModeRaw:
		return h.rawOp(n), nil
	case ModeGORM:
		return h.gormOp(n), nil
	case ModePgxPool:
		return h.pgxPoolOp(n)
	case ModeMutate, ModeMutateFlock:
		return mutate(n.accounts.Mutate), nil
	case ModeOptimistic:
		return mutate(n.optimistic.Mutate), nil
	case ModeOptimisticMulti:
		own, err := repository.New[fixtures.Account](n.db, repository.WithRetryPolicy(h.policy), repository.WithAdaptive(false))
		if err != nil {
			return nil, err
		}
		return mutate(own.Mutate), nil
	case ModeAdaptive:
		own, err := repository.New[fixtures.Account](n.db, repository.WithRetryPolicy(h.policy))
		if err != nil {
			return nil, err
		}
		return mutate(own.Mutate), nil
	case ModePessimistic:
		return mutateLocked(n.accounts.MutateRowLocked), nil
	case ModeAtomic:
		add := []repository.Change{repository.Add("Balance", 1)}
		return func(ctx context.Context, id int64) (int, error) {
			_, err := n.accounts.Apply(ctx, id, add)
			return 1, err
		}, nil
	case ModeLease:
		return h.leaseOp(n.leased), nil
	case ModeLeaseRow:
		return h.leaseOp(n.leasedRow), nil
	case ModeLeaseRowSQL:
		return h.leaseRowSQLOp(n), nil
	case ModeClaim:
		return h.claimOp(n, owner), nil
	case ModeUnguarded:
		return h.unguardedOp(n), nil
	}
	return nil, fmt.Errorf("unknown mode %q (want one of %v)", mode, slices.Concat(AllModes, OptInModes))
}

// leaseOp leases the record, increments it and writes it with the lease,
// retried while someone else holds the lease. A write the database refused
// to apply (1213 on Galera) left the lease held: the record is read again
// and written again with the same lease. Any other failed write gives the
// lease back before starting over.
func (h *harness) leaseOp(leased *repository.Repository[fixtures.Account]) op {
	return func(ctx context.Context, id int64) (int, error) {
		attempts := 0
		var lease *repository.Lease
		err := locking.OnError(ctx, h.policy, func(err error) bool {
			return errors.Is(err, locking.ErrLocked) || errors.Is(err, locking.ErrLeaseExpired) || retryable(err)
		}, func(ctx context.Context) error {
			attempts++
			var a *fixtures.Account
			var err error
			if lease == nil {
				a, lease, err = leased.Leases().Acquire(ctx, id, "bench", repository.TTL(5*time.Second))
			} else {
				// Still ours; the rolled-back write left a's version
				// changed in memory, so read it again.
				a, err = leased.Get(ctx, id)
			}
			if err != nil {
				if lease != nil {
					_ = leased.Leases().Release(context.WithoutCancel(ctx), lease)
					lease = nil
				}
				return err
			}
			a.Balance++
			err = leased.Leases().Update(ctx, a, lease)
			switch {
			case err == nil:
				lease = nil
			case errors.Is(err, locking.ErrDeadlock), errors.Is(err, locking.ErrSerialization):
				// Not applied, and the lease still held: try again with it.
			default:
				_ = leased.Leases().Release(context.WithoutCancel(ctx), lease)
				lease = nil
			}
			return err
		})
		if lease != nil {
			_ = leased.Leases().Release(context.WithoutCancel(ctx), lease)
		}
		return attempts, err
	}
}

// claimOp claims, in a transaction, the first record of the cell from id
// on that no other worker holds (FOR UPDATE SKIP LOCKED), increments it
// and commits; when every such record is held it waits and tries again.
func (h *harness) claimOp(n *node, owner string) op {
	return func(ctx context.Context, id int64) (int, error) {
		attempts := 0
		err := locking.OnError(ctx, h.policy, func(err error) bool {
			return errors.Is(err, errNothingFree) || retryable(err)
		}, func(ctx context.Context) error {
			attempts++
			return repository.RunInTx(ctx, n.db, func(ctx context.Context) error {
				got, err := n.accounts.Claim(ctx, 1, repository.Where("owner = ? AND id >= ?", owner, id), repository.OrderBy("id", false))
				if err != nil {
					return err
				}
				if len(got) == 0 {
					return errNothingFree
				}
				got[0].Balance++
				return n.accounts.Update(ctx, &got[0])
			})
		})
		return attempts, err
	}
}

// unguardedOp reads and writes the counter back with no version and no
// lock: the negative control. A write the database refused (1213 on
// Galera: not applied) is tried again from a fresh read.
func (h *harness) unguardedOp(n *node) op {
	sel, upd := "SELECT balance FROM accounts WHERE id = ?", "UPDATE accounts SET balance = ? WHERE id = ?"
	if h.dialect == "postgres" {
		sel, upd = "SELECT balance FROM accounts WHERE id = $1", "UPDATE accounts SET balance = $1 WHERE id = $2"
	}
	return func(ctx context.Context, id int64) (int, error) {
		attempts := 0
		err := locking.OnError(ctx, h.policy, retryable, func(ctx context.Context) error {
			attempts++
			var balance int64
			if err := n.sqlDB.QueryRowContext(ctx, sel, id).Scan(&balance); err != nil {
				return err
			}
			_, err := n.sqlDB.ExecContext(ctx, upd, balance+1, id)
			return err
		})
		return attempts, err
	}
}

// rawOp is the read-modify-write loop by hand on database/sql, with the
// same retry policy: the floor gormlock is measured against. It sends the
// statements Mutate sends — a SELECT of every column by key, and the
// guarded UPDATE of every writable column — so the difference between the
// two modes is gormlock's own cost. Like Mutate it retries a stale version
// and a write the database refused to apply (1213).
func (h *harness) rawOp(n *node) op {
	sel := "SELECT id, version, created_at, updated_at, owner, balance, frozen FROM accounts WHERE id = ?"
	upd := "UPDATE accounts SET owner = ?, balance = ?, frozen = ?, version = ?, updated_at = ? WHERE id = ? AND version = ?"
	switch h.dialect {
	case "postgres":
		// As gormlock: the version from the database's clock, read back.
		sel = "SELECT id, version, created_at, updated_at, owner, balance, frozen FROM accounts WHERE id = $1"
		upd = "UPDATE accounts SET owner = $1, balance = $2, frozen = $3, version = GREATEST($4, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT), updated_at = $5 WHERE id = $6 AND version = $7 RETURNING version"
	case "mysql":
		// As gormlock: the version from the database's clock, read back
		// through LAST_INSERT_ID (MySQL has no UPDATE ... RETURNING), which
		// the server's answer to the UPDATE carries.
		sel = "SELECT `id`, `version`, `created_at`, `updated_at`, `owner`, `balance`, `frozen` FROM `accounts` WHERE `id` = ?"
		upd = "UPDATE `accounts` SET `owner` = ?, `balance` = ?, `frozen` = ?, `version` = LAST_INSERT_ID(GREATEST(?, (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', SYSDATE(6)) - TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), CURRENT_TIMESTAMP(6))))), `updated_at` = ? WHERE `id` = ? AND `version` = ?"
	}
	dialect := h.dialect
	return func(ctx context.Context, id int64) (int, error) {
		attempts := 0
		err := locking.OnError(ctx, h.policy, retryable, func(ctx context.Context) error {
			attempts++
			var a fixtures.Account
			if err := n.sqlDB.QueryRowContext(ctx, sel, id).Scan(&a.ID, &a.Version, &a.CreatedAt, &a.UpdatedAt, &a.Owner, &a.Balance, &a.Frozen); err != nil {
				return err
			}
			a.Balance++
			now := time.Now().UTC().Truncate(time.Microsecond)
			switch dialect {
			case "postgres":
				err := n.sqlDB.QueryRowContext(ctx, upd, a.Owner, a.Balance, a.Frozen, a.Version+1, now, a.ID, a.Version).Scan(&a.Version)
				if errors.Is(err, sql.ErrNoRows) {
					return locking.ErrStaleData
				}
				return err
			case "mysql":
				res, err := n.sqlDB.ExecContext(ctx, upd, a.Owner, a.Balance, a.Frozen, a.Version+1, now, a.ID, a.Version)
				if err != nil {
					return err
				}
				k, err := res.RowsAffected()
				if err == nil && k == 1 {
					a.Version, err = res.LastInsertId()
				}
				if err != nil || k != 1 {
					return errors.Join(locking.ErrStaleData, err)
				}
				return nil
			}
			res, err := n.sqlDB.ExecContext(ctx, upd, a.Owner, a.Balance, a.Frozen, max(a.Version+1, now.UnixMicro()), now, a.ID, a.Version)
			if err != nil {
				return err
			}
			if k, err := res.RowsAffected(); err != nil || k != 1 {
				return errors.Join(locking.ErrStaleData, err)
			}
			return nil
		})
		return attempts, err
	}
}

// gormOp is what users write today: plain GORM, a hand-written version
// condition, RowsAffected checked, retried like the raw mode.
func (h *harness) gormOp(n *node) op {
	return func(ctx context.Context, id int64) (int, error) {
		attempts := 0
		err := locking.OnError(ctx, h.policy, retryable, func(ctx context.Context) error {
			attempts++
			var a fixtures.Account
			if err := n.db.WithContext(ctx).First(&a, id).Error; err != nil {
				return err
			}
			res := n.db.WithContext(ctx).Model(&fixtures.Account{}).Where("id = ? AND version = ?", id, a.Version).
				Updates(map[string]any{"balance": a.Balance + 1, "version": a.Version + 1})
			if res.Error != nil {
				return res.Error
			}
			if res.RowsAffected != 1 {
				return locking.ErrStaleData
			}
			return nil
		})
		return attempts, err
	}
}

// pgxPoolOp is rawOp through pgx's own pool, with pgx's defaults, on
// PostgreSQL.
func (h *harness) pgxPoolOp(n *node) (op, error) {
	pool, err := n.pgxPool(context.Background())
	if err != nil {
		return nil, err
	}
	const sel = "SELECT id, version, created_at, updated_at, owner, balance, frozen FROM accounts WHERE id = $1"
	const upd = "UPDATE accounts SET owner = $1, balance = $2, frozen = $3, version = GREATEST($4, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT), updated_at = $5 WHERE id = $6 AND version = $7 RETURNING version"
	return func(ctx context.Context, id int64) (int, error) {
		attempts := 0
		err := locking.OnError(ctx, h.policy, retryable, func(ctx context.Context) error {
			attempts++
			var a fixtures.Account
			if err := pool.QueryRow(ctx, sel, id).Scan(&a.ID, &a.Version, &a.CreatedAt, &a.UpdatedAt, &a.Owner, &a.Balance, &a.Frozen); err != nil {
				return err
			}
			a.Balance++
			now := time.Now().UTC().Truncate(time.Microsecond)
			err := pool.QueryRow(ctx, upd, a.Owner, a.Balance, a.Frozen, a.Version+1, now, a.ID, a.Version).Scan(&a.Version)
			if errors.Is(err, pgx.ErrNoRows) {
				return locking.ErrStaleData
			}
			return err
		})
		return attempts, err
	}, nil
}
