package catalog

import (
	"gorm.io/gorm"

	"example.com/storefront/db"
)

// InStock keeps the products that can be sold.
func InStock(q *gorm.DB) *gorm.DB { return q.Where("stock > 0") }

// InCategory keeps one category's products.
func InCategory(category string) func(*gorm.DB) *gorm.DB {
	return func(q *gorm.DB) *gorm.DB { return q.Where("category = ?", category) }
}

// AtVersion keeps the record only as it was read: the optimistic check.
func AtVersion(version int64) func(*gorm.DB) *gorm.DB {
	return func(q *gorm.DB) *gorm.DB { return q.Where("version = ?", version) }
}

// Page is one page of a listing.
func Page(page, size int) func(*gorm.DB) *gorm.DB {
	return func(q *gorm.DB) *gorm.DB {
		if page < 1 {
			page = 1
		}
		return q.Offset((page - 1) * size).Limit(size)
	}
}

// products is the chain every product query starts from.
func products(q *gorm.DB) *gorm.DB { return q.Model(&db.Product{}) }
