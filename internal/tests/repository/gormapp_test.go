package repository_test

// An existing GORM application's models, as such an application has them:
// gorm.Model (uint key, soft delete), a composite multi-tenant key, hooks,
// has-many associations, created with AutoMigrate. Every test runs on
// SQLite and on PostgreSQL.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/repository"
)

// product is a gorm.Model model with the one line gormlock adds.
type product struct {
	gorm.Model
	models.Versioning
	Name  string `gorm:"not null"`
	Stock int
}

// tenantDoc has a composite primary key (tenant, id).
type tenantDoc struct {
	TenantID string `gorm:"primaryKey"`
	ID       int64  `gorm:"primaryKey;autoIncrement:false"`
	models.Versioning
	Title string
	Views int
}

// note has save, update and delete hooks; its hooks write audit rows.
type note struct {
	ID int64 `gorm:"primaryKey"`
	models.Versioning
	Body string
	Slug string
}

type noteAudit struct {
	ID      int64 `gorm:"primaryKey"`
	NoteID  int64
	Action  string
	Version int64
}

var (
	errForbidden = errors.New("forbidden body")
	errAfter     = errors.New("after-update refused")
	errKeep      = errors.New("this note is kept")
)

func (n *note) BeforeSave(*gorm.DB) error {
	n.Slug = strings.ToLower(strings.ReplaceAll(n.Body, " ", "-"))
	return nil
}

func (n *note) BeforeUpdate(*gorm.DB) error {
	if n.Body == "forbidden" {
		return errForbidden
	}
	return nil
}

func (n *note) AfterUpdate(tx *gorm.DB) error {
	if err := tx.Create(&noteAudit{NoteID: n.ID, Action: "update", Version: n.Version}).Error; err != nil {
		return err
	}
	if n.Body == "fail after" {
		return errAfter
	}
	return nil
}

func (n *note) BeforeDelete(*gorm.DB) error {
	if n.Body == "keep" {
		return errKeep
	}
	return nil
}

func (n *note) AfterDelete(tx *gorm.DB) error {
	return tx.Create(&noteAudit{NoteID: n.ID, Action: "delete", Version: n.Version}).Error
}

// order has many lines.
type order struct {
	ID int64 `gorm:"primaryKey"`
	models.Versioning
	Customer string
	Lines    []orderLine
}

type orderLine struct {
	ID      int64 `gorm:"primaryKey"`
	OrderID int64 `gorm:"not null;index"`
	models.Versioning
	SKU string `gorm:"uniqueIndex"`
	Qty int
}

var errBadLine = errors.New("a line with SKU bad")

func (l *orderLine) BeforeCreate(*gorm.DB) error {
	if l.SKU == "bad" {
		return errBadLine
	}
	return nil
}

// appDB is a fresh database of dialect d with gormlock's tables and the
// application's, made by AutoMigrate.
func appDB(t *testing.T, d string) *gorm.DB {
	t.Helper()
	db := testdb.Open(t, d)
	require.NoError(t, db.AutoMigrate(&product{}, &tenantDoc{}, &note{}, &noteAudit{}, &order{}, &orderLine{}))
	return db
}

func eachApp(t *testing.T, fn func(t *testing.T, db *gorm.DB)) {
	for _, d := range testdb.Dialects {
		t.Run(d, func(t *testing.T) { fn(t, appDB(t, d)) })
	}
}

func mustRepo[T any](t *testing.T, db *gorm.DB, opts ...repository.Option) *repository.Repository[T] {
	t.Helper()
	r, err := repository.New[T](db, opts...)
	require.NoError(t, err)
	return r
}

// rowCount counts rows of model matching where, soft-deleted ones included.
func rowCount(t *testing.T, db *gorm.DB, model any, where string, args ...any) int64 {
	t.Helper()
	var n int64
	require.NoError(t, db.Unscoped().Model(model).Where(where, args...).Count(&n).Error)
	return n
}

func TestGormModelWithSoftDelete(t *testing.T) {
	eachApp(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		products := mustRepo[product](t, db)
		p := &product{Name: "lamp", Stock: 3}
		require.NoError(t, products.Create(ctx, p))
		require.NotZero(t, p.ID)
		require.Positive(t, p.Version)
		stale := *p

		got, err := products.Get(ctx, p.ID) // a uint key
		require.NoError(t, err)
		require.Equal(t, "lamp", got.Name)
		_, err = products.Get(ctx, 1) // an int converts
		require.NoError(t, err)

		require.NoError(t, products.Delete(ctx, got))
		require.True(t, got.DeletedAt.Valid, "Delete records the deletion time in the entity")
		require.Greater(t, got.Version, p.Version, "a soft delete advances the version")

		// Gone for every read, as with GORM; the row remains.
		_, err = products.Get(ctx, p.ID)
		require.ErrorIs(t, err, locking.ErrNotFound)
		require.EqualValues(t, 1, rowCount(t, db, &product{}, "id = ? AND deleted_at IS NOT NULL", p.ID))
		list, err := products.Find(ctx)
		require.NoError(t, err)
		require.Empty(t, list)
		_, err = products.Mutate(ctx, p.ID, func(p *product) error { p.Stock++; return nil })
		require.ErrorIs(t, err, locking.ErrNotFound)
		err = repository.RunInTx(ctx, db, func(ctx context.Context) error {
			_, err := products.LockRow(ctx, p.ID)
			return err
		})
		require.ErrorIs(t, err, locking.ErrNotFound)

		// An old copy cannot write it (nor bring it back).
		stale.Stock = 99
		err = products.Update(ctx, &stale)
		require.ErrorIs(t, err, locking.ErrNotFound)
		require.ErrorContains(t, err, "soft-deleted")
		var raw product
		require.NoError(t, db.Unscoped().First(&raw, p.ID).Error)
		require.Equal(t, 3, raw.Stock)
		require.True(t, raw.DeletedAt.Valid)

		// Its key is taken: a clear error, and Upsert does not retry it.
		err = products.Create(ctx, &product{Model: gorm.Model{ID: p.ID}, Name: "again"})
		require.ErrorIs(t, err, locking.ErrAlreadyExists)
		require.ErrorContains(t, err, "soft-deleted")
		var rep repository.MutateReport
		_, err = products.Upsert(ctx, p.ID, func() *product { return &product{Name: "again"} },
			func(p *product) error { return nil }, repository.Report(&rep))
		require.ErrorIs(t, err, locking.ErrAlreadyExists)
		require.ErrorContains(t, err, "soft-deleted")
		require.Equal(t, 1, rep.Attempts)

		// Seen with IncludeDeleted; restored, guarded.
		dead, err := products.Get(ctx, p.ID, repository.IncludeDeleted())
		require.NoError(t, err)
		require.True(t, dead.DeletedAt.Valid)
		all, err := products.Find(ctx, repository.IncludeDeleted())
		require.NoError(t, err)
		require.Len(t, all, 1)
		old := *dead
		require.NoError(t, products.Restore(ctx, dead))
		require.False(t, dead.DeletedAt.Valid)
		require.Greater(t, dead.Version, old.Version)
		back, err := products.Get(ctx, p.ID)
		require.NoError(t, err)
		require.Equal(t, dead.Version, back.Version)
		err = products.Restore(ctx, &old)
		require.ErrorIs(t, err, locking.ErrStaleData, "a restore from an old copy is stale")
		err = products.Restore(ctx, back)
		require.ErrorIs(t, err, locking.ErrInvalidArgument)
		require.ErrorContains(t, err, "not deleted")

		// Permanently removes the row.
		require.NoError(t, products.Delete(ctx, back, repository.Permanently()))
		require.Zero(t, rowCount(t, db, &product{}, "id = ?", p.ID))
	})
}

// GORM's own Save of an old copy brings a soft-deleted record back: Save's
// UPDATE skips deleted rows, matches none, and falls back to an upsert. The
// negative control of the test above.
func TestGormSaveResurrectsASoftDeletedRecord(t *testing.T) {
	eachApp(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		products := mustRepo[product](t, db)
		p := &product{Name: "lamp", Stock: 3}
		require.NoError(t, products.Create(ctx, p))
		stale := *p
		require.NoError(t, products.Delete(ctx, p))

		stale.Stock = 99
		require.NoError(t, db.Save(&stale).Error)
		back, err := products.Get(ctx, p.ID)
		require.NoError(t, err, "GORM's Save undid the delete")
		require.Equal(t, 99, back.Stock)

		// gormlock refuses the same write.
		require.NoError(t, products.Delete(ctx, back))
		stale.Version = back.Version - 1
		require.Error(t, products.Update(ctx, &stale))
		_, err = products.Get(ctx, p.ID)
		require.ErrorIs(t, err, locking.ErrNotFound)
	})
}

func TestCompositeKeys(t *testing.T) {
	eachApp(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		docs := mustRepo[tenantDoc](t, db)
		odd := "a,b%c" // a tenant whose text needs escaping
		for _, k := range []struct {
			tenant string
			id     int64
		}{{"beta", 1}, {"acme", 2}, {"acme", 1}, {odd, 1}} {
			require.NoError(t, docs.Create(ctx, &tenantDoc{TenantID: k.tenant, ID: k.id, Title: k.tenant}))
		}
		err := docs.Create(ctx, &tenantDoc{TenantID: "acme", ID: 1})
		require.ErrorIs(t, err, locking.ErrAlreadyExists)
		err = docs.Create(ctx, &tenantDoc{TenantID: "acme"})
		require.ErrorIs(t, err, locking.ErrInvalidArgument)
		require.ErrorContains(t, err, "ID is empty")

		d, err := docs.Get(ctx, repository.Key{"acme", 1})
		require.NoError(t, err)
		require.Equal(t, "acme", d.Title)
		id, version, zero := docs.Adapter().Identity(d)
		require.False(t, zero)
		require.Equal(t, repository.Key{"acme", int64(1)}, id)
		require.Equal(t, d.Version, version)

		for _, bad := range []any{1, "acme", repository.Key{"acme"}, repository.Key{"acme", "x"}, repository.Key{"", 1}, repository.Key{"acme", 1, 2}} {
			_, err := docs.Get(ctx, bad)
			require.ErrorIs(t, err, locking.ErrInvalidArgument, "%#v", bad)
		}

		// Text form: the HTTP adapter's ids.
		k, err := docs.Adapter().ParseID("acme,1")
		require.NoError(t, err)
		require.Equal(t, repository.Key{"acme", int64(1)}, k)
		text := repository.Key{odd, int64(1)}.String()
		require.Equal(t, "a%2Cb%25c,1", text)
		k, err = docs.Adapter().ParseID(text)
		require.NoError(t, err)
		got, err := docs.Get(ctx, k)
		require.NoError(t, err)
		require.Equal(t, odd, got.TenantID)
		for _, bad := range []string{"acme", "acme,1,2", "acme,x", "acme,01", "%zz,1"} {
			_, err := docs.Adapter().ParseID(bad)
			require.ErrorIs(t, err, locking.ErrInvalidArgument, bad)
		}

		// Guarded writes address one record of the tenant.
		stale := *d
		d.Title = "acme one"
		require.NoError(t, docs.Update(ctx, d))
		stale.Title = "lost"
		var se *locking.StaleDataError
		require.ErrorAs(t, docs.Update(ctx, &stale), &se)
		require.Equal(t, d.Version, se.Actual)
		other, err := docs.Get(ctx, repository.Key{"acme", 2})
		require.NoError(t, err)
		require.Equal(t, "acme", other.Title, "the other record of the tenant is untouched")
		beta, err := docs.Get(ctx, repository.Key{"beta", 1})
		require.NoError(t, err)
		require.Equal(t, "beta", beta.Title, "the same id of another tenant is untouched")

		// Find and LockRows order by the whole key.
		list, err := docs.Find(ctx)
		require.NoError(t, err)
		var order []string
		for _, x := range list {
			order = append(order, fmt.Sprintf("%s/%d", x.TenantID, x.ID))
		}
		require.Equal(t, []string{odd + "/1", "acme/1", "acme/2", "beta/1"}, order)
		err = repository.RunInTx(ctx, db, func(ctx context.Context) error {
			locked, err := docs.LockRows(ctx, []any{repository.Key{"beta", 1}, repository.Key{"acme", 2}, repository.Key{"acme", 1}, repository.Key{"acme", 2}})
			if err != nil {
				return err
			}
			require.Len(t, locked, 3)
			require.Equal(t, [][2]any{{"acme", int64(1)}, {"acme", int64(2)}, {"beta", int64(1)}},
				[][2]any{{locked[0].TenantID, locked[0].ID}, {locked[1].TenantID, locked[1].ID}, {locked[2].TenantID, locked[2].ID}})
			_, err = docs.LockRows(ctx, []any{repository.Key{"acme", 1}, repository.Key{"acme", 9}})
			require.ErrorIs(t, err, locking.ErrNotFound)
			require.ErrorContains(t, err, "acme")
			return nil
		})
		require.NoError(t, err)

		// Delete, then the key is free again.
		gone, err := docs.Get(ctx, repository.Key{"beta", 1})
		require.NoError(t, err)
		require.NoError(t, docs.Delete(ctx, gone))
		_, err = docs.Get(ctx, repository.Key{"beta", 1})
		require.ErrorIs(t, err, locking.ErrNotFound)
		require.NoError(t, docs.Create(ctx, &tenantDoc{TenantID: "beta", ID: 1, Title: "new"}))
	})
}

// Concurrent read-modify-writes of one record of a composite key lose
// nothing through Mutate; the negative control, GORM's Save of two copies
// read at the same version, loses one.
func TestCompositeKeyMutateLosesNoUpdate(t *testing.T) {
	eachApp(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		docs := mustRepo[tenantDoc](t, db, repository.WithRetryPolicy(locking.RetryPolicy{MaxAttempts: 1000, BaseDelay: 1, MaxDelay: 2}))
		require.NoError(t, docs.Create(ctx, &tenantDoc{TenantID: "acme", ID: 7}))
		key := repository.Key{"acme", 7}
		const workers, each = 6, 10
		var wg sync.WaitGroup
		var mu sync.Mutex
		ok := 0
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				other := mustRepo[tenantDoc](t, db) // no shared turns: real races
				for i := 0; i < each; i++ {
					if _, err := other.Mutate(ctx, key, func(d *tenantDoc) error { d.Views++; return nil }); err == nil {
						mu.Lock()
						ok++
						mu.Unlock()
					} else {
						t.Errorf("mutate: %v", err)
					}
				}
			}()
		}
		wg.Wait()
		got, err := docs.Get(ctx, key)
		require.NoError(t, err)
		require.Equal(t, ok, got.Views)
		require.Equal(t, workers*each, ok)

		// Negative control.
		var a, b tenantDoc
		require.NoError(t, db.First(&a, "tenant_id = ? AND id = ?", "acme", 7).Error)
		require.NoError(t, db.First(&b, "tenant_id = ? AND id = ?", "acme", 7).Error)
		a.Views++
		b.Views++
		require.NoError(t, db.Save(&a).Error)
		require.NoError(t, db.Save(&b).Error)
		require.NoError(t, db.First(&a, "tenant_id = ? AND id = ?", "acme", 7).Error)
		require.Equal(t, ok+1, a.Views, "unguarded: two increments, one kept")
	})
}

func TestCompositeKeyLeases(t *testing.T) {
	eachApp(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		docs := mustRepo[tenantDoc](t, db, repository.WithLeases())
		for _, tenant := range []string{"acme", "beta"} {
			require.NoError(t, docs.Create(ctx, &tenantDoc{TenantID: tenant, ID: 1}))
		}
		d, lease, err := docs.Leases().Acquire(ctx, repository.Key{"acme", 1}, "alice")
		require.NoError(t, err)
		require.Equal(t, repository.Key{"acme", int64(1)}, lease.ID)
		require.Contains(t, lease.Key, "acme")

		_, _, err = docs.Leases().Acquire(ctx, repository.Key{"acme", 1}, "bob")
		require.ErrorIs(t, err, locking.ErrLocked)
		_, other, err := docs.Leases().Acquire(ctx, repository.Key{"beta", 1}, "bob")
		require.NoError(t, err, "the same id of another tenant is another record")
		require.NoError(t, docs.Leases().Release(ctx, other))

		copyOf := *d
		copyOf.Title = "not the holder"
		require.ErrorIs(t, docs.Update(ctx, &copyOf), locking.ErrLocked)
		_, st, err := docs.Leases().Get(ctx, repository.Key{"acme", 1})
		require.NoError(t, err)
		require.Equal(t, "alice", st.Owner)

		d.Title = "holder"
		require.NoError(t, docs.Leases().Update(ctx, d, lease))
		got, err := docs.Get(ctx, repository.Key{"acme", 1})
		require.NoError(t, err)
		require.Equal(t, "holder", got.Title)

		// A lease naming another tenant's record is refused.
		_, lease2, err := docs.Leases().Acquire(ctx, repository.Key{"acme", 1}, "alice")
		require.NoError(t, err)
		lease2.ID = repository.Key{"beta", 1}
		require.Error(t, docs.Leases().Release(ctx, lease2))
	})
}

func TestHooksRunAroundGuardedWrites(t *testing.T) {
	eachApp(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		notes := mustRepo[note](t, db)
		audits := func(action string) []noteAudit {
			var out []noteAudit
			require.NoError(t, db.Where("action = ?", action).Order("id").Find(&out).Error)
			return out
		}
		storedSlug := func(id int64) string {
			var n note
			require.NoError(t, db.First(&n, id).Error)
			return n.Slug
		}

		n := &note{ID: 1, Body: "Hello World"}
		require.NoError(t, notes.Create(ctx, n)) // GORM's create hooks
		require.Equal(t, "hello-world", storedSlug(1))

		// BeforeSave changes a field; the stored row has the change.
		n.Body = "Second Try"
		require.NoError(t, notes.Update(ctx, n))
		require.Equal(t, "second-try", n.Slug)
		require.Equal(t, "second-try", storedSlug(1), "the hook's change is what Update wrote")
		a := audits("update")
		require.Len(t, a, 1, "AfterUpdate ran")
		require.Equal(t, n.Version, a[0].Version, "AfterUpdate sees the new version")

		// A Before hook's error: nothing written, the entity as it was.
		before := *n
		n.Body = "forbidden"
		err := notes.Update(ctx, n)
		require.ErrorIs(t, err, errForbidden)
		var he *repository.HookError
		require.ErrorAs(t, err, &he)
		require.Equal(t, "BeforeUpdate", he.Hook)
		require.Equal(t, "forbidden", n.Body, "the entity is left as the caller had it")
		require.Equal(t, before.Version, n.Version)
		require.Equal(t, "second-try", storedSlug(1))

		// An After hook's error rolls back the write and the hook's own.
		n.Body = "fail after"
		require.ErrorIs(t, notes.Update(ctx, n), errAfter)
		require.Equal(t, before.Version, n.Version)
		got, err := notes.Get(ctx, 1)
		require.NoError(t, err)
		require.Equal(t, before.Version, got.Version, "rolled back")
		require.Equal(t, "Second Try", got.Body)
		require.Len(t, audits("update"), 1, "the audit row the failing hook wrote is rolled back too")

		// Mutate runs Update's hooks.
		got, err = notes.Mutate(ctx, 1, func(n *note) error { n.Body = "Third Time"; return nil })
		require.NoError(t, err)
		require.Equal(t, "third-time", storedSlug(1))
		require.Len(t, audits("update"), 2)

		// Inside the caller's transaction the hooks join it.
		err = repository.RunInTx(ctx, db, func(ctx context.Context) error {
			got.Body = "In Tx"
			if err := notes.Update(ctx, got); err != nil {
				return err
			}
			return errors.New("roll back")
		})
		require.Error(t, err)
		require.Len(t, audits("update"), 2)
		got, err = notes.Get(ctx, 1)
		require.NoError(t, err)

		// Delete hooks.
		require.NoError(t, notes.Create(ctx, &note{ID: 2, Body: "keep"}))
		keep, err := notes.Get(ctx, 2)
		require.NoError(t, err)
		require.ErrorIs(t, notes.Delete(ctx, keep), errKeep)
		_, err = notes.Get(ctx, 2)
		require.NoError(t, err, "BeforeDelete refused: not deleted")
		require.NoError(t, notes.Delete(ctx, got))
		require.Len(t, audits("delete"), 1)
		require.Equal(t, int64(1), audits("delete")[0].NoteID)

		// A session with SkipHooks skips them, as GORM does.
		quiet := mustRepo[note](t, db.Session(&gorm.Session{SkipHooks: true}))
		keep.Body = "Quiet Now"
		require.NoError(t, quiet.Update(ctx, keep))
		require.Equal(t, "keep", storedSlug(2))
	})
}

func TestAssociations(t *testing.T) {
	eachApp(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		orders := mustRepo[order](t, db)
		lines := mustRepo[orderLine](t, db)
		o := &order{ID: 1, Customer: "ann", Lines: []orderLine{{SKU: "a", Qty: 1}, {SKU: "b", Qty: 2}, {SKU: "c", Qty: 3}}}
		require.NoError(t, orders.Create(ctx, o))
		require.EqualValues(t, 3, rowCount(t, db, &orderLine{}, "order_id = ?", 1), "Create writes the children")
		for _, l := range o.Lines {
			require.Positive(t, l.Version, "a child gets a first version, so it can be written guarded")
		}

		// The children are records of their own repository.
		_, err := lines.Mutate(ctx, o.Lines[0].ID, func(l *orderLine) error { l.Qty = 10; return nil })
		require.NoError(t, err)

		plain, err := orders.Get(ctx, 1)
		require.NoError(t, err)
		require.Empty(t, plain.Lines, "not loaded unless asked")
		full, err := orders.Get(ctx, 1, repository.Preload("Lines"))
		require.NoError(t, err)
		require.Len(t, full.Lines, 3)
		require.Equal(t, 10, full.Lines[0].Qty)
		list, err := orders.Find(ctx, repository.Preload("Lines"))
		require.NoError(t, err)
		require.Len(t, list[0].Lines, 3)
		_, err = orders.Get(ctx, 1, repository.Preload("Nope"))
		require.ErrorIs(t, err, locking.ErrInvalidArgument)
		require.ErrorContains(t, err, "Lines")

		// Update never drops children silently.
		full.Customer = "bob"
		full.Lines[1].Qty = 99
		err = orders.Update(ctx, full)
		require.ErrorIs(t, err, locking.ErrInvalidArgument)
		require.ErrorContains(t, err, "field Lines")
		require.ErrorContains(t, err, "SkipAssociations")
		require.Equal(t, plain.Version, full.Version)
		require.NoError(t, orders.Update(ctx, full, repository.SkipAssociations()))
		var qty int
		require.NoError(t, db.Model(&orderLine{}).Where("id = ?", full.Lines[1].ID).Select("qty").Scan(&qty).Error)
		require.Equal(t, 2, qty, "SkipAssociations writes the order's row only")

		// The children are written in the parent's transaction: a failing
		// child leaves no parent.
		bad := &order{ID: 2, Customer: "eve", Lines: []orderLine{{SKU: "x"}, {SKU: "bad"}}}
		require.ErrorIs(t, orders.Create(ctx, bad), errBadLine)
		require.Zero(t, rowCount(t, db, &order{}, "id = ?", 2))
		require.Zero(t, rowCount(t, db, &orderLine{}, "sku = ?", "x"))
	})
}

// With GORM's TranslateError, a duplicate key is gorm.ErrDuplicatedKey
// instead of the driver's error: gormlock still recognises it.
func TestTranslateError(t *testing.T) {
	eachApp(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		db = db.Session(&gorm.Session{})
		db.Config.TranslateError = true
		products := mustRepo[product](t, db)
		p := &product{Name: "lamp"}
		require.NoError(t, products.Create(ctx, p))
		err := products.Create(ctx, &product{Model: gorm.Model{ID: p.ID}, Name: "dup"})
		require.ErrorIs(t, err, locking.ErrAlreadyExists)
		require.ErrorIs(t, err, gorm.ErrDuplicatedKey)

		// Upsert loses a create race and tries again.
		rival := mustRepo[product](t, db)
		attempts := 0
		out, err := products.Upsert(ctx, 500, func() *product {
			if attempts == 0 {
				require.NoError(t, rival.Create(ctx, &product{Model: gorm.Model{ID: 500}, Name: "rival", Stock: 1}))
			}
			return &product{Name: "mine"}
		}, func(p *product) error {
			attempts++
			p.Stock += 10
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, 2, attempts)
		require.Equal(t, "rival", out.Name)
		require.Equal(t, 11, out.Stock)
	})
}

func TestJoinAnApplicationTransaction(t *testing.T) {
	eachApp(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		products := mustRepo[product](t, db)
		p := &product{Name: "lamp", Stock: 1}
		require.NoError(t, products.Create(ctx, p))

		rollback := errors.New("roll back")
		err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			ctx, err := repository.WithTx(ctx, tx)
			if err != nil {
				return err
			}
			p.Stock = 5
			if err := products.Update(ctx, p); err != nil {
				return err
			}
			if err := tx.Create(&product{Name: "side", Stock: 1}).Error; err != nil {
				return err
			}
			got, err := products.Get(ctx, p.ID)
			require.NoError(t, err)
			require.Equal(t, 5, got.Stock, "reads in the transaction see its write")
			return rollback
		})
		require.ErrorIs(t, err, rollback)
		got, err := products.Get(ctx, p.ID)
		require.NoError(t, err)
		require.Equal(t, 1, got.Stock, "the repository's write rolled back with the application's")
		require.Zero(t, rowCount(t, db, &product{}, "name = ?", "side"))

		p, err = products.Get(ctx, p.ID)
		require.NoError(t, err)
		err = db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			ctx, err := repository.WithTx(ctx, tx)
			if err != nil {
				return err
			}
			p.Stock = 7
			return products.Update(ctx, p)
		})
		require.NoError(t, err)
		got, err = products.Get(ctx, p.ID)
		require.NoError(t, err)
		require.Equal(t, 7, got.Stock)

		_, err = repository.WithTx(ctx, db)
		require.ErrorIs(t, err, locking.ErrInvalidArgument)

		// Plain GORM inside RunInTx: repository.Tx.
		err = repository.RunInTx(ctx, db, func(ctx context.Context) error {
			if err := repository.Tx(ctx, db).Create(&product{Name: "in tx"}).Error; err != nil {
				return err
			}
			return rollback
		})
		require.ErrorIs(t, err, rollback)
		require.Zero(t, rowCount(t, db, &product{}, "name = ?", "in tx"))
		err = repository.RunInTx(ctx, db, func(ctx context.Context) error {
			return repository.Tx(ctx, db).Create(&product{Name: "in tx"}).Error
		})
		require.NoError(t, err)
		require.EqualValues(t, 1, rowCount(t, db, &product{}, "name = ?", "in tx"))
	})
}

// A model feature gormlock cannot handle is refused by New, naming
// gormlock's limit and what to do instead.
func TestUnsupportedModelFeaturesNameTheRemedy(t *testing.T) {
	db := appDB(t, "sqlite")
	_, err := repository.New[struct {
		ID      int64 `gorm:"primaryKey"`
		Version int32
	}](db)
	require.ErrorIs(t, err, locking.ErrInvalidArgument)
	require.ErrorContains(t, err, "must be int64")
	_, err = repository.New[otherSoftDelete](db)
	require.ErrorIs(t, err, locking.ErrNotSupported)
	require.ErrorContains(t, err, "use gorm.DeletedAt")
	assert.NotContains(t, err.Error(), "by this database")
	_, err = repository.New[struct {
		ID        int64 `gorm:"primaryKey"`
		Version   int64
		UpdatedAt int64 `gorm:"autoUpdateTime"`
	}](db)
	require.ErrorIs(t, err, locking.ErrNotSupported)
	require.ErrorContains(t, err, "make the field a time.Time")
	_, err = repository.New[struct{ Name string }](db)
	require.ErrorIs(t, err, locking.ErrInvalidArgument)
	require.ErrorContains(t, err, "primaryKey")
	_, err = repository.New[struct {
		gorm.Model
		Name string
	}](db)
	require.ErrorIs(t, err, locking.ErrInvalidArgument)
	require.ErrorContains(t, err, "models.Versioning")
}

// VerifySchema checks an application's AutoMigrate'd tables, composite key
// and soft-delete column included.
func TestVerifySchemaOfAnApplicationsTables(t *testing.T) {
	eachApp(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		require.NoError(t, mustRepo[product](t, db).VerifySchema(ctx))
		require.NoError(t, mustRepo[tenantDoc](t, db).VerifySchema(ctx))
		require.NoError(t, mustRepo[order](t, db).VerifySchema(ctx))
		require.NoError(t, mustRepo[tenantDoc](t, db, repository.WithLeases()).VerifySchema(ctx))

		// A version column AutoMigrate made nullable is refused.
		type loose struct {
			ID      int64 `gorm:"primaryKey"`
			Version int64
		}
		require.NoError(t, db.AutoMigrate(&loose{}))
		err := mustRepo[loose](t, db).VerifySchema(ctx)
		require.ErrorIs(t, err, locking.ErrSchemaMismatch)
		require.ErrorContains(t, err, "nullable")
	})
}
