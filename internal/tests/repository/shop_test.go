package repository_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

// shopResult is what one run of the shop workload did.
type shopResult struct {
	saves, stale int64
	orders       map[int64]int64 // successful orders per product
}

// shopWorkload runs issue 28's measurement on products ids: per product,
// 3 order writers decrement the stock by 10 with Apply, and 1 editor reads
// the product, keeps its form open 1 ms and saves name and price with
// Update, saves times. It returns how many saves were stale and how many
// orders succeeded.
func shopWorkload[T any](t *testing.T, repo *repository.Repository[T], ids []int64, saves int, edit func(e *T, i int)) shopResult {
	t.Helper()
	ctx := testdb.Ctx(t)
	res := shopResult{orders: map[int64]int64{}}
	counts := make([]atomic.Int64, len(ids))
	var staleN, savesN atomic.Int64
	start := make(chan struct{})
	var editors, orders errgroup.Group
	done := make(chan struct{})
	for k, id := range ids {
		for range 3 {
			orders.Go(func() error {
				<-start
				for {
					select {
					case <-done:
						return nil
					default:
					}
					_, err := repo.Apply(ctx, id, []repository.Change{repository.Add("Stock", -10)}, repository.If("stock >= ?", 10))
					if err != nil {
						return fmt.Errorf("order of %d: %w", id, err)
					}
					counts[k].Add(1)
				}
			})
		}
		editors.Go(func() error {
			<-start
			for i := range saves {
				form, err := repo.Get(ctx, id)
				if err != nil {
					return err
				}
				time.Sleep(time.Millisecond) // the form on screen
				edit(form, i)
				err = repo.Update(ctx, form)
				switch {
				case errors.Is(err, locking.ErrStaleData):
					staleN.Add(1)
				case err != nil:
					return fmt.Errorf("save of %d: %w", id, err)
				}
				savesN.Add(1)
			}
			return nil
		})
	}
	close(start)
	eerr := editors.Wait()
	close(done)
	require.NoError(t, orders.Wait())
	require.NoError(t, eerr)
	for k, id := range ids {
		res.orders[id] = counts[k].Load()
	}
	res.saves, res.stale = savesN.Load(), staleN.Load()
	return res
}

// Issue 28's shop: 3 order writers decrementing the stock with Apply and 1
// editor saving name and price, per product. With the stock tagged
// gormlock:"unversioned", 0 of 80 saves are stale and the stock is the
// initial one minus every successful order, exactly; the same model
// without the tag goes stale (the negative control: 49 / 76 / 80 of 80 on
// SQLite / PostgreSQL / MariaDB as measured in the issue).
func TestShopFormBesideOrders(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		const initial = 1_000_000
		products := productRepo(t, db)
		var ids []int64
		for range 2 {
			ids = append(ids, newProduct(t, products, initial).ID)
		}
		res := shopWorkload(t, products, ids, 40, func(p *shopProduct, i int) {
			p.Name, p.Price = fmt.Sprintf("lamp %d", i), int64(1000+i)
		})
		assert.EqualValues(t, 80, res.saves)
		assert.Zero(t, res.stale, "no form save is stale: nothing it writes changed")
		for _, id := range ids {
			name, price, stock, _ := rawProduct(t, db, id)
			assert.Positive(t, res.orders[id], "orders ran beside the editor")
			assert.EqualValues(t, initial-10*res.orders[id], stock, "stock = initial - successful orders, exactly")
			assert.Equal(t, "lamp 39", name)
			assert.EqualValues(t, 1039, price)
		}

		// Negative control: the same model without the tag.
		require.NoError(t, db.AutoMigrate(&plainShopProduct{}))
		plain, err := repository.New[plainShopProduct](db)
		require.NoError(t, err)
		var plainIDs []int64
		for range 2 {
			q := &plainShopProduct{Name: "lamp", Price: 1000, Stock: initial}
			require.NoError(t, plain.Create(ctx, q))
			plainIDs = append(plainIDs, q.ID)
		}
		res = shopWorkload(t, plain, plainIDs, 40, func(p *plainShopProduct, i int) {
			p.Name, p.Price = fmt.Sprintf("lamp %d", i), int64(1000+i)
		})
		t.Logf("without the tag: %d of %d saves stale", res.stale, res.saves)
		assert.Positive(t, res.stale, "without the tag the orders make the form stale")
		for _, id := range plainIDs {
			var stock int64
			require.NoError(t, db.Raw("SELECT stock FROM plain_shop_products WHERE id = ?", id).Scan(&stock).Error)
			assert.EqualValues(t, initial-10*res.orders[id], stock)
		}
	})
}
