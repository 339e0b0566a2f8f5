// Package catalog is the products' store: the queries and the writes of
// the product pages, the admin form and the warehouse feed.
package catalog

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"

	"example.com/storefront/db"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

// ErrSoldOut is returned when a product has too few items left.
var ErrSoldOut = errors.New("catalog: sold out")

// Store reads and writes products.
type Store struct {
	db       *gorm.DB
	products *repository.Repository[db.Product]
}

// NewStore returns the catalog's store on conn.
func NewStore(conn *gorm.DB) (*Store, error) {
	repo, err := repository.New[db.Product](conn)
	if err != nil {
		return nil, err
	}
	return &Store{db: conn, products: repo}, nil
}

// Get reads one product.
func (s *Store) Get(ctx context.Context, id uint) (*db.Product, error) {
	var p db.Product
	if err := s.db.WithContext(ctx).First(&p, id).Error; err != nil {
		return nil, err
	}
	return &p, nil
}

// List lists a category's products in stock, a page at a time.
func (s *Store) List(ctx context.Context, category string, page int) ([]db.Product, error) {
	var out []db.Product
	err := s.db.WithContext(ctx).Scopes(InStock, InCategory(category), Page(page, 20)).Order("name").Find(&out).Error
	return out, err
}

// CountInStock counts the items of a category on the shelves.
func (s *Store) CountInStock(ctx context.Context, category string) (int64, error) {
	var n int64
	err := s.db.WithContext(ctx).Table("products").Where("category = ?", category).Select("COALESCE(SUM(stock), 0)").Scan(&n).Error
	return n, err
}

// Create adds a product.
func (s *Store) Create(ctx context.Context, p *db.Product) error {
	return s.products.Create(ctx, p)
}

// Rename changes the name the admin typed, as the form read it.
func (s *Store) Rename(ctx context.Context, p *db.Product, name string) error {
	return s.db.WithContext(ctx).Model(p).Update("name", name).Error // want `unguarded Update of versioned model db.Product \(table products\) through Model\(p\): no condition on its version column \(version\) guards it, .*GuardGORMUpdates`
}

// Reprice sets the price the form read, if nobody changed the product
// since: the version it was read with guards the write.
func (s *Store) Reprice(ctx context.Context, p *db.Product, cents int64) error {
	res := s.db.WithContext(ctx).Model(&db.Product{}).
		Where("id = ? AND version = ?", p.ID, p.Version).
		Updates(map[string]any{"price_cents": cents, "version": gorm.Expr("version + 1")})
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return locking.ErrStaleData
	}
	return nil
}

// Feature puts a product on the front page, through the scope that checks
// the version it was read with.
func (s *Store) Feature(ctx context.Context, p *db.Product) error {
	return products(s.db.WithContext(ctx)).Scopes(AtVersion(p.Version)).Where("id = ?", p.ID).Update("featured", true).Error
}

// Unfeature takes a category off the front page.
func (s *Store) Unfeature(ctx context.Context, category string) error {
	return products(s.db).WithContext(ctx).Scopes(InCategory(category)).Update("featured", false).Error // want `unguarded Update of versioned model db.Product \(table products\) through Model\(&db.Product\{\}\)`
}

// Restock adds what the warehouse received.
func (s *Store) Restock(ctx context.Context, id uint, n int64) error {
	_, err := s.products.Apply(ctx, id, []repository.Change{repository.Add("Stock", n)})
	return err
}

// Take removes n items from the shelf for an order, in its transaction.
func Take(tx *gorm.DB, id uint, n int64) error {
	res := tx.Model(&db.Product{}).Where("id = ? AND stock >= ?", id, n).UpdateColumn("stock", gorm.Expr("stock - ?", n)) // want `unguarded UpdateColumn of versioned model db.Product .*Apply\(ctx, id, \[\]repository.Change\{repository.Add\("Stock", -n\)\}\)`
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("product %d: %w", id, ErrSoldOut)
	}
	return nil
}

// Discontinue removes a product from the catalog.
func (s *Store) Discontinue(ctx context.Context, id uint) error {
	return s.db.WithContext(ctx).Delete(&db.Product{}, id).Error // want `unguarded Delete of versioned model db.Product .* through Delete\(&db.Product\{\}\)`
}

// Retire removes the product the admin saw, unless it changed since.
func (s *Store) Retire(ctx context.Context, p *db.Product) error {
	return s.products.Delete(ctx, p)
}
