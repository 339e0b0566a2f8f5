package catalog

import (
	"context"
	"database/sql"
	"time"

	"gorm.io/gorm"
)

// The warehouse feed writes with SQL of its own, the way the first version
// of the shop did.

const (
	reserveSQL = `UPDATE products SET stock = stock - ? WHERE id = ? AND stock >= ?`
	repriceSQL = `UPDATE products
		SET price_cents = ?, version = version + 1
		WHERE id = ? AND version = ?`
	soldOutSQL = `SELECT id FROM products WHERE stock = 0 AND deleted_at IS NULL`
)

// Feed applies the warehouse's messages.
type Feed struct {
	db  *gorm.DB
	sql *sql.DB
}

// Reserve holds n items for the warehouse.
func (f *Feed) Reserve(ctx context.Context, id uint, n int64) (bool, error) {
	res := f.db.WithContext(ctx).Exec(reserveSQL, n, id, n) // want `unguarded raw SQL UPDATE of versioned model db.Product \(table products\) through Exec: no condition on its version column \(version\) in its WHERE guards it`
	return res.RowsAffected == 1, res.Error
}

// Reprice applies a price list entry read with its version.
func (f *Feed) Reprice(ctx context.Context, id uint, version, cents int64) (bool, error) {
	res := f.db.WithContext(ctx).Exec(repriceSQL, cents, id, version)
	return res.RowsAffected == 1, res.Error
}

// SoldOut lists the products with nothing left.
func (f *Feed) SoldOut(ctx context.Context) ([]uint, error) {
	var ids []uint
	err := f.db.WithContext(ctx).Raw(soldOutSQL).Scan(&ids).Error
	return ids, err
}

// ClearFeatured runs every night: nothing stays featured for more than a
// day.
func (f *Feed) ClearFeatured(ctx context.Context) error {
	_, err := f.sql.ExecContext(ctx, "UPDATE products SET featured = FALSE") // want `unguarded raw SQL UPDATE of versioned model db.Product`
	return err
}

// Purge deletes what was discontinued long ago.
func (f *Feed) Purge(ctx context.Context, before time.Time) error {
	_, err := f.sql.ExecContext(ctx, "DELETE FROM products WHERE deleted_at < $1", before) // want `unguarded raw SQL DELETE of versioned model db.Product`
	return err
}
