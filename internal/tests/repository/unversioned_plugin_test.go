package repository_test

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

// decrementStock runs n Apply(Add("Stock", -1)) of product id from 4
// goroutines at once, and returns how many were acknowledged.
func decrementStock(t *testing.T, products *repository.Repository[shopProduct], id int64, n int) int64 {
	t.Helper()
	ctx := testdb.Ctx(t)
	var g errgroup.Group
	var acked atomic.Int64
	for w := range 4 {
		g.Go(func() error {
			for i := w; i < n; i += 4 {
				if _, err := products.Apply(ctx, id, []repository.Change{repository.Add("Stock", -1)}); err != nil {
					return err
				}
				acked.Add(1)
			}
			return nil
		})
	}
	require.NoError(t, g.Wait())
	return acked.Load()
}

// readProduct reads a product with plain GORM, as a form would.
func readProduct(t *testing.T, db *gorm.DB, id int64) shopProduct {
	t.Helper()
	var p shopProduct
	require.NoError(t, db.First(&p, id).Error)
	return p
}

// A plain GORM Save (or Updates of a struct) of a product read before
// orders decremented its stock with Apply: under the plugin, the name is
// saved and the stock is the initial one minus every decrement, exactly;
// the struct keeps its (stale) stock. Without the plugin (the negative
// control, first, on the same database) the same Save writes the stale
// stock back: every decrement is lost. Then an editor saving a form from a
// fresh read beside concurrent orders is never stale and loses nothing.
func TestUnversionedPluginSaveKeepsDecrements(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		const initial, orders = 100, 20
		products := productRepo(t, db)

		// Negative control: no plugin.
		p := newProduct(t, products, initial)
		form := readProduct(t, db, p.ID)
		require.EqualValues(t, orders, decrementStock(t, products, p.ID, orders))
		form.Name = "desk lamp"
		require.NoError(t, db.Save(&form).Error)
		name, _, stock, _ := rawProduct(t, db, p.ID)
		require.Equal(t, "desk lamp", name)
		require.EqualValues(t, initial, stock, "without the plugin, Save writes back the stock it read: %d decrements lost", orders)

		require.NoError(t, db.Use(repository.Plugin(repository.GuardGORMUpdates())))
		writes := []struct {
			name  string
			write func(form *shopProduct) *gorm.DB
		}{
			{"Save", func(form *shopProduct) *gorm.DB { return db.Save(form) }},
			{"Updates(struct)", func(form *shopProduct) *gorm.DB { return db.Model(form).Updates(*form) }},
			{"Updates(&struct)", func(form *shopProduct) *gorm.DB { return db.Model(form).Updates(form) }},
			{`Select("*").Updates`, func(form *shopProduct) *gorm.DB { return db.Model(form).Select("*").Updates(form) }},
			{"UpdateColumns(struct)", func(form *shopProduct) *gorm.DB { return db.Model(form).UpdateColumns(*form) }},
		}
		for _, w := range writes {
			t.Run(w.name, func(t *testing.T) {
				p := newProduct(t, products, initial)
				form := readProduct(t, db, p.ID)
				acked := decrementStock(t, products, p.ID, orders)
				require.EqualValues(t, orders, acked)
				form.Name = "desk lamp " + w.name
				form.Price = 1500
				res := w.write(&form)
				require.NoError(t, res.Error)
				require.EqualValues(t, 1, res.RowsAffected)
				name, price, stock, version := rawProduct(t, db, p.ID)
				assert.Equal(t, form.Name, name, "the name was saved")
				assert.EqualValues(t, 1500, price)
				assert.EqualValues(t, initial-acked, stock, "no decrement lost")
				assert.Greater(t, version, p.Version, "a name change advances the version")
				assert.Equal(t, version, form.Version, "the guarded write gave the struct its new version")
				assert.EqualValues(t, initial, form.Stock, "the struct keeps the stock it read (stale)")
			})
		}

		// An update from a struct that holds nothing but the stock writes
		// nothing, and leaves the version and the struct as they were.
		t.Run("Updates of the stock alone", func(t *testing.T) {
			p := newProduct(t, products, initial)
			form := readProduct(t, db, p.ID)
			decrementStock(t, products, p.ID, 3)
			res := db.Model(&form).Updates(shopProduct{Stock: 7})
			require.NoError(t, res.Error)
			_, _, stock, version := rawProduct(t, db, p.ID)
			assert.EqualValues(t, initial-3, stock)
			assert.Equal(t, p.Version, version)
			assert.EqualValues(t, initial, form.Stock)
			assert.True(t, p.UpdatedAt.Equal(form.UpdatedAt), "nor the update time")
		})

		// An editor saving from fresh reads beside 4 order writers: no save is
		// stale (orders do not advance the version), no decrement is lost.
		t.Run("editor beside orders", func(t *testing.T) {
			const rounds = 10
			p := newProduct(t, products, 1000)
			var g errgroup.Group
			var acked atomic.Int64
			g.Go(func() error {
				acked.Add(decrementStock(t, products, p.ID, 200))
				return nil
			})
			g.Go(func() error {
				for i := range rounds {
					var form shopProduct
					if err := db.First(&form, p.ID).Error; err != nil {
						return err
					}
					form.Price = int64(2000 + i)
					if err := db.Save(&form).Error; err != nil {
						return err
					}
				}
				return nil
			})
			require.NoError(t, g.Wait())
			_, price, stock, _ := rawProduct(t, db, p.ID)
			assert.EqualValues(t, 2000+rounds-1, price)
			assert.EqualValues(t, 1000-acked.Load(), stock, "no decrement lost")
			assert.EqualValues(t, 200, acked.Load())
		})

		// Create, and Save's insert, write the stock.
		t.Run("Create writes it", func(t *testing.T) {
			c := shopProduct{Name: "chair", Price: 10, Stock: 7}
			require.NoError(t, db.Create(&c).Error)
			s := shopProduct{Name: "stool", Price: 10, Stock: 9}
			require.NoError(t, db.Save(&s).Error)
			_, _, stock, _ := rawProduct(t, db, c.ID)
			assert.EqualValues(t, 7, stock)
			_, _, stock, _ = rawProduct(t, db, s.ID)
			assert.EqualValues(t, 9, stock)
		})
	})
}

// The stock named in a plain GORM update: an expression the database
// computes is allowed, and keeps the version; a literal value is a blind
// write, refused under StrictGORMWrites(true) with ErrUnguardedWrite naming
// the field (nothing written), and written with a warning naming it under
// GuardGORMUpdates alone (the negative control: it does erase the
// decrements).
func TestUnversionedPluginNamedWrites(t *testing.T) {
	for _, d := range testdb.Dialects {
		t.Run(d, func(t *testing.T) {
			const initial = 100
			strict := testdb.Open(t, d)
			products := productRepo(t, strict)
			require.NoError(t, strict.Use(repository.Plugin(repository.GuardGORMUpdates(), repository.StrictGORMWrites(true))))
			p := newProduct(t, products, initial)
			form := readProduct(t, strict, p.ID)

			blind := []struct {
				name  string
				write func(form *shopProduct) *gorm.DB
			}{
				{`Update("stock", 5)`, func(form *shopProduct) *gorm.DB { return strict.Model(form).Update("stock", 5) }},
				{`Update("Stock", 5)`, func(form *shopProduct) *gorm.DB { return strict.Model(form).Update("Stock", 5) }},
				{`Updates(map{"stock": 5})`, func(form *shopProduct) *gorm.DB {
					return strict.Model(form).Updates(map[string]any{"name": "x", "stock": 5})
				}},
				{`UpdateColumn("stock", 5)`, func(form *shopProduct) *gorm.DB { return strict.Model(form).UpdateColumn("stock", 5) }},
				{`Select("Stock").Updates(struct)`, func(form *shopProduct) *gorm.DB {
					f := *form
					f.Stock = 5
					return strict.Model(form).Select("Name", "Stock").Updates(&f)
				}},
				{`Select("Stock").Save`, func(form *shopProduct) *gorm.DB {
					f := *form
					f.Stock = 5
					return strict.Select("Name", "Stock").Save(&f)
				}},
			}
			for _, b := range blind {
				err := b.write(&form).Error
				require.ErrorIs(t, err, locking.ErrUnguardedWrite, b.name)
				assert.Contains(t, err.Error(), "Stock", b.name)
				assert.Contains(t, err.Error(), "shop_products", b.name)
				assert.Contains(t, err.Error(), "unversioned_plugin_test.go:", b.name)
				name, _, stock, version := rawProduct(t, strict, p.ID)
				assert.Equal(t, "lamp", name, "%s: nothing was written", b.name)
				assert.EqualValues(t, initial, stock, "%s: nothing was written", b.name)
				assert.Equal(t, p.Version, version, b.name)
			}

			// Expressions are the database's: allowed, guarded by the
			// version the struct holds, and the version stays.
			require.NoError(t, strict.Model(&form).Update("stock", gorm.Expr("stock - ?", 1)).Error)
			require.NoError(t, strict.Model(&form).Updates(map[string]any{"stock": gorm.Expr("stock - ?", 2)}).Error)
			require.NoError(t, strict.Model(&form).UpdateColumn("stock", gorm.Expr("stock - ?", 3)).Error)
			_, _, stock, version := rawProduct(t, strict, p.ID)
			assert.EqualValues(t, initial-6, stock)
			assert.Equal(t, p.Version, version)

			// GuardGORMUpdates alone: the literal is written, with a
			// warning naming the field; it erases the decrements.
			guarded := testdb.Open(t, d)
			products = productRepo(t, guarded)
			require.NoError(t, guarded.Use(repository.Plugin(repository.GuardGORMUpdates())))
			p = newProduct(t, products, initial)
			form = readProduct(t, guarded, p.ID)
			require.EqualValues(t, 10, decrementStock(t, products, p.ID, 10))
			rec := &warnRecorder{}
			logged := guarded.Session(&gorm.Session{Logger: rec})
			require.NoError(t, logged.Model(&form).Update("stock", form.Stock).Error)
			_, _, stock, _ = rawProduct(t, guarded, p.ID)
			assert.EqualValues(t, initial, stock, "the blind write put back the stock it read")
			require.NoError(t, logged.Model(&form).Update("stock", gorm.Expr("stock - ?", 1)).Error)
			_, _, stock, _ = rawProduct(t, guarded, p.ID)
			assert.EqualValues(t, initial-1, stock)
			warns := rec.all()
			require.Len(t, warns, 1, "one warning, for the literal only")
			assert.Contains(t, warns[0], "blind write of Stock of shop_products")
			assert.Contains(t, warns[0], "unversioned_plugin_test.go:")
		})
	}
}

// Save of a slice is GORM's INSERT ... ON CONFLICT DO UPDATE of every
// column (UpdateAll), as is Create with clause.OnConflict{UpdateAll: true}:
// under the plugin the update leaves a field outside the version as the
// row has it, as Save of a struct does, so no decrement made since the
// read is lost; DoUpdates naming the field writes it, as named. Without
// the plugin (the negative control, first) the upsert writes back the
// stock it read.
func TestUnversionedPluginSaveOfASliceKeepsDecrements(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		const initial, orders = 100, 12
		products := productRepo(t, db)

		p := newProduct(t, products, initial)
		form := readProduct(t, db, p.ID)
		require.EqualValues(t, orders, decrementStock(t, products, p.ID, orders))
		form.Name = "desk lamp"
		require.NoError(t, db.Save(&[]shopProduct{form}).Error)
		name, _, stock, _ := rawProduct(t, db, p.ID)
		require.Equal(t, "desk lamp", name)
		require.EqualValues(t, initial, stock, "without the plugin, Save of a slice writes back the stock it read: %d decrements lost", orders)

		require.NoError(t, db.Use(repository.Plugin()))
		writes := []struct {
			name  string
			write func(form *shopProduct) *gorm.DB
		}{
			{"Save(slice)", func(form *shopProduct) *gorm.DB {
				forms := []shopProduct{*form}
				res := db.Save(&forms)
				*form = forms[0]
				return res
			}},
			{"Create OnConflict UpdateAll", func(form *shopProduct) *gorm.DB {
				return db.Clauses(clause.OnConflict{UpdateAll: true}).Create(form)
			}},
		}
		for _, w := range writes {
			t.Run(w.name, func(t *testing.T) {
				p := newProduct(t, products, initial)
				form := readProduct(t, db, p.ID)
				require.EqualValues(t, orders, decrementStock(t, products, p.ID, orders))
				form.Name = "desk lamp " + w.name
				form.Price = 1500
				require.NoError(t, w.write(&form).Error)
				name, price, stock, version := rawProduct(t, db, p.ID)
				assert.Equal(t, form.Name, name, "the name was saved")
				assert.EqualValues(t, 1500, price)
				assert.EqualValues(t, initial-orders, stock, "no decrement lost")
				assert.Greater(t, version, p.Version, "the upsert advances the version")
				assert.EqualValues(t, initial, form.Stock, "the struct keeps the stock it read (stale)")
			})
		}

		t.Run("DoUpdates naming the stock", func(t *testing.T) {
			p := newProduct(t, products, initial)
			form := readProduct(t, db, p.ID)
			decrementStock(t, products, p.ID, 3)
			form.Stock = 50
			require.NoError(t, db.Clauses(clause.OnConflict{
				Columns:   []clause.Column{{Name: "id"}},
				DoUpdates: clause.AssignmentColumns([]string{"stock"}),
			}).Create(&form).Error)
			_, _, stock, _ := rawProduct(t, db, p.ID)
			assert.EqualValues(t, 50, stock, "named, it is written as named")
		})
	})
}
