// Package db holds the storefront's tables. The shop adopted gormlock for
// the records two clients can write at once: products (stock, price),
// orders, customers (their quota of store credit) and API tokens. Line
// items, coupons and the audit trail are append-only or owned by one
// writer, and stay plain GORM models.
package db

import (
	"time"

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/models"
)

// Product is one article for sale.
type Product struct {
	gorm.Model
	models.Versioning
	SKU        string `gorm:"uniqueIndex;size:32"`
	Name       string
	Category   string `gorm:"index"`
	PriceCents int64
	Stock      int64
	Featured   bool
}

// Order is a customer's order: pending, paid, shipped or cancelled.
type Order struct {
	models.Model
	CustomerID    uint `gorm:"index"`
	Status        string
	TotalCents    int64
	DiscountCents int64
	Items         []LineItem
	PaidAt        *time.Time
}

// LineItem is one line of an order; it never changes once written.
type LineItem struct {
	ID         uint
	OrderID    int64 `gorm:"index"`
	ProductID  uint
	Quantity   int64
	PriceCents int64
}

// TableName keeps the table of the first version of the shop.
func (LineItem) TableName() string { return "order_lines" }

// Customer carries the store credit the shop sells in advance.
type Customer struct {
	ID           uint
	Email        string `gorm:"uniqueIndex"`
	Name         string
	PasswordHash string
	Plan         string
	CreditCents  int64
	Version      int64
	Disabled     bool
}

// APIToken lets a partner's system call the shop's API.
type APIToken struct {
	ID         uint
	CustomerID uint
	Key        string `gorm:"uniqueIndex"`
	Revision   int64  `gormlock:"version"`
	CallsLeft  int64
	LastUsedAt time.Time
	Revoked    bool
}

// TableName is the partners' table.
func (APIToken) TableName() string { return tokensTable }

const tokensTable = "partner_tokens"

// Coupon is a discount code; the marketing team's tool owns it.
type Coupon struct {
	Code        string `gorm:"primaryKey"`
	PercentOff  int64
	Redemptions int64
}

// AuditEntry records who changed what.
type AuditEntry struct {
	ID      uint
	At      time.Time
	Actor   string
	Action  string
	Subject string
}
