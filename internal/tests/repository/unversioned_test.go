package repository_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/migrations"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/repository"
)

// shopProduct is a shop's product: a form edits the name and price, orders
// decrement the stock, which is outside the version.
type shopProduct struct {
	models.Model
	Name  string `gorm:"column:name;not null"`
	Price int64  `gorm:"column:price;not null"`
	Stock int64  `gorm:"column:stock;not null" gormlock:"unversioned"`
}

// plainShopProduct is shopProduct without the tag, on its own table: every stock
// change advances the version.
type plainShopProduct struct {
	models.Model
	Name  string `gorm:"column:name;not null"`
	Price int64  `gorm:"column:price;not null"`
	Stock int64  `gorm:"column:stock;not null"`
}

func productRepo(t *testing.T, db *gorm.DB) *repository.Repository[shopProduct] {
	t.Helper()
	require.NoError(t, db.AutoMigrate(&shopProduct{}))
	products, err := repository.New[shopProduct](db)
	require.NoError(t, err)
	return products
}

func newProduct(t *testing.T, products *repository.Repository[shopProduct], stock int64) *shopProduct {
	t.Helper()
	p := &shopProduct{Name: "lamp", Price: 1000, Stock: stock}
	require.NoError(t, products.Create(context.Background(), p))
	return p
}

// rawProduct reads the row with plain SQL.
func rawProduct(t *testing.T, db *gorm.DB, id int64) (name string, price, stock, version int64) {
	t.Helper()
	var row struct {
		Name                  string
		Price, Stock, Version int64
	}
	require.NoError(t, db.Raw("SELECT name, price, stock, version FROM shop_products WHERE id = ?", id).Scan(&row).Error)
	return row.Name, row.Price, row.Stock, row.Version
}

// Apply of the unversioned field alone leaves the version and the update
// time; one that changes a versioned field advances them.
func TestUnversionedApply(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		products := productRepo(t, db)
		p := newProduct(t, products, 100)

		got, err := products.Apply(ctx, p.ID, []repository.Change{repository.Add("Stock", -10)})
		require.NoError(t, err)
		assert.EqualValues(t, 90, got.Stock)
		assert.Equal(t, p.Version, got.Version, "a stock change alone does not advance the version")
		assert.True(t, p.UpdatedAt.Equal(got.UpdatedAt), "nor the update time")
		_, _, stock, version := rawProduct(t, db, p.ID)
		assert.EqualValues(t, 90, stock)
		assert.Equal(t, p.Version, version)

		got, err = products.Apply(ctx, p.ID, []repository.Change{repository.Add("Stock", -10)}, repository.If("stock >= ?", 10))
		require.NoError(t, err)
		assert.Equal(t, p.Version, got.Version)
		_, err = products.Apply(ctx, p.ID, []repository.Change{repository.Add("Stock", -100)}, repository.If("stock >= ?", 100))
		require.ErrorIs(t, err, locking.ErrConditionFailed)

		got, err = products.Apply(ctx, p.ID, []repository.Change{repository.Add("Stock", -1), repository.Add("Price", 5)})
		require.NoError(t, err)
		assert.Greater(t, got.Version, p.Version, "a price change advances the version")
		assert.EqualValues(t, 79, got.Stock)
		assert.EqualValues(t, 1005, got.Price)
	})
}

// The Done-when scenario: a form read before an Apply(Add("Stock", -10))
// saves its name without conflict and leaves stock at 90; the entity then
// holds the row's stock. Without the tag the same save is stale (negative
// control).
func TestUnversionedFormBeforeApply(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		products := productRepo(t, db)
		p := newProduct(t, products, 100)
		form := *p
		_, err := products.Apply(ctx, p.ID, []repository.Change{repository.Add("Stock", -10)})
		require.NoError(t, err)
		form.Name = "desk lamp"
		require.NoError(t, products.Update(ctx, &form))
		assert.EqualValues(t, 90, form.Stock, "after the write the entity holds the row's stock")
		name, price, stock, version := rawProduct(t, db, p.ID)
		assert.Equal(t, "desk lamp", name)
		assert.EqualValues(t, 1000, price)
		assert.EqualValues(t, 90, stock, "the form's stale stock (100) was not written back")
		assert.Equal(t, form.Version, version)

		// Negative control: the model without the tag.
		require.NoError(t, db.AutoMigrate(&plainShopProduct{}))
		plain, err := repository.New[plainShopProduct](db)
		require.NoError(t, err)
		q := &plainShopProduct{Name: "lamp", Price: 1000, Stock: 100}
		require.NoError(t, plain.Create(ctx, q))
		form2 := *q
		_, err = plain.Apply(ctx, q.ID, []repository.Change{repository.Add("Stock", -10)})
		require.NoError(t, err)
		form2.Name = "desk lamp"
		require.ErrorIs(t, plain.Update(ctx, &form2), locking.ErrStaleData)
	})
}

// Two editors of versioned fields from one read: the second is stale, and
// its error carries the record as it is now and the fields that differ.
func TestUnversionedEditorsStillConflict(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		products := productRepo(t, db)
		p := newProduct(t, products, 100)
		alice, bob := *p, *p
		alice.Name = "desk lamp"
		require.NoError(t, products.Update(ctx, &alice))
		_, err := products.Apply(ctx, p.ID, []repository.Change{repository.Add("Stock", -3)})
		require.NoError(t, err)
		bob.Price = 900
		err = products.Update(ctx, &bob)
		require.ErrorIs(t, err, locking.ErrStaleData)
		require.NotErrorIs(t, err, locking.ErrVersionMissing)
		assert.Equal(t, p.Version, bob.Version, "on error the entity is left as it was")

		var stale *locking.StaleDataError
		require.ErrorAs(t, err, &stale)
		assert.Equal(t, locking.StaleDataError{Table: "shop_products", ID: p.ID, Expected: p.Version, Actual: alice.Version, Op: "update"}, *stale)
		var se *repository.StaleError[shopProduct]
		require.ErrorAs(t, err, &se)
		assert.Equal(t, []string{"Name", "Price"}, se.Fields, "bob's entity differs from the record in the name alice wrote and the price bob wrote")
		require.NotNil(t, se.Current)
		assert.Contains(t, err.Error(), "differing fields: Name, Price")
		now, err := products.Get(ctx, p.ID)
		require.NoError(t, err)
		assert.Equal(t, now.ID, se.Current.ID)
		assert.Equal(t, alice.Version, se.Current.Version)
		assert.Equal(t, "desk lamp", se.Current.Name)
		assert.EqualValues(t, 1000, se.Current.Price)
		assert.EqualValues(t, 97, se.Current.Stock)
		assert.True(t, now.UpdatedAt.Equal(se.Current.UpdatedAt))

		// The resolve pattern: apply bob's change to the current record.
		resolved := *se.Current
		resolved.Price = bob.Price
		require.NoError(t, products.Update(ctx, &resolved))
		name, price, stock, _ := rawProduct(t, db, p.ID)
		assert.Equal(t, "desk lamp", name)
		assert.EqualValues(t, 900, price)
		assert.EqualValues(t, 97, stock)
	})
}

// An entity without a version (0) written against a record at a real
// version is refused with an error that says the version is missing.
func TestVersionMissing(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		products := productRepo(t, db)
		p := newProduct(t, products, 100)
		form := shopProduct{Model: models.Model{ID: p.ID}, Name: "desk lamp", Price: 900}
		err := products.Update(ctx, &form)
		require.ErrorIs(t, err, locking.ErrVersionMissing)
		require.ErrorIs(t, err, locking.ErrStaleData)
		assert.Contains(t, err.Error(), "version missing")
		name, _, _, version := rawProduct(t, db, p.ID)
		assert.Equal(t, "lamp", name, "nothing written")
		assert.Equal(t, p.Version, version)
		// A real version that is stale is not "missing".
		old := *p
		require.NoError(t, products.Update(ctx, p))
		err = products.Update(ctx, &old)
		require.ErrorIs(t, err, locking.ErrStaleData)
		require.NotErrorIs(t, err, locking.ErrVersionMissing)
	})
}

// Columns naming the unversioned field is refused; Columns and UpdateMany
// never write it and refresh it; Create writes it.
func TestUnversionedColumnsAndBatches(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		products := productRepo(t, db)
		p := newProduct(t, products, 100)
		_, _, stock, _ := rawProduct(t, db, p.ID)
		require.EqualValues(t, 100, stock, "Create writes it")

		form := *p
		form.Stock = 5
		err := products.Update(ctx, &form, repository.Columns("Name", "Stock"))
		require.ErrorIs(t, err, locking.ErrInvalidArgument)
		assert.Contains(t, err.Error(), "Stock")

		_, err = products.Apply(ctx, p.ID, []repository.Change{repository.Add("Stock", -1)})
		require.NoError(t, err)
		form.Name, form.Stock = "desk lamp", 5
		require.NoError(t, products.Update(ctx, &form, repository.Columns("Name")))
		assert.EqualValues(t, 99, form.Stock)

		q := newProduct(t, products, 50)
		a, b := form, *q
		a.Price, b.Price, a.Stock, b.Stock = 1, 2, 0, 0
		_, err = products.Apply(ctx, q.ID, []repository.Change{repository.Add("Stock", -5)})
		require.NoError(t, err)
		require.NoError(t, products.UpdateMany(ctx, []*shopProduct{&a, &b}))
		assert.EqualValues(t, 99, a.Stock)
		assert.EqualValues(t, 45, b.Stock)
		_, price, stock, _ := rawProduct(t, db, q.ID)
		assert.EqualValues(t, 2, price)
		assert.EqualValues(t, 45, stock)

		// Upsert's update half does not write it either.
		up, err := products.Upsert(ctx, q.ID, nil, func(p *shopProduct) error { p.Name = "chair"; return nil })
		require.NoError(t, err)
		assert.EqualValues(t, 45, up.Stock)
	})
}

// The tag is refused where it cannot mean "outside the version".
func TestUnversionedTagRefused(t *testing.T) {
	db := testdb.SQLite(t)
	type onKey struct {
		ID int64 `gorm:"primaryKey" gormlock:"unversioned"`
		models.Versioned
	}
	type onVersion struct {
		ID      int64 `gorm:"primaryKey"`
		Version int64 `gormlock:"unversioned"`
	}
	type onUpdatedAt struct {
		models.Model
		Seen int64
	}
	type onTime struct {
		ID        int64 `gorm:"primaryKey"`
		Version   int64
		UpdatedAt time.Time `gormlock:"unversioned"`
	}
	type readOnly struct {
		models.Model
		Hits int64 `gorm:"->" gormlock:"unversioned"`
	}
	for name, new := range map[string]func() error{
		"ID":        func() error { _, err := repository.New[onKey](db); return err },
		"Version":   func() error { _, err := repository.New[onVersion](db); return err },
		"UpdatedAt": func() error { _, err := repository.New[onTime](db); return err },
		"Hits":      func() error { _, err := repository.New[readOnly](db); return err },
	} {
		err := new()
		require.ErrorIs(t, err, locking.ErrInvalidArgument, name)
		assert.Contains(t, err.Error(), "."+name+" is tagged", name)
	}
	_, err := repository.New[onUpdatedAt](db)
	require.NoError(t, err)
}

// 4 Mutate writers decrementing the unversioned field beside 4 Apply
// writers: the final stock is the initial one minus every acknowledged
// decrement. Mutate guards its change by the value it read; a blind
// read-modify-write of the same field loses decrements (negative control).
func TestUnversionedMutateBesideApply(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		products := productRepo(t, db)
		const initial, rounds = 100000, 25
		p := newProduct(t, products, initial)

		run := func(mutate func() error) (acked int64) {
			start := make(chan struct{})
			var g errgroup.Group
			var n atomic.Int64
			for w := range 8 {
				g.Go(func() error {
					<-start
					for range rounds {
						var err error
						if w%2 == 0 {
							err = mutate()
						} else {
							_, err = products.Apply(ctx, p.ID, []repository.Change{repository.Add("Stock", -1)})
						}
						if err != nil {
							return err
						}
						n.Add(1)
					}
					return nil
				})
			}
			close(start)
			require.NoError(t, g.Wait())
			return n.Load()
		}

		acked := run(func() error {
			_, err := products.Mutate(ctx, p.ID, func(p *shopProduct) error { p.Stock--; return nil })
			return err
		})
		_, _, stock, version := rawProduct(t, db, p.ID)
		assert.EqualValues(t, 8*rounds, acked)
		assert.EqualValues(t, initial-acked, stock, "no decrement lost")
		assert.Equal(t, p.Version, version, "stock changes alone never advanced the version")

		// MutateRowLocked guards it the same way.
		got, err := products.MutateRowLocked(ctx, p.ID, func(p *shopProduct) error { p.Stock -= 7; return nil })
		require.NoError(t, err)
		assert.EqualValues(t, initial-acked-7, got.Stock)

		// Negative control: read, decrement, write back by key alone.
		require.NoError(t, db.Exec("UPDATE shop_products SET stock = ? WHERE id = ?", initial, p.ID).Error)
		acked = run(func() error {
			var s int64
			if err := db.WithContext(ctx).Raw("SELECT stock FROM shop_products WHERE id = ?", p.ID).Scan(&s).Error; err != nil {
				return err
			}
			time.Sleep(time.Millisecond) // the same work between read and write as a Mutate's fn may do
			return db.WithContext(ctx).Exec("UPDATE shop_products SET stock = ? WHERE id = ?", s-1, p.ID).Error
		})
		_, _, stock, _ = rawProduct(t, db, p.ID)
		assert.Greater(t, stock, initial-acked, "the blind read-modify-write loses decrements")
	})
}

// A Mutate whose fn changes the unversioned field while an Apply changed it
// since the read is stale, and retried: with one attempt only, the error
// says which field moved.
func TestUnversionedMutateMissIsStale(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		products, err := repository.New[shopProduct](db, repository.WithAdaptive(false))
		require.NoError(t, productRepo(t, db).Create(ctx, &shopProduct{Name: "x"}))
		require.NoError(t, err)
		p, err := products.Get(ctx, int64(1))
		require.NoError(t, err)
		first := true
		calls := 0
		got, err := products.Mutate(ctx, p.ID, func(p *shopProduct) error {
			calls++
			if first {
				first = false
				_, err := products.Apply(ctx, p.ID, []repository.Change{repository.Add("Stock", 10)})
				require.NoError(t, err)
			}
			p.Stock--
			return nil
		})
		require.NoError(t, err)
		assert.Equal(t, 2, calls, "the attempt that met the Apply's change was retried")
		assert.EqualValues(t, 9, got.Stock)

		_, err = products.Mutate(ctx, p.ID, func(p *shopProduct) error {
			_, err := products.Apply(ctx, p.ID, []repository.Change{repository.Add("Stock", 10)})
			require.NoError(t, err)
			p.Stock--
			return nil
		}, repository.Retry(locking.RetryPolicy{MaxAttempts: 1}))
		require.ErrorIs(t, err, locking.ErrStaleData)
		var se *repository.StaleError[shopProduct]
		require.True(t, errors.As(err, &se))
		assert.Equal(t, []string{"Stock"}, se.Fields)
		assert.Nil(t, se.Current)
		assert.Contains(t, err.Error(), "Stock changed since it was read")
		_, _, stock, _ := rawProduct(t, db, p.ID)
		assert.EqualValues(t, 19, stock, "the Apply's change stands")
	})
}

// Plain GORM updates through the plugin, and raw SQL under the version
// trigger, leave the version alone when they change only the unversioned
// field, and advance it for any other change.
func TestUnversionedPluginAndTrigger(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		products := productRepo(t, db)
		require.NoError(t, db.Use(repository.Plugin()))
		p := newProduct(t, products, 100)
		require.NoError(t, db.Model(&shopProduct{}).Where("id = ?", p.ID).Update("stock", gorm.Expr("stock - ?", 10)).Error)
		_, _, stock, version := rawProduct(t, db, p.ID)
		assert.EqualValues(t, 90, stock)
		assert.Equal(t, p.Version, version, "the plugin leaves the version alone for a stock change")
		require.NoError(t, db.Model(&shopProduct{}).Where("id = ?", p.ID).Update("name", "desk lamp").Error)
		_, _, _, version = rawProduct(t, db, p.ID)
		assert.Greater(t, version, p.Version, "and advances it for a name change")

		require.NoError(t, migrations.CreateVersionTrigger(ctx, db, &shopProduct{}))
		_, _, _, before := rawProduct(t, db, p.ID)
		require.NoError(t, db.Exec("UPDATE shop_products SET stock = stock - 5 WHERE id = ?", p.ID).Error)
		_, _, stock, version = rawProduct(t, db, p.ID)
		assert.EqualValues(t, 85, stock)
		assert.Equal(t, before, version, "the trigger leaves the version alone for a stock change")
		require.NoError(t, db.Exec("UPDATE shop_products SET price = price + 1, stock = stock - 5 WHERE id = ?", p.ID).Error)
		_, _, _, version = rawProduct(t, db, p.ID)
		assert.Greater(t, version, before, "and advances it when a versioned column changes too")
		// Apply of the stock alone, under the trigger, keeps it as well.
		_, _, _, before = rawProduct(t, db, p.ID)
		got, err := products.Apply(ctx, p.ID, []repository.Change{repository.Add("Stock", -1)})
		require.NoError(t, err)
		assert.Equal(t, before, got.Version)
		_, _, stock, version = rawProduct(t, db, p.ID)
		assert.Equal(t, before, version)
		assert.EqualValues(t, 79, stock)
	})
}
