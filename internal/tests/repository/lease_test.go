package repository_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gormlock/gormlock/internal/tests/fixtures"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/repository"
)

func leasedDocs(t *testing.T, db *gorm.DB, withLeases repository.Option, opts ...repository.Option) *repository.Repository[fixtures.Document] {
	t.Helper()
	docs, err := repository.New[fixtures.Document](db, append([]repository.Option{withLeases}, opts...)...)
	require.NoError(t, err)
	return docs
}

func newDoc(t *testing.T, docs *repository.Repository[fixtures.Document], id string) *fixtures.Document {
	t.Helper()
	d := &fixtures.Document{ID: id, Title: "draft"}
	require.NoError(t, docs.Create(context.Background(), d))
	return d
}

// requireLeaseErr checks err is a *locking.LeaseError of the given kind.
func requireLeaseErr(t *testing.T, err error, kind error) *locking.LeaseError {
	t.Helper()
	require.ErrorIs(t, err, kind)
	var le *locking.LeaseError
	require.ErrorAs(t, err, &le)
	require.Equal(t, kind, le.Kind, "a lease error's Kind is ErrLeased or ErrLeaseExpired")
	if kind == locking.ErrLeased {
		require.ErrorIs(t, err, locking.ErrLocked, "a lease held by someone else is also ErrLocked")
	} else {
		require.NotErrorIs(t, err, locking.ErrLocked, "an expired lease is not a lock")
	}
	return le
}

// assertFence checks the fence of lease l, granted after one whose fence
// was prev (0 for the record's first): prev + 1 where grants are durable
// (SQLite, MariaDB); on PostgreSQL, whose grants outside a transaction may
// be lost in a crash, the database clock in microseconds when it was
// granted (the clock is read once, for AcquiredAt too), so that a lost
// grant's fence is never handed out again.
func assertFence(t *testing.T, db *gorm.DB, l *repository.Lease, prev int64) {
	t.Helper()
	if db.Dialector.Name() != "postgres" {
		assert.Equal(t, prev+1, l.Fence, "every acquisition raises the fence by one")
		return
	}
	assert.Greater(t, l.Fence, prev, "every acquisition raises the fence")
	assert.Equal(t, l.AcquiredAt.UnixMilli(), l.Fence/1000, "the fence is the grant's clock reading in microseconds")
}

// Every row of the seed's table of what each operation does while a record
// is locked.
func TestLeaseBehaviourWhileLocked(t *testing.T) {
	eachLeaseLayout(t, func(t *testing.T, db *gorm.DB, withLeases repository.Option) {
		docs := leasedDocs(t, db, withLeases)
		ctx := context.Background()
		newDoc(t, docs, "doc-1")

		doc, lease, err := docs.Leases().Acquire(ctx, "doc-1", "alice")
		require.NoError(t, err)
		assert.Equal(t, "draft", doc.Title)
		assert.Len(t, lease.Token, 32)
		assertFence(t, db, lease, 0)
		created := doc.Version
		assert.Equal(t, created, lease.Version)
		assert.Equal(t, repository.DefaultLeaseTTL, lease.ExpiresAt.Sub(lease.AcquiredAt))
		assert.WithinDuration(t, time.Now(), lease.AcquiredAt, 5*time.Second, "database clock")

		t.Run("get-and-lock: ErrLeased", func(t *testing.T) {
			_, _, err := docs.Leases().Acquire(ctx, "doc-1", "bob")
			le := requireLeaseErr(t, err, locking.ErrLeased)
			assert.Equal(t, "alice", le.Holder)
			assert.Equal(t, lease.Fence, le.Fence)
			assert.Equal(t, lease.ExpiresAt, le.Until)
			assert.NotContains(t, err.Error(), lease.Token)
		})
		t.Run("get: succeeds and shows the lease", func(t *testing.T) {
			got, err := docs.Get(ctx, "doc-1")
			require.NoError(t, err)
			assert.Equal(t, "draft", got.Title)
			got, st, err := docs.Leases().Get(ctx, "doc-1")
			require.NoError(t, err)
			assert.Equal(t, created, got.Version)
			require.NotNil(t, st)
			assert.Equal(t, repository.LeaseState{Owner: "alice", Fence: lease.Fence, AcquiredAt: lease.AcquiredAt, ExpiresAt: lease.ExpiresAt}, *st)
		})
		t.Run("unlock with a wrong or missing token: ErrLeased", func(t *testing.T) {
			for _, token := range []string{"", "00000000000000000000000000000000", lease.Token + "x"} {
				forged := *lease
				forged.Token = token
				requireLeaseErr(t, docs.Leases().Release(ctx, &forged), locking.ErrLeased)
			}
			_, st, err := docs.Leases().Get(ctx, "doc-1")
			require.NoError(t, err)
			require.NotNil(t, st, "still leased")
		})
		t.Run("update/delete without the token, even at the right version: ErrLeased", func(t *testing.T) {
			d, err := docs.Get(ctx, "doc-1")
			require.NoError(t, err)
			d.Title = "bob's"
			le := requireLeaseErr(t, docs.Update(ctx, d), locking.ErrLeased)
			assert.Equal(t, "alice", le.Holder)
			assert.Equal(t, created, d.Version)
			requireLeaseErr(t, docs.Delete(ctx, d), locking.ErrLeased)
			requireLeaseErr(t, docs.ForceIncrement(ctx, d), locking.ErrLeased)
			_, err = docs.Mutate(ctx, "doc-1", func(d *fixtures.Document) error { d.Title = "bob's"; return nil })
			requireLeaseErr(t, err, locking.ErrLeased)
			_, err = docs.MutateRowLocked(ctx, "doc-1", func(d *fixtures.Document) error { d.Title = "bob's"; return nil })
			requireLeaseErr(t, err, locking.ErrLeased)
			err = docs.UpdateMany(ctx, []*fixtures.Document{d})
			requireLeaseErr(t, err, locking.ErrLeased)
			got, err := docs.Get(ctx, "doc-1")
			require.NoError(t, err)
			assert.Equal(t, "draft", got.Title)
			assert.Equal(t, created, got.Version)
		})
		t.Run("update with the token: applied and unlocked", func(t *testing.T) {
			doc.Title = "alice's"
			require.NoError(t, docs.Leases().Update(ctx, doc, lease))
			assert.Greater(t, doc.Version, created)
			got, st, err := docs.Leases().Get(ctx, "doc-1")
			require.NoError(t, err)
			assert.Nil(t, st)
			assert.Equal(t, "alice's", got.Title)
			requireLeaseErr(t, docs.Leases().Update(ctx, doc, lease), locking.ErrLeaseExpired)
		})
		t.Run("unlock with the token: unlocked, can be locked again", func(t *testing.T) {
			_, l2, err := docs.Leases().Acquire(ctx, "doc-1", "bob")
			require.NoError(t, err)
			assertFence(t, db, l2, lease.Fence)
			assert.Equal(t, doc.Version, l2.Version)
			assert.NotEqual(t, lease.Token, l2.Token)
			require.NoError(t, docs.Leases().Release(ctx, l2))
			requireLeaseErr(t, docs.Leases().Release(ctx, l2), locking.ErrLeaseExpired)
			_, l3, err := docs.Leases().Acquire(ctx, "doc-1", "carol")
			require.NoError(t, err)
			assertFence(t, db, l3, l2.Fence)
			require.NoError(t, docs.Leases().Release(ctx, l3))
			// Free again: plain writes pass.
			_, err = docs.Mutate(ctx, "doc-1", func(d *fixtures.Document) error { d.Title = "anyone's"; return nil })
			require.NoError(t, err)
		})
		t.Run("delete with the token: applied and unlocked", func(t *testing.T) {
			d, l4, err := docs.Leases().Acquire(ctx, "doc-1", "dave")
			require.NoError(t, err)
			require.NoError(t, docs.Leases().Delete(ctx, d, l4))
			_, err = docs.Get(ctx, "doc-1")
			require.ErrorIs(t, err, locking.ErrNotFound)
			_, _, err = docs.Leases().Acquire(ctx, "doc-1", "dave")
			require.ErrorIs(t, err, locking.ErrNotFound, "no lease is taken on a missing record")
		})
	})
}

// The database keeps only the token's hash.
func TestLeaseTokenIsStoredHashed(t *testing.T) {
	eachLeaseLayout(t, func(t *testing.T, db *gorm.DB, withLeases repository.Option) {
		docs := leasedDocs(t, db, withLeases)
		newDoc(t, docs, "doc-1")
		_, lease, err := docs.Leases().Acquire(context.Background(), "doc-1", "alice")
		require.NoError(t, err)
		var stored string
		q := "SELECT token_hash FROM gormlock_leases WHERE resource = 'documents' AND record_key = 'doc-1'"
		if leasesInRow(db) {
			q = "SELECT gormlock_lease_token FROM documents WHERE id = 'doc-1'"
		}
		require.NoError(t, db.Raw(q).Scan(&stored).Error)
		sum := sha256.Sum256([]byte(lease.Token))
		assert.Equal(t, hex.EncodeToString(sum[:]), stored)
	})
}

// A write with the lease is one transaction: when the version guard refuses
// it, the lease is still held.
func TestWriteWithLeaseKeepsLeaseWhenStale(t *testing.T) {
	eachLeaseLayout(t, func(t *testing.T, db *gorm.DB, withLeases repository.Option) {
		docs := leasedDocs(t, db, withLeases)
		ctx := context.Background()
		newDoc(t, docs, "doc-1")
		doc, lease, err := docs.Leases().Acquire(ctx, "doc-1", "alice")
		require.NoError(t, err)
		stale := *doc
		stale.Version = 7
		require.ErrorIs(t, docs.Leases().Update(ctx, &stale, lease), locking.ErrStaleData)
		_, st, err := docs.Leases().Get(ctx, "doc-1")
		require.NoError(t, err)
		require.NotNil(t, st, "the failed write left the lease in place")

		other := newDoc(t, docs, "doc-2")
		require.ErrorIs(t, docs.Leases().Update(ctx, other, lease), locking.ErrInvalidArgument)
		require.ErrorIs(t, docs.Leases().Update(ctx, doc, nil), locking.ErrInvalidArgument)
		require.NoError(t, docs.Leases().Update(ctx, doc, lease))
	})
}

func TestLeaseRenew(t *testing.T) {
	eachLeaseLayout(t, func(t *testing.T, db *gorm.DB, withLeases repository.Option) {
		docs := leasedDocs(t, db, withLeases)
		ctx := context.Background()
		newDoc(t, docs, "doc-1")
		_, lease, err := docs.Leases().Acquire(ctx, "doc-1", "alice", repository.TTL(time.Second))
		require.NoError(t, err)
		first := lease.ExpiresAt
		require.NoError(t, docs.Leases().Renew(ctx, lease, repository.TTL(20*time.Second)))
		assert.True(t, lease.ExpiresAt.After(first.Add(18*time.Second)), "renewed to 20 s from now: %v -> %v", first, lease.ExpiresAt)
		_, st, err := docs.Leases().Get(ctx, "doc-1")
		require.NoError(t, err)
		assert.Equal(t, lease.ExpiresAt, st.ExpiresAt)
		require.ErrorIs(t, docs.Leases().Renew(ctx, lease, repository.TTL(31*time.Second)), locking.ErrInvalidArgument)

		// An expired lease is not revived.
		_, short, err := docs.Leases().Acquire(ctx, newDoc(t, docs, "doc-2").ID, "alice", repository.TTL(time.Millisecond))
		require.NoError(t, err)
		waitUnleased(t, docs, "doc-2")
		requireLeaseErr(t, docs.Leases().Renew(ctx, short), locking.ErrLeaseExpired)
	})
}

// waitUnleased polls until the database's clock says id's lease expired.
func waitUnleased(t *testing.T, docs *repository.Repository[fixtures.Document], id string) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, st, err := docs.Leases().Get(context.Background(), id)
		require.NoError(t, err)
		return st == nil
	}, 10*time.Second, 2*time.Millisecond)
}

func TestLeaseTTLLimits(t *testing.T) {
	for _, layout := range leaseLayouts {
		t.Run(layout, func(t *testing.T) { leaseTTLLimits(t, layout) })
	}
}

func leaseTTLLimits(t *testing.T, layout string) {
	db := testdb.Open(t, "sqlite")
	withLeases := leaseLayout(t, db, layout)
	ctx := context.Background()
	docs := leasedDocs(t, db, withLeases)
	newDoc(t, docs, "doc-1")
	for _, d := range []time.Duration{0, -time.Second, repository.MaxLeaseTTL + time.Millisecond} {
		_, _, err := docs.Leases().Acquire(ctx, "doc-1", "alice", repository.TTL(d))
		require.ErrorIs(t, err, locking.ErrInvalidArgument, d)
	}
	_, l, err := docs.Leases().Acquire(ctx, "doc-1", "alice", repository.TTL(repository.MaxLeaseTTL))
	require.NoError(t, err)
	require.NoError(t, docs.Leases().Release(ctx, l))
	_, _, err = docs.Leases().Acquire(ctx, "doc-1", "")
	require.ErrorIs(t, err, locking.ErrInvalidArgument, "empty owner")

	short, err := repository.New[fixtures.Document](db, withLeases, repository.WithLeaseTTL(2*time.Second, 5*time.Second))
	require.NoError(t, err)
	_, _, err = short.Leases().Acquire(ctx, "doc-1", "alice", repository.TTL(6*time.Second))
	require.ErrorIs(t, err, locking.ErrInvalidArgument)
	_, l, err = short.Leases().Acquire(ctx, "doc-1", "alice")
	require.NoError(t, err)
	assert.Equal(t, 2*time.Second, l.ExpiresAt.Sub(l.AcquiredAt))
	require.NoError(t, short.Leases().Release(ctx, l))

	for _, bad := range [][2]time.Duration{{0, time.Second}, {2 * time.Second, time.Second}, {time.Second, 0}} {
		_, err := repository.New[fixtures.Document](db, repository.WithLeaseTTL(bad[0], bad[1]))
		require.ErrorIs(t, err, locking.ErrInvalidArgument, bad)
	}
	plain, err := repository.New[fixtures.Document](db)
	require.NoError(t, err)
	_, _, err = plain.Leases().Acquire(ctx, "doc-1", "alice")
	require.ErrorIs(t, err, locking.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "without WithLeases")
}

// A holder that never unlocks is superseded after its TTL, by the database's
// clock; its late writes are refused, and the fence tells the holders apart.
func TestExpiredLeaseIsSuperseded(t *testing.T) {
	eachLeaseLayout(t, func(t *testing.T, db *gorm.DB, withLeases repository.Option) {
		docs := leasedDocs(t, db, withLeases)
		ctx := context.Background()
		newDoc(t, docs, "doc-1")
		old, oldLease, err := docs.Leases().Acquire(ctx, "doc-1", "sleepy", repository.TTL(20*time.Millisecond))
		require.NoError(t, err)
		waitUnleased(t, docs, "doc-1")

		d, newLease, err := docs.Leases().Acquire(ctx, "doc-1", "fresh")
		require.NoError(t, err)
		assertFence(t, db, newLease, oldLease.Fence)

		old.Title = "late"
		le := requireLeaseErr(t, docs.Leases().Update(ctx, old, oldLease), locking.ErrLeased)
		assert.Equal(t, "fresh", le.Holder)
		requireLeaseErr(t, docs.Leases().Release(ctx, oldLease), locking.ErrLeased)

		d.Title = "fresh"
		require.NoError(t, docs.Leases().Update(ctx, d, newLease))
		requireLeaseErr(t, docs.Leases().Update(ctx, old, oldLease), locking.ErrLeaseExpired)
		requireLeaseErr(t, docs.Leases().Delete(ctx, old, oldLease), locking.ErrLeaseExpired)
		got, err := docs.Get(ctx, "doc-1")
		require.NoError(t, err)
		assert.Equal(t, "fresh", got.Title)

		// An expired lease blocks nothing: plain writes go through.
		_, l, err := docs.Leases().Acquire(ctx, "doc-1", "sleepy", repository.TTL(time.Millisecond))
		require.NoError(t, err)
		waitUnleased(t, docs, "doc-1")
		_, err = docs.Mutate(ctx, "doc-1", func(d *fixtures.Document) error { d.Title = "after"; return nil })
		require.NoError(t, err)
		assertFence(t, db, l, newLease.Fence)
	})
}

// ReleaseOwnerLeases frees exactly one owner's leases.
func TestReleaseOwner(t *testing.T) {
	eachLeaseLayout(t, func(t *testing.T, db *gorm.DB, withLeases repository.Option) {
		docs := leasedDocs(t, db, withLeases)
		ctx := context.Background()
		owners := []string{"alice", "bob", "carol"}
		held := map[string]int64{}
		for i := range 100 {
			id := fmt.Sprintf("doc-%03d", i)
			newDoc(t, docs, id)
			owner := owners[i%3]
			_, _, err := docs.Leases().Acquire(ctx, id, owner)
			require.NoError(t, err)
			held[owner]++
		}
		n, err := repository.ReleaseOwnerLeases(ctx, db, "dave")
		require.NoError(t, err)
		assert.Zero(t, n, "a wrong owner releases nothing")

		n, err = repository.ReleaseOwnerLeases(ctx, db, "bob")
		require.NoError(t, err)
		assert.Equal(t, held["bob"], n)
		for i := range 100 {
			id := fmt.Sprintf("doc-%03d", i)
			_, st, err := docs.Leases().Get(ctx, id)
			require.NoError(t, err)
			if owners[i%3] == "bob" {
				assert.Nil(t, st, id)
			} else {
				require.NotNil(t, st, id)
				assert.Equal(t, owners[i%3], st.Owner)
			}
		}
		n, err = repository.ReleaseOwnerLeases(ctx, db, "bob")
		require.NoError(t, err)
		assert.Zero(t, n, "released once")
		_, err = repository.ReleaseOwnerLeases(ctx, db, "")
		require.ErrorIs(t, err, locking.ErrInvalidArgument)

		if leasesInRow(db) {
			// A lease in the record's row goes with the record: nothing
			// to sweep.
			swept, err := docs.Leases().Sweep(ctx)
			require.NoError(t, err)
			assert.Zero(t, swept)
			return
		}
		// Sweep drops the rows of deleted records whose lease is over:
		// bob's (released) go, alice's (still held) stay even when her
		// records are gone, and the rows of live records stay for their
		// fences.
		require.NoError(t, db.Exec("DELETE FROM documents WHERE id IN (SELECT record_key FROM gormlock_leases WHERE owner IN ('alice', 'bob'))").Error)
		swept, err := docs.Leases().Sweep(ctx)
		require.NoError(t, err)
		assert.Equal(t, held["bob"], swept)
		var rows int64
		require.NoError(t, db.Raw("SELECT count(*) FROM gormlock_leases").Scan(&rows).Error)
		assert.Equal(t, held["alice"]+held["carol"], rows)
	})
}

// Sweep keeps the lease rows of live records, so fences never restart.
func TestSweepKeepsFences(t *testing.T) {
	eachLeaseLayout(t, func(t *testing.T, db *gorm.DB, withLeases repository.Option) {
		docs := leasedDocs(t, db, withLeases)
		ctx := context.Background()
		newDoc(t, docs, "doc-1")
		prev := int64(0)
		for range 3 {
			_, l, err := docs.Leases().Acquire(ctx, "doc-1", "alice")
			require.NoError(t, err)
			assertFence(t, db, l, prev)
			prev = l.Fence
			require.NoError(t, docs.Leases().Release(ctx, l))
			n, err := docs.Leases().Sweep(ctx)
			require.NoError(t, err)
			assert.Zero(t, n)
		}
	})
}

// A TTL under a millisecond is rounded up, never turned into an expired
// lease.
func TestShortTTLIsRoundedUp(t *testing.T) {
	eachLeaseLayout(t, func(t *testing.T, db *gorm.DB, withLeases repository.Option) {
		docs := leasedDocs(t, db, withLeases)
		newDoc(t, docs, "doc-1")
		_, l, err := docs.Leases().Acquire(context.Background(), "doc-1", "alice", repository.TTL(900*time.Microsecond))
		require.NoError(t, err)
		assert.Equal(t, time.Millisecond, l.ExpiresAt.Sub(l.AcquiredAt))
	})
}

// uuidDoc keeps a string key in a uuid column: the database accepts several
// spellings of one key.
type uuidDoc struct {
	ID    string `gorm:"type:uuid;primaryKey"`
	Title string
	models.Versioned
}

// Two spellings of one key are one lease: the lease row is keyed by the
// database's own text of the key.
func TestLeaseKeyIsTheDatabasesKey(t *testing.T) {
	db := testdb.Open(t, "postgres")
	require.NoError(t, db.AutoMigrate(&uuidDoc{}))
	docs, err := repository.New[uuidDoc](db, repository.WithLeases())
	require.NoError(t, err)
	ctx := context.Background()
	const lower = "6f1c1d7e-2a55-4c39-9d0e-3f6a2f4b8c11"
	upper := strings.ToUpper(lower)
	require.NoError(t, docs.Create(ctx, &uuidDoc{ID: lower, Title: "t"}))

	d, lease, err := docs.Leases().Acquire(ctx, upper, "alice")
	require.NoError(t, err)
	assert.Equal(t, lower, lease.Key)
	_, _, err = docs.Leases().Acquire(ctx, lower, "bob")
	requireLeaseErr(t, err, locking.ErrLeased)
	_, st, err := docs.Leases().Get(ctx, upper)
	require.NoError(t, err)
	require.NotNil(t, st)
	assert.Equal(t, "alice", st.Owner)
	other, err := docs.Get(ctx, lower)
	require.NoError(t, err)
	other.Title = "bob"
	requireLeaseErr(t, docs.Update(ctx, other), locking.ErrLeased)
	d.Title = "alice"
	require.NoError(t, docs.Leases().Update(ctx, d, lease))
}

// A write already holding the record's row when the lease is granted
// commits first, and the lease records the version after it.
func TestGetAndLockWaitsForWriteInProgress(t *testing.T) {
	for _, layout := range leaseLayouts {
		t.Run(layout, func(t *testing.T) {
			db := testdb.Open(t, "postgres")
			withLeases := leaseLayout(t, db, layout)
			docs := leasedDocs(t, db, withLeases)
			ctx := context.Background()
			newDoc(t, docs, "doc-1")
			written := make(chan struct{})
			release := make(chan struct{})
			var releaseOnce sync.Once
			letGo := func() { releaseOnce.Do(func() { close(release) }) }
			t.Cleanup(letGo) // a failed assertion must not leave the writer's transaction open
			writer := make(chan error, 1)
			var wrote int64
			go func() {
				writer <- repository.RunInTx(ctx, db, func(ctx context.Context) error {
					d, err := docs.Get(ctx, "doc-1")
					if err != nil {
						return err
					}
					d.Title = "bob"
					if err := docs.Update(ctx, d); err != nil {
						return err
					}
					wrote = d.Version
					close(written)
					<-release
					return nil
				})
			}()
			<-written
			type result struct {
				d   *fixtures.Document
				l   *repository.Lease
				err error
			}
			got := make(chan result, 1)
			go func() {
				d, l, err := docs.Leases().Acquire(ctx, "doc-1", "alice")
				got <- result{d, l, err}
			}()
			// The grant's statement is longer than pg_stat_activity keeps of a
			// query (1 KB by default): match its beginning.
			grant := "WITH g AS (INSERT INTO gormlock_leases%"
			if layout == "row" {
				grant = `UPDATE "documents" SET "gormlock_lease_owner"%`
			}
			require.Eventually(t, func() bool {
				var n int64
				require.NoError(t, db.Raw("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE ?", grant).Scan(&n).Error)
				return n > 0
			}, 10*time.Second, 5*time.Millisecond, "Leases.Acquire waits for the write holding the row")
			select {
			case r := <-got:
				t.Fatalf("Acquire returned while the write was in progress: %v", r.err)
			default:
			}
			letGo()
			require.NoError(t, <-writer)
			r := <-got
			require.NoError(t, r.err)
			assert.Equal(t, wrote, r.l.Version, "the version the write in progress committed")
			assert.Equal(t, "bob", r.d.Title)
			r.d.Title = "alice"
			require.NoError(t, docs.Leases().Update(ctx, r.d, r.l))
		})
	}
}

// In a REPEATABLE READ transaction the lease check could miss a lease taken
// after its snapshot: lease-guarded writes refuse to run there.
func TestLeaseGuardedWriteRefusesRepeatableRead(t *testing.T) {
	for _, layout := range leaseLayouts {
		t.Run(layout, func(t *testing.T) {
			db := testdb.Open(t, "postgres")
			withLeases := leaseLayout(t, db, layout)
			docs := leasedDocs(t, db, withLeases)
			ctx := context.Background()
			newDoc(t, docs, "doc-1")
			err := repository.RunInTx(ctx, db, func(ctx context.Context) error {
				d, err := docs.Get(ctx, "doc-1")
				require.NoError(t, err)
				_, _, err = docs.Leases().Acquire(context.Background(), "doc-1", "alice") // outside, after the snapshot
				require.NoError(t, err)
				d.Title = "bob"
				err = docs.Update(ctx, d)
				require.ErrorIs(t, err, locking.ErrNotSupported)
				require.ErrorIs(t, docs.Delete(ctx, d), locking.ErrNotSupported)
				return nil
			}, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
			require.NoError(t, err)
			got, err := docs.Get(ctx, "doc-1")
			require.NoError(t, err)
			assert.Equal(t, "draft", got.Title)
		})
	}
}
