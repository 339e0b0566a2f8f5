//go:build linux

package pgbouncer_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/internal/tests/pgbouncer"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/migrations"
	"github.com/gormlock/gormlock/repository"
)

// TestFeatures runs every gormlock feature through PgBouncer, in
// transaction and in session mode, with the database opened by
// postgres.Open without naming default_query_exec_mode (so with
// opendb/postgres's default, exec), and with two separate pools sharing
// the pooler, as two processes of an application would. In transaction
// mode the two pools' transactions run on the same server connections.
func TestFeatures(t *testing.T) {
	c := pgbouncer.Start(t, pgbouncer.Options{})
	features := []struct {
		name string
		fn   func(t *testing.T, ctx context.Context, e *env)
	}{
		{"create-update-stale", createUpdateStale},
		{"mutate", mutate},
		{"upsert", upsert},
		{"run-in-tx-savepoints", nestedSavepoints},
		{"lock-row", lockRow},
		{"mutate-row-locked", mutateRowLocked},
		{"update-deadline-on-lock", updateDeadlineOnLock},
		{"claim", claim},
		{"apply-if", applyIf},
		{"leases", leases},
		{"operation-keys", operationKeys},
		{"update-many-force-increment-delete", updateManyForceIncrementDelete},
		{"run-in-tx-cancel", runInTxCancel},
	}
	for _, mode := range pgbouncer.Modes {
		t.Run(string(mode), func(t *testing.T) {
			begin := time.Now()
			e := newEnv(t, c, mode)
			t.Run("migrations", func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				migrate(t, ctx, e)
			})
			if t.Failed() {
				t.FailNow()
			}
			for _, f := range features {
				t.Run(f.name, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					f.fn(t, ctx, e)
				})
			}
			t.Logf("%s mode: %d features in %v", mode, len(features)+1, time.Since(begin).Round(time.Millisecond))
		})
	}
}

// migrate: gormlock's migrations run by both pools at once (they take turns
// on a transaction-level advisory lock, which PgBouncer's transaction mode
// keeps on one server connection), then the example models' migrations, and
// the schema checks from both pools.
func migrate(t *testing.T, ctx context.Context, e *env) {
	errs := make([]error, 2)
	together(2, func(i int) { errs[i] = migrations.Up(ctx, []*gormDB{e.a, e.b}[i]) })
	require.NoError(t, errs[0], "migrations.Up, pool a")
	require.NoError(t, errs[1], "migrations.Up, pool b")
	require.NoError(t, fixtures.Migrate(ctx, e.a))
	require.NoError(t, fixtures.Migrate(ctx, e.b), "a second process finds everything applied")
	va, err := migrations.Version(ctx, e.a)
	require.NoError(t, err)
	vb, err := migrations.Version(ctx, e.b)
	require.NoError(t, err)
	require.Equal(t, va, vb)
	require.GreaterOrEqual(t, va, int64(2), "the lease and operation tables")
	for _, db := range []*gormDB{e.a, e.b} {
		require.NoError(t, accounts(t, db).VerifySchema(ctx))
		docs, err := repository.New[fixtures.Document](db, repository.WithLeases())
		require.NoError(t, err)
		require.NoError(t, docs.VerifySchema(ctx), "documents and the lease table")
		jobs, err := repository.New[fixtures.Job](db)
		require.NoError(t, err)
		require.NoError(t, jobs.VerifySchema(ctx))
		require.NoError(t, repository.VerifyOperationSchema(ctx, db))
	}
}

// createUpdateStale: a write from pool a makes pool b's copy stale.
func createUpdateStale(t *testing.T, ctx context.Context, e *env) {
	ra, rb := accounts(t, e.a), accounts(t, e.b)
	acc := &fixtures.Account{Owner: "ann", Balance: 10}
	require.NoError(t, ra.Create(ctx, acc))
	require.Positive(t, acc.Version)
	stale, err := rb.Get(ctx, acc.ID)
	require.NoError(t, err)
	require.Equal(t, acc.Version, stale.Version)

	v := acc.Version
	acc.Balance = 20
	require.NoError(t, ra.Update(ctx, acc))
	require.Greater(t, acc.Version, v)

	stale.Balance = 30
	err = rb.Update(ctx, stale)
	require.ErrorIs(t, err, locking.ErrStaleData)
	var sde *locking.StaleDataError
	require.ErrorAs(t, err, &sde)
	require.NotErrorIs(t, err, locking.ErrCommitUnknown)
	t.Logf("stale update: %v", err)

	got, err := rb.Get(ctx, acc.ID)
	require.NoError(t, err)
	require.Equal(t, int64(20), got.Balance, "the stale write was not applied")
	require.Equal(t, acc.Version, got.Version)
}

// mutate: 8 callers, 4 per pool, each incrementing one account 5 times
// with Mutate: every increment applied once.
func mutate(t *testing.T, ctx context.Context, e *env) {
	repos := [2]*repository.Repository[fixtures.Account]{accounts(t, e.a), accounts(t, e.b)}
	acc := &fixtures.Account{Owner: "hot"}
	require.NoError(t, repos[0].Create(ctx, acc))
	const callers, calls = 8, 5
	var acked atomic.Int64
	var mu sync.Mutex
	var errs []error
	together(callers, func(i int) {
		for range calls {
			if _, err := repos[i%2].Mutate(ctx, acc.ID, increment); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				continue
			}
			acked.Add(1)
		}
	})
	require.Empty(t, errs)
	got, err := repos[1].Get(ctx, acc.ID)
	require.NoError(t, err)
	require.Equal(t, acked.Load(), got.Balance)
	require.Equal(t, int64(callers*calls), got.Balance)
}

// upsert: a new record created through pool a, then the existing one
// updated through pool b.
func upsert(t *testing.T, ctx context.Context, e *env) {
	ra, err := repository.New[fixtures.Document](e.a)
	require.NoError(t, err)
	rb, err := repository.New[fixtures.Document](e.b)
	require.NoError(t, err)
	id := "upsert-" + string(e.mode)
	created := 0
	create := func() *fixtures.Document { created++; return &fixtures.Document{Title: "first"} }
	d, err := ra.Upsert(ctx, id, create, func(d *fixtures.Document) error {
		d.Attrs = fixtures.Attributes{"by": "a"}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 1, created)
	require.Equal(t, id, d.ID)
	require.Positive(t, d.Version)
	v := d.Version

	d, err = rb.Upsert(ctx, id, create, func(d *fixtures.Document) error {
		d.Title = "second"
		d.Attrs["by"] = "b"
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 1, created, "the existing record is updated, not created")
	require.Greater(t, d.Version, v)

	got, err := ra.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, "second", got.Title)
	require.Equal(t, fixtures.Attributes{"by": "b"}, got.Attrs)
	require.Equal(t, d.Version, got.Version)
}

var errRollback = errors.New("roll this savepoint back")

// nestedSavepoints: a transaction with savepoints three levels deep, the
// middle one rolled back (taking the innermost with it) while the outer one
// goes on and commits.
func nestedSavepoints(t *testing.T, ctx context.Context, e *env) {
	ra := accounts(t, e.a)
	var ids [5]int64
	for i := range ids {
		a := &fixtures.Account{Owner: fmt.Sprintf("sp%d", i)}
		require.NoError(t, ra.Create(ctx, a))
		ids[i] = a.ID
	}
	inc := func(ctx context.Context, i int) error {
		_, err := ra.Mutate(ctx, ids[i], increment)
		return err
	}
	err := repository.RunInTx(ctx, e.a, func(ctx context.Context) error {
		if err := inc(ctx, 0); err != nil { // the transaction
			return err
		}
		return repository.RunInTx(ctx, e.a, func(ctx context.Context) error { // savepoint 1
			if err := inc(ctx, 1); err != nil {
				return err
			}
			err := repository.RunInTx(ctx, e.a, func(ctx context.Context) error { // savepoint 2, rolled back
				if err := inc(ctx, 2); err != nil {
					return err
				}
				if err := repository.RunInTx(ctx, e.a, func(ctx context.Context) error { // savepoint 3
					return inc(ctx, 3)
				}); err != nil {
					return err
				}
				return errRollback
			})
			if !errors.Is(err, errRollback) {
				return fmt.Errorf("savepoint 2: want errRollback, got %w", err)
			}
			// The transaction is still usable after the rollback to the
			// savepoint.
			return inc(ctx, 4)
		})
	})
	require.NoError(t, err)
	rb := accounts(t, e.b)
	var balances []int64
	for _, id := range ids {
		a, err := rb.Get(ctx, id)
		require.NoError(t, err)
		balances = append(balances, a.Balance)
	}
	require.Equal(t, []int64{1, 1, 0, 0, 1}, balances, "savepoint 2 and the savepoint 3 inside it rolled back; the rest committed")
}

// showLockTimeout reads lock_timeout in a transaction on db, along with
// the server backend it ran on.
func showLockTimeout(ctx context.Context, db *gormDB) (setting string, pid int, err error) {
	err = repository.RunInTx(ctx, db, func(ctx context.Context) error {
		tx := repository.Tx(ctx, db)
		if err := tx.Raw("SHOW lock_timeout").Row().Scan(&setting); err != nil {
			return err
		}
		// Spread the transactions over the pooler's server connections.
		return tx.Raw("SELECT pg_backend_pid() FROM pg_sleep(0.02)").Row().Scan(&pid)
	})
	return setting, pid, err
}

// lockRow: NoWait and LockTimeout while a transaction of the other pool
// holds the row; the lock_timeout gormlock sets is transaction-local and
// reaches no other transaction on the pooler's shared server connections.
func lockRow(t *testing.T, ctx context.Context, e *env) {
	rb := accounts(t, e.b)
	acc := &fixtures.Account{Owner: "locked"}
	free := &fixtures.Account{Owner: "free"}
	require.NoError(t, rb.Create(ctx, acc))
	require.NoError(t, rb.Create(ctx, free))
	h := holdLock(t, ctx, e.a, acc.ID)

	err := repository.RunInTx(ctx, e.b, func(ctx context.Context) error {
		_, err := rb.LockRow(ctx, acc.ID, repository.NoWait())
		return err
	})
	require.ErrorIs(t, err, locking.ErrLocked)
	t.Logf("NoWait: %v (SQLSTATE %s)", err, locking.Code(err))

	begin := time.Now()
	err = repository.RunInTx(ctx, e.b, func(ctx context.Context) error {
		_, err := rb.LockRow(ctx, acc.ID, repository.LockTimeout(300*time.Millisecond))
		return err
	})
	require.ErrorIs(t, err, locking.ErrLockTimeout)
	t.Logf("LockTimeout(300ms) after %v: %v", time.Since(begin).Round(time.Millisecond), err)

	// A LockRow with LockTimeout that gets its lock restores lock_timeout
	// in its own transaction.
	err = repository.RunInTx(ctx, e.b, func(ctx context.Context) error {
		if _, err := rb.LockRow(ctx, free.ID, repository.LockTimeout(300*time.Millisecond)); err != nil {
			return err
		}
		var s string
		if err := repository.Tx(ctx, e.b).Raw("SHOW lock_timeout").Row().Scan(&s); err != nil {
			return err
		}
		if s != "0" {
			return fmt.Errorf("lock_timeout in the same transaction after LockRow: %q", s)
		}
		return nil
	})
	require.NoError(t, err)
	h.end(t)

	// Nothing leaked: transactions on the other pool (and on this one),
	// spread over the server connections, all read 0.
	var mu sync.Mutex
	settings := map[string]int{}
	backends := map[int]bool{}
	var errs []error
	together(2*poolSize, func(i int) {
		s, pid, err := showLockTimeout(ctx, []*gormDB{e.a, e.b}[i%2])
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs = append(errs, err)
			return
		}
		settings[s]++
		backends[pid] = true
	})
	require.Empty(t, errs)
	t.Logf("lock_timeout seen by %d transactions of both pools on %d server backends: %v", 2*poolSize, len(backends), settings)
	require.Equal(t, map[string]int{"0": 2 * poolSize}, settings, "gormlock's lock_timeout leaked to another transaction")
}

// mutateRowLocked: concurrent callers of both pools queue on the row lock
// and every increment applies once; NoWait and LockTimeout refuse while
// the other pool holds the row, and write nothing.
func mutateRowLocked(t *testing.T, ctx context.Context, e *env) {
	repos := [2]*repository.Repository[fixtures.Account]{accounts(t, e.a), accounts(t, e.b)}
	acc := &fixtures.Account{Owner: "queue"}
	require.NoError(t, repos[0].Create(ctx, acc))
	const callers, calls = 8, 5
	var mu sync.Mutex
	var errs []error
	together(callers, func(i int) {
		for range calls {
			if _, err := repos[i%2].MutateRowLocked(ctx, acc.ID, increment); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}
	})
	require.Empty(t, errs)

	h := holdLock(t, ctx, e.a, acc.ID)
	_, err := repos[1].MutateRowLocked(ctx, acc.ID, increment, repository.NoWait())
	require.ErrorIs(t, err, locking.ErrLocked)
	require.NotErrorIs(t, err, locking.ErrCommitUnknown)
	begin := time.Now()
	_, err = repos[1].MutateRowLocked(ctx, acc.ID, increment, repository.LockTimeout(250*time.Millisecond))
	require.ErrorIs(t, err, locking.ErrLockTimeout)
	require.NotErrorIs(t, err, locking.ErrCommitUnknown)
	t.Logf("MutateRowLocked LockTimeout(250ms) after %v: %v", time.Since(begin).Round(time.Millisecond), err)
	h.end(t)

	got, err := repos[1].Get(ctx, acc.ID)
	require.NoError(t, err)
	require.Equal(t, int64(callers*calls), got.Balance, "every increment once; the refused ones not at all")
}

// updateDeadlineOnLock: an Update outside a transaction, whose context
// ends while it waits for a row lock the other pool holds, fails
// definitely — ErrLockTimeout and context.DeadlineExceeded — and is not
// applied once the lock is released.
func updateDeadlineOnLock(t *testing.T, ctx context.Context, e *env) {
	rb := accounts(t, e.b)
	acc := &fixtures.Account{Owner: "deadline", Balance: 1}
	require.NoError(t, rb.Create(ctx, acc))
	h := holdLock(t, ctx, e.a, acc.ID)

	// Short, with room for a busy machine: gormlock bounds the lock wait
	// on the server a fifth of the time left before the deadline.
	const deadline = 2 * time.Second
	dctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	write := *acc
	write.Balance = 99
	begin := time.Now()
	err := rb.Update(dctx, &write)
	t.Logf("Update with a %v deadline, blocked on the row lock, after %v: %v", deadline, time.Since(begin).Round(time.Millisecond), err)
	require.Error(t, err)
	require.NotErrorIs(t, err, locking.ErrCommitUnknown, "the lock wait is bounded on the server before the deadline")
	require.ErrorIs(t, err, locking.ErrLockTimeout)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	h.end(t)

	got, err := rb.Get(ctx, acc.ID)
	require.NoError(t, err)
	require.Equal(t, int64(1), got.Balance, "not applied")
	require.Equal(t, acc.Version, got.Version)
}

// claim: 4 workers, 2 per pool, claim jobs with SKIP LOCKED and mark them
// done in the same transaction: each of 40 jobs done exactly once.
func claim(t *testing.T, ctx context.Context, e *env) {
	queue := "q-" + string(e.mode)
	ja, err := repository.New[fixtures.Job](e.a)
	require.NoError(t, err)
	jb, err := repository.New[fixtures.Job](e.b)
	require.NoError(t, err)
	const jobs, workers = 40, 4
	for i := range jobs {
		require.NoError(t, ja.Create(ctx, &fixtures.Job{Queue: queue, Payload: fmt.Sprint(i), Status: fixtures.JobPending}))
	}
	done := make([]int, workers)
	errs := make([]error, workers)
	together(workers, func(w int) {
		db, repo := e.a, ja
		if w%2 == 1 {
			db, repo = e.b, jb
		}
		name := fmt.Sprintf("worker-%d", w)
		for {
			var n int
			err := repository.RunInTx(ctx, db, func(ctx context.Context) error {
				claimed, err := repo.Claim(ctx, 3,
					repository.Where("queue = ? AND status = ?", queue, fixtures.JobPending), repository.OrderBy("id", false))
				if err != nil {
					return err
				}
				n = len(claimed)
				for i := range claimed {
					j := &claimed[i]
					j.Status, j.DoneBy = fixtures.JobDone, name
					j.Runs++
					if err := repo.Update(ctx, j); err != nil {
						return err
					}
				}
				// Hold the claimed rows a moment, so the others skip them.
				return sleepCtx(ctx, 5*time.Millisecond)
			})
			if err != nil {
				errs[w] = err
				return
			}
			if n == 0 {
				return // the rest are done, or claimed by others who finish them
			}
			done[w] += n
		}
	})
	require.NoError(t, errors.Join(errs...))
	all, err := jb.Find(ctx, repository.Where("queue = ?", queue))
	require.NoError(t, err)
	require.Len(t, all, jobs)
	byWorker := map[string]int{}
	for _, j := range all {
		require.Equal(t, fixtures.JobDone, j.Status, "job %d", j.ID)
		require.Equal(t, int64(1), j.Runs, "job %d ran once", j.ID)
		byWorker[j.DoneBy]++
	}
	total := 0
	for w, n := range done {
		require.Equal(t, n, byWorker[fmt.Sprintf("worker-%d", w)])
		total += n
	}
	require.Equal(t, jobs, total)
	t.Logf("jobs per worker: %v", done)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// applyIf: 8 concurrent conditional decrements from both pools; exactly as
// many apply as the condition allows, the others fail with
// ErrConditionFailed and write nothing.
func applyIf(t *testing.T, ctx context.Context, e *env) {
	repos := [2]*repository.Repository[fixtures.Account]{accounts(t, e.a), accounts(t, e.b)}
	acc := &fixtures.Account{Owner: "stock", Balance: 10}
	require.NoError(t, repos[0].Create(ctx, acc))
	results := make([]error, 8)
	together(len(results), func(i int) {
		_, results[i] = repos[i%2].Apply(ctx, acc.ID, []repository.Change{repository.Add("Balance", -3)},
			repository.If("balance >= ?", 3))
	})
	var ok, refused int
	for _, err := range results {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, locking.ErrConditionFailed):
			refused++
		default:
			t.Errorf("Apply: %v", err)
		}
	}
	require.Equal(t, 3, ok)
	require.Equal(t, 5, refused)
	got, err := repos[1].Get(ctx, acc.ID)
	require.NoError(t, err)
	require.Equal(t, int64(1), got.Balance)
}

// leases: Acquire through pool a; a second Acquire and an unleased write
// through pool b refused; Renew; a lease Update; Acquire and Release
// through pool b; a lease that expired and was taken over refused to its old
// holder. Fences grow with every acquisition.
func leases(t *testing.T, ctx context.Context, e *env) {
	ra, err := repository.New[fixtures.Document](e.a, repository.WithLeases())
	require.NoError(t, err)
	rb, err := repository.New[fixtures.Document](e.b, repository.WithLeases())
	require.NoError(t, err)
	doc := &fixtures.Document{ID: "lease-" + string(e.mode), Title: "start"}
	require.NoError(t, ra.Create(ctx, doc))

	doc, l1, err := ra.Leases().Acquire(ctx, doc.ID, "owner-a", repository.TTL(10*time.Second))
	require.NoError(t, err)
	_, _, err = rb.Leases().Acquire(ctx, doc.ID, "owner-b")
	require.ErrorIs(t, err, locking.ErrLeased)
	require.ErrorIs(t, err, locking.ErrLocked)
	var le *locking.LeaseError
	require.ErrorAs(t, err, &le)
	other, err := rb.Get(ctx, doc.ID)
	require.NoError(t, err)
	other.Title = "unleased"
	require.ErrorIs(t, rb.Update(ctx, other), locking.ErrLeased, "a write without the lease is refused")

	expires := l1.ExpiresAt
	require.NoError(t, ra.Leases().Renew(ctx, l1, repository.TTL(20*time.Second)))
	require.True(t, l1.ExpiresAt.After(expires), "Renew moves the expiry")
	doc.Title = "by lease"
	v := doc.Version
	require.NoError(t, ra.Leases().Update(ctx, doc, l1))
	require.Greater(t, doc.Version, v)

	_, l2, err := rb.Leases().Acquire(ctx, doc.ID, "owner-b")
	require.NoError(t, err, "the lease Update ended the lease")
	require.NoError(t, rb.Leases().Release(ctx, l2))

	_, l3, err := ra.Leases().Acquire(ctx, doc.ID, "owner-a", repository.TTL(200*time.Millisecond))
	require.NoError(t, err)
	var l4 *repository.Lease
	for l4 == nil { // until l3 has expired by the database's clock
		_, l4, err = rb.Leases().Acquire(ctx, doc.ID, "owner-b", repository.TTL(10*time.Second))
		if err != nil {
			require.ErrorIs(t, err, locking.ErrLeased)
			require.NoError(t, sleepCtx(ctx, 50*time.Millisecond))
		}
	}
	doc.Title = "by the expired holder"
	err = ra.Leases().Update(ctx, doc, l3)
	require.Error(t, err, "an expired holder may not write")
	require.True(t, errors.Is(err, locking.ErrLeased) || errors.Is(err, locking.ErrLeaseExpired), "%v", err)
	t.Logf("expired holder, taken over: %v", err)
	require.NoError(t, rb.Leases().Release(ctx, l4))
	err = ra.Leases().Update(ctx, doc, l3)
	require.ErrorIs(t, err, locking.ErrLeaseExpired, "an expired holder may not write after the release either")
	require.Error(t, ra.Leases().Renew(ctx, l3), "Renew never revives an expired lease")

	got, err := rb.Get(ctx, doc.ID)
	require.NoError(t, err)
	require.Equal(t, "by lease", got.Title)
	fences := []int64{l1.Fence, l2.Fence, l3.Fence, l4.Fence}
	require.True(t, slices.IsSorted(fences) && len(slices.Compact(slices.Clone(fences))) == 4, "fences grow: %v", fences)
	t.Logf("fences %v", fences)
}

// operationKeys: the same operation key used from both pools applies
// once; LookupOperation finds it; a key reused for another record is
// refused.
func operationKeys(t *testing.T, ctx context.Context, e *env) {
	ra, rb := accounts(t, e.a), accounts(t, e.b)
	acc := &fixtures.Account{Owner: "keyed"}
	acc2 := &fixtures.Account{Owner: "keyed-2"}
	require.NoError(t, ra.Create(ctx, acc))
	require.NoError(t, ra.Create(ctx, acc2))
	key := "op-" + string(e.mode) + "-" + fmt.Sprint(time.Now().UnixNano())

	got, err := ra.Mutate(ctx, acc.ID, increment, repository.OpKey(key))
	require.NoError(t, err)
	require.Equal(t, int64(1), got.Balance)
	got, err = rb.Mutate(ctx, acc.ID, increment, repository.OpKey(key))
	require.NoError(t, err, "a repeat of an applied keyed write returns nil")
	require.Equal(t, int64(1), got.Balance, "and applies nothing")

	op, err := repository.LookupOperation(ctx, e.b, key)
	require.NoError(t, err)
	require.NotNil(t, op)
	require.Equal(t, fmt.Sprint(acc.ID), op.RecordKey)
	require.Equal(t, "accounts", op.Table)
	require.Equal(t, got.Version, op.Version)
	none, err := repository.LookupOperation(ctx, e.a, key+"-never-used")
	require.NoError(t, err)
	require.Nil(t, none)

	_, err = rb.Mutate(ctx, acc2.ID, increment, repository.OpKey(key))
	require.ErrorIs(t, err, locking.ErrOperationKeyReused)
	t.Logf("reuse: %v", err)
	a2, err := ra.Get(ctx, acc2.ID)
	require.NoError(t, err)
	require.Zero(t, a2.Balance)
	a1, err := ra.Get(ctx, acc.ID)
	require.NoError(t, err)
	require.Equal(t, int64(1), a1.Balance)
}

// updateManyForceIncrementDelete: a batch through pool a makes pool b's
// copies stale; b's batch, ForceIncrement and Delete are refused and write
// nothing; a's ForceIncrement and Delete apply.
func updateManyForceIncrementDelete(t *testing.T, ctx context.Context, e *env) {
	ra, rb := accounts(t, e.a), accounts(t, e.b)
	var mine, theirs []*fixtures.Account
	for i := range 3 {
		a := &fixtures.Account{Owner: fmt.Sprintf("batch%d", i)}
		require.NoError(t, ra.Create(ctx, a))
		mine = append(mine, a)
		c, err := rb.Get(ctx, a.ID)
		require.NoError(t, err)
		theirs = append(theirs, c)
	}
	for _, a := range mine {
		a.Balance = 100
	}
	require.NoError(t, ra.UpdateMany(ctx, mine))
	for _, a := range theirs {
		a.Balance = 7
	}
	err := rb.UpdateMany(ctx, theirs)
	require.ErrorIs(t, err, locking.ErrStaleData)
	var be *locking.BatchError
	require.ErrorAs(t, err, &be)
	require.Len(t, be.IDs(), 3)

	v := mine[0].Version
	mine[0].Balance = 555 // not written by ForceIncrement
	require.NoError(t, ra.ForceIncrement(ctx, mine[0]))
	require.Greater(t, mine[0].Version, v)
	require.ErrorIs(t, rb.ForceIncrement(ctx, theirs[0]), locking.ErrStaleData)

	require.ErrorIs(t, rb.Delete(ctx, theirs[1]), locking.ErrStaleData)
	require.NoError(t, ra.Delete(ctx, mine[1]))
	_, err = rb.Get(ctx, mine[1].ID)
	require.ErrorIs(t, err, locking.ErrNotFound)

	for i, want := range map[int]int64{0: 100, 2: 100} {
		got, err := rb.Get(ctx, mine[i].ID)
		require.NoError(t, err)
		require.Equal(t, want, got.Balance, "account %d", i)
		require.Equal(t, mine[i].Version, got.Version)
	}
}
