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

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/repository"
)

// The modes: each increments a counter (an account's balance) in a random
// record of the cell's keys, doing the same logical work.
const (
	ModeRaw        = "raw"        // the same SQL through database/sql: the floor
	ModeGORM       = "gorm"       // plain GORM with a hand-written WHERE version = ?
	ModeOptimistic = "optimistic" // Repository.Mutate
	// ModeOptimisticMulti is Mutate through a Repository of each worker's
	// own, as separate processes would run it: no in-process queue for a
	// record, only the version guard and the retry policy.
	ModeOptimisticMulti = "optimistic-multi"
	ModePessimistic     = "pessimistic" // Repository.MutateLocked
	ModeLease           = "lease"       // GetAndLock + UpdateWithLease
	// ModeUnguarded reads and writes back with no version and no lock: the
	// negative control, which loses updates and so fails the run.
	ModeUnguarded = "unguarded"
)

// AllModes lists the modes in the order they are reported.
var AllModes = []string{ModeRaw, ModeGORM, ModeOptimistic, ModeOptimisticMulti, ModePessimistic, ModeLease}

// Cell is one measurement: a mode, a number of keys and of workers.
type Cell struct {
	Mode    string `json:"mode"`
	Keys    int    `json:"keys"`
	Workers int    `json:"workers"`
}

// Result is what one cell measured, over all its rounds.
type Result struct {
	Cell
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
	// -cpuprofile the profiler's own cost is in it too.
	CPUPerOp time.Duration `json:"cpu_per_op_ns"`
	P50      time.Duration `json:"p50_ns"` // over every operation of every round
	P99      time.Duration `json:"p99_ns"`
	Max      time.Duration `json:"max_ns"`
	// Lost is successful increments minus the counters' growth: anything
	// but 0 is a lost update, and fails the run.
	Lost int64 `json:"lost"`

	attempts int64           // every attempt, for RetriesPerOp
	cpu      time.Duration   // this process's CPU time in the rounds
	lat      []time.Duration // every operation's latency, for the percentiles
}

// merge adds round q of the same cell to r; finish computes the summary.
func (r *Result) merge(q Result) {
	r.Cell = q.Cell
	r.Ops += q.Ops
	r.Errors += q.Errors
	r.Elapsed += q.Elapsed
	r.Lost += q.Lost
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

// harness runs cells against one database.
type harness struct {
	db       *gorm.DB
	sqlDB    *sql.DB
	accounts *repository.Repository[models.Account] // optimistic and pessimistic
	leased   *repository.Repository[models.Account] // lease mode: WithLeases
	dialect  string
	policy   locking.RetryPolicy
}

// newHarness prepares the modes on db, every retrying one with policy.
func newHarness(db *gorm.DB, policy locking.RetryPolicy) (*harness, error) {
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	accounts, err := repository.New[models.Account](db, repository.WithRetryPolicy(policy))
	if err != nil {
		return nil, err
	}
	leased, err := repository.New[models.Account](db, repository.WithLeases(), repository.WithRetryPolicy(policy))
	if err != nil {
		return nil, err
	}
	return &harness{db: db, sqlDB: sqlDB, accounts: accounts, leased: leased, dialect: db.Dialector.Name(), policy: policy}, nil
}

// op is one increment of record id; it returns how many attempts it took.
type op func(ctx context.Context, id int64) (attempts int, err error)

// run measures one round of a cell for about d, on fresh records, and
// checks that no increment was lost. The Result's summary is left to finish.
func (h *harness) run(ctx context.Context, c Cell, d time.Duration) (Result, error) {
	owner := fmt.Sprintf("bench-%s-%d-%d-%d", c.Mode, c.Keys, c.Workers, time.Now().UnixNano())
	ids, err := h.seed(ctx, owner, c.Keys)
	if err != nil {
		return Result{}, err
	}
	defer h.db.WithContext(context.WithoutCancel(ctx)).Exec("DELETE FROM accounts WHERE owner = ?", owner)
	incs := make([]op, c.Workers)
	for w := range incs {
		if incs[w], err = h.op(c.Mode); err != nil {
			return Result{}, err
		}
	}

	var ok, failed, attempts atomic.Int64
	lat := make([][]time.Duration, c.Workers)
	errs := make([]error, c.Workers)
	var wg sync.WaitGroup
	cpu0 := processCPU()
	start := time.Now()
	deadline := start.Add(d)
	for w := range c.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), uint64(c.Keys)))
			for time.Now().Before(deadline) && ctx.Err() == nil {
				id := ids[rng.IntN(len(ids))]
				t0 := time.Now()
				n, err := incs[w](ctx, id)
				lat[w] = append(lat[w], time.Since(t0))
				attempts.Add(int64(n))
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, locking.ErrRetriesExhausted):
					failed.Add(1)
				default:
					errs[w] = fmt.Errorf("%s: %w", c.Mode, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := processCPU() - cpu0
	if err := errors.Join(errs...); err != nil {
		return Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	var sum int64
	if err := h.db.WithContext(ctx).Raw("SELECT COALESCE(SUM(balance), 0) FROM accounts WHERE owner = ?", owner).Scan(&sum).Error; err != nil {
		return Result{}, err
	}
	r := Result{Cell: c, Ops: ok.Load(), Errors: failed.Load(), Elapsed: elapsed, Lost: ok.Load() - sum,
		OpsPerSec: float64(ok.Load()) / elapsed.Seconds(), attempts: attempts.Load(), cpu: cpu, lat: slices.Concat(lat...)}
	if r.Lost != 0 {
		return r, fmt.Errorf("%w: %s keys=%d workers=%d: %d successful increments, counters grew by %d", errLost, c.Mode, c.Keys, c.Workers, r.Ops, sum)
	}
	return r, nil
}

// seed creates n accounts at balance 0.
func (h *harness) seed(ctx context.Context, owner string, n int) ([]int64, error) {
	rows := make([]models.Account, n)
	now := time.Now().UTC().Truncate(time.Microsecond)
	for i := range rows {
		rows[i] = models.Account{Owner: owner, Model: models.Model{Versioned: models.Versioned{Version: 1, CreatedAt: now, UpdatedAt: now}}}
	}
	if err := h.db.WithContext(ctx).CreateInBatches(&rows, 500).Error; err != nil {
		return nil, err
	}
	ids := make([]int64, n)
	for i := range rows {
		ids[i] = rows[i].ID
	}
	return ids, nil
}

// op returns the operation of one worker in mode.
func (h *harness) op(mode string) (op, error) {
	inc := func(a *models.Account) error { a.Balance++; return nil }
	// mutate runs Mutate or MutateLocked of one repository.
	mutate := func(call func(context.Context, any, func(*models.Account) error, ...repository.MutateOption) (*models.Account, error)) op {
		return func(ctx context.Context, id int64) (int, error) {
			var n int
			_, err := call(ctx, id, inc, repository.Attempts(&n))
			return n, err
		}
	}
	switch mode {
	case ModeRaw:
		return h.rawOp(), nil
	case ModeGORM:
		return h.gormOp(), nil
	case ModeOptimistic:
		return mutate(h.accounts.Mutate), nil
	case ModeOptimisticMulti:
		own, err := repository.New[models.Account](h.db, repository.WithRetryPolicy(h.policy))
		if err != nil {
			return nil, err
		}
		return mutate(own.Mutate), nil
	case ModePessimistic:
		return mutate(h.accounts.MutateLocked), nil
	case ModeLease:
		return func(ctx context.Context, id int64) (int, error) {
			n := 0
			err := locking.OnError(ctx, h.policy, func(err error) bool {
				return errors.Is(err, locking.ErrLocked) || errors.Is(err, locking.ErrLeaseExpired) || errors.Is(err, locking.ErrStaleData)
			}, func(ctx context.Context) error {
				n++
				a, lease, err := h.leased.GetAndLock(ctx, id, "bench", repository.TTL(5*time.Second))
				if err != nil {
					return err
				}
				a.Balance++
				return h.leased.UpdateWithLease(ctx, a, lease)
			})
			return n, err
		}, nil
	case ModeUnguarded:
		sel, upd := "SELECT balance FROM accounts WHERE id = ?", "UPDATE accounts SET balance = ? WHERE id = ?"
		if h.dialect == "postgres" {
			sel, upd = "SELECT balance FROM accounts WHERE id = $1", "UPDATE accounts SET balance = $1 WHERE id = $2"
		}
		return func(ctx context.Context, id int64) (int, error) {
			var balance int64
			if err := h.sqlDB.QueryRowContext(ctx, sel, id).Scan(&balance); err != nil {
				return 1, err
			}
			_, err := h.sqlDB.ExecContext(ctx, upd, balance+1, id)
			return 1, err
		}, nil
	}
	return nil, fmt.Errorf("unknown mode %q (want one of %v)", mode, AllModes)
}

// rawOp is the read-modify-write loop by hand on database/sql, with the
// same retry policy: the floor gormlock is measured against. It sends the
// statements Mutate sends — a SELECT of every column by key, and the
// guarded UPDATE of every writable column — so the difference between the
// two modes is gormlock's own cost.
func (h *harness) rawOp() op {
	sel := "SELECT id, version, created_at, updated_at, owner, balance, frozen FROM accounts WHERE id = ?"
	upd := "UPDATE accounts SET owner = ?, balance = ?, frozen = ?, version = ?, updated_at = ? WHERE id = ? AND version = ?"
	pg := h.dialect == "postgres"
	if pg {
		// As gormlock: the version from the database's clock, read back.
		sel = "SELECT id, version, created_at, updated_at, owner, balance, frozen FROM accounts WHERE id = $1"
		upd = "UPDATE accounts SET owner = $1, balance = $2, frozen = $3, version = GREATEST($4, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT), updated_at = $5 WHERE id = $6 AND version = $7 RETURNING version"
	}
	return func(ctx context.Context, id int64) (int, error) {
		n := 0
		err := locking.RetryOnConflict(ctx, h.policy, func(ctx context.Context) error {
			n++
			var a models.Account
			if err := h.sqlDB.QueryRowContext(ctx, sel, id).Scan(&a.ID, &a.Version, &a.CreatedAt, &a.UpdatedAt, &a.Owner, &a.Balance, &a.Frozen); err != nil {
				return err
			}
			a.Balance++
			now := time.Now().UTC().Truncate(time.Microsecond)
			if pg {
				var v int64
				err := h.sqlDB.QueryRowContext(ctx, upd, a.Owner, a.Balance, a.Frozen, a.Version+1, now, a.ID, a.Version).Scan(&v)
				if errors.Is(err, sql.ErrNoRows) {
					return locking.ErrStaleData
				}
				return err
			}
			res, err := h.sqlDB.ExecContext(ctx, upd, a.Owner, a.Balance, a.Frozen, max(a.Version+1, now.UnixMicro()), now, a.ID, a.Version)
			if err != nil {
				return err
			}
			if k, err := res.RowsAffected(); err != nil || k != 1 {
				return errors.Join(locking.ErrStaleData, err)
			}
			return nil
		})
		return n, err
	}
}

// gormOp is what users write today: plain GORM, a hand-written version
// condition, RowsAffected checked.
func (h *harness) gormOp() op {
	return func(ctx context.Context, id int64) (int, error) {
		n := 0
		err := locking.RetryOnConflict(ctx, h.policy, func(ctx context.Context) error {
			n++
			var a models.Account
			if err := h.db.WithContext(ctx).First(&a, id).Error; err != nil {
				return err
			}
			res := h.db.WithContext(ctx).Model(&models.Account{}).Where("id = ? AND version = ?", id, a.Version).
				Updates(map[string]any{"balance": a.Balance + 1, "version": a.Version + 1})
			if res.Error != nil {
				return res.Error
			}
			if res.RowsAffected != 1 {
				return locking.ErrStaleData
			}
			return nil
		})
		return n, err
	}
}
