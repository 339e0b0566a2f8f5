package repository_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/gormlock/gormlock/internal/tests/fixtures"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

const (
	leaseWorkers  = 16
	leaseRecords  = 4
	leaseTTL      = 60 * time.Millisecond
	leaseRunFor   = 1500 * time.Millisecond
	leasePauseOne = 5 // one holder in leasePauseOne pauses past its TTL
)

// leaseRun is what one contention run observed.
type leaseRun struct {
	acquired, busy     int
	accepted           map[int64][]acceptedWrite // per record
	paused, lateDenied int
	lateAccepted       int
	slowDenied         int // non-paused holders that were slower than their TTL
}

type acceptedWrite struct {
	fence int64
	value int64 // the counter value the write set
}

// contend runs leaseWorkers goroutines competing for leases on leaseRecords
// accounts for leaseRunFor; each holder increments the balance it read and
// writes with write, and one in leasePauseOne first pauses for twice the TTL.
func contend(t *testing.T, db *gorm.DB, accounts *repository.Repository[fixtures.Account],
	write func(ctx context.Context, a *fixtures.Account, l *repository.Lease) error) ([]int64, *leaseRun) {
	t.Helper()
	ctx := context.Background()
	ids := make([]int64, leaseRecords)
	for i := range ids {
		ids[i] = newAccount(t, accounts, "lease", 0).ID
	}
	run := &leaseRun{accepted: map[int64][]acceptedWrite{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, leaseWorkers)
	deadline := time.Now().Add(leaseRunFor)
	for w := range leaseWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			owner := "worker-" + string(rune('a'+w))
			for time.Now().Before(deadline) {
				id := ids[rng.IntN(len(ids))]
				a, lease, err := accounts.Leases().Acquire(ctx, id, owner, repository.TTL(leaseTTL))
				if errors.Is(err, locking.ErrLocked) {
					mu.Lock()
					run.busy++
					mu.Unlock()
					time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
					continue
				}
				if err != nil {
					errs[w] = err
					return
				}
				pause := rng.IntN(leasePauseOne) == 0
				if pause {
					time.Sleep(2 * leaseTTL) // a GC pause, a slow disk: past the lease
				}
				a.Balance++
				err = write(ctx, a, lease)
				refused := errors.Is(err, locking.ErrLocked) || errors.Is(err, locking.ErrLeaseExpired)
				if err != nil && !refused {
					errs[w] = err
					return
				}
				mu.Lock()
				run.acquired++
				switch {
				case pause && refused:
					run.paused++
					run.lateDenied++
				case pause:
					run.paused++
					run.lateAccepted++
					run.accepted[id] = append(run.accepted[id], acceptedWrite{lease.Fence, a.Balance})
				case refused:
					run.slowDenied++
				default:
					run.accepted[id] = append(run.accepted[id], acceptedWrite{lease.Fence, a.Balance})
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	return ids, run
}

// Exclusion under contention: 16 goroutines, 4 records, 60 ms leases, some
// holders pausing past their lease before writing. Every late write is
// refused, no update is lost, and the accepted writes of each record come
// from successive holders in fence order.
func TestLeaseExclusionUnderContention(t *testing.T) {
	eachLeaseLayout(t, func(t *testing.T, db *gorm.DB, withLeases repository.Option) {
		accounts, err := repository.New[fixtures.Account](db, withLeases)
		require.NoError(t, err)
		ids, run := contend(t, db, accounts, func(ctx context.Context, a *fixtures.Account, l *repository.Lease) error {
			return accounts.Leases().Update(ctx, a, l)
		})
		require.Positive(t, run.paused, "some holders paused")
		assert.Zero(t, run.lateAccepted, "a holder that paused past its lease wrote")
		assert.Equal(t, run.paused, run.lateDenied)
		var total, kept int64
		for _, id := range ids {
			writes := run.accepted[id]
			total += int64(len(writes))
			balance, version, _ := rawAccount(t, db, id)
			kept += balance
			require.EqualValues(t, len(writes), balance, "record %d: lost updates", id)
			require.Positive(t, version)
			sort.Slice(writes, func(i, j int) bool { return writes[i].value < writes[j].value })
			for i, w := range writes {
				require.EqualValues(t, i+1, w.value, "record %d: each accepted write built on the previous one", id)
				if i > 0 {
					require.Greater(t, w.fence, writes[i-1].fence, "record %d: accepted writes in fence order", id)
				}
			}
		}
		t.Logf("%s: %d acquisitions, %d refused busy, %d accepted writes, %d paused holders, %d late writes refused, %d lost",
			db.Dialector.Name(), run.acquired, run.busy, total, run.paused, run.lateDenied, total-kept)
	})
}

// Negative control: the same workload writing without fencing (no lease
// check, no version) loses updates: paused holders write back stale values.
func TestLeaseWithoutFencingLosesUpdates(t *testing.T) {
	eachLeaseLayout(t, func(t *testing.T, db *gorm.DB, withLeases repository.Option) {
		accounts, err := repository.New[fixtures.Account](db, withLeases)
		require.NoError(t, err)
		ids, run := contend(t, db, accounts, func(ctx context.Context, a *fixtures.Account, _ *repository.Lease) error {
			return db.WithContext(ctx).Exec("UPDATE accounts SET balance = ? WHERE id = ?", a.Balance, a.ID).Error
		})
		var writes, kept int64
		for _, id := range ids {
			writes += int64(len(run.accepted[id]))
			balance, _, _ := rawAccount(t, db, id)
			kept += balance
		}
		require.Less(t, kept, writes, "writes without fencing must lose updates")
		t.Logf("%s: without fencing %d writes accepted, %d kept, %d lost (%d from paused holders)",
			db.Dialector.Name(), writes, kept, writes-kept, run.lateAccepted)
	})
}
