package repository_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/migrations"
	"github.com/gormlock/gormlock/repository"
)

// Leases.Update, like Update, never writes an unversioned field from the
// entity, and after the write the entity holds the row's value of it: a
// decrement another service made with its own SQL between the holder's
// read and its write (gormlock's own writers wait for the lease) is
// neither undone nor hidden from the holder. In both lease layouts, on
// every database.
func TestLeaseUpdateRefreshesUnversionedFields(t *testing.T) {
	for _, layout := range []string{"table", "row"} {
		t.Run(layout, func(t *testing.T) {
			testdb.Each(t, func(t *testing.T, db *gorm.DB) {
				ctx := testdb.Ctx(t)
				require.NoError(t, db.AutoMigrate(&shopProduct{}))
				opt := repository.WithLeases()
				if layout == "row" {
					require.NoError(t, migrations.AddLeaseColumns(ctx, db, &shopProduct{}))
					opt = repository.WithLeasesInRow()
				}
				products, err := repository.New[shopProduct](db, opt)
				require.NoError(t, err)
				p := &shopProduct{Name: "lamp", Price: 1000, Stock: 10}
				require.NoError(t, products.Create(ctx, p))

				e, l, err := products.Leases().Acquire(ctx, p.ID, "ann")
				require.NoError(t, err)
				require.NoError(t, db.Exec("UPDATE shop_products SET stock = stock - 3 WHERE id = ?", p.ID).Error)
				e.Name = "desk lamp"
				require.NoError(t, products.Leases().Update(ctx, e, l))
				assert.EqualValues(t, 7, e.Stock, "the entity holds the row's stock after the write")
				name, _, stock, version := rawProduct(t, db, p.ID)
				assert.Equal(t, "desk lamp", name)
				assert.EqualValues(t, 7, stock, "the order's decrement stays")
				assert.Equal(t, version, e.Version)
			})
		})
	}
}
