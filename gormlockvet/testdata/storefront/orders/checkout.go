// Package orders places, pays and cancels orders: the service layer,
// which runs each use case in one transaction and hands the *gorm.DB of
// the transaction to the helpers that write.
package orders

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"example.com/storefront/catalog"
	"example.com/storefront/db"
)

// ErrNoCredit is returned when a customer's credit does not cover an order.
var ErrNoCredit = errors.New("orders: not enough credit")

// Line is one line of a cart.
type Line struct {
	ProductID uint
	Quantity  int64
}

// Service runs the order use cases.
type Service struct {
	db    *gorm.DB
	clock func() time.Time
}

// NewService returns the service on conn.
func NewService(conn *gorm.DB) *Service { return &Service{db: conn, clock: time.Now} }

// Place turns a cart into a pending order paid with store credit: the
// stock, the credit and the order change together or not at all.
func (s *Service) Place(ctx context.Context, customerID uint, cart []Line, coupon string) (*db.Order, error) {
	order := &db.Order{CustomerID: customerID, Status: "pending"}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var total int64
		for _, l := range cart {
			var p db.Product
			if err := tx.Select("id", "price_cents").First(&p, l.ProductID).Error; err != nil {
				return err
			}
			if err := catalog.Take(tx, l.ProductID, l.Quantity); err != nil {
				return err
			}
			order.Items = append(order.Items, db.LineItem{ProductID: p.ID, Quantity: l.Quantity, PriceCents: p.PriceCents})
			total += p.PriceCents * l.Quantity
		}
		order.TotalCents = total
		if err := tx.Create(order).Error; err != nil {
			return err
		}
		if coupon != "" {
			if err := applyCoupon(tx, order, coupon); err != nil {
				return err
			}
		}
		return debit(tx, customerID, order.TotalCents-order.DiscountCents)
	})
	if err != nil {
		return nil, err
	}
	return order, nil
}

// applyCoupon redeems a coupon on a new order.
func applyCoupon(tx *gorm.DB, order *db.Order, code string) error {
	var c db.Coupon
	if err := tx.First(&c, "code = ?", code).Error; err != nil {
		return fmt.Errorf("coupon %q: %w", code, err)
	}
	if err := tx.Model(&c).UpdateColumn("redemptions", gorm.Expr("redemptions + 1")).Error; err != nil {
		return err
	}
	order.DiscountCents = order.TotalCents * c.PercentOff / 100
	return tx.Model(order).Update("discount_cents", order.DiscountCents).Error // want `unguarded Update of versioned model db.Order \(table orders\) through Model\(order\)`
}

// debit takes an order's amount from the customer's credit.
func debit(tx *gorm.DB, customerID uint, cents int64) error {
	res := tx.Model(&db.Customer{}).
		Where("id = ? AND credit_cents >= ?", customerID, cents).
		Update("credit_cents", gorm.Expr("credit_cents - ?", cents)) // want `unguarded Update of versioned model db.Customer \(table customers\) .*repository.Add\("CreditCents", -cents\)`
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return ErrNoCredit
	}
	return nil
}

// MarkPaid records the payment of the order as it was read: a second
// notification of the payment provider finds another version and changes
// nothing.
func (s *Service) MarkPaid(ctx context.Context, o *db.Order) error {
	now := s.clock()
	res := s.db.WithContext(ctx).Model(&db.Order{}).
		Where("id = ?", o.ID).
		Where("version = ?", o.Version).
		Updates(map[string]any{"status": "paid", "paid_at": now, "version": gorm.Expr("version + 1")})
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("order %d changed since it was read", o.ID)
	}
	return nil
}

// Ship marks a paid order shipped; the warehouse calls it once per parcel.
func (s *Service) Ship(ctx context.Context, orderID int64) error {
	return s.db.WithContext(ctx).Model(&db.Order{}).
		Where("id = ? AND status = ?", orderID, "paid").
		Update("status", "shipped").Error // want `unguarded Update of versioned model db.Order`
}

// Cancel cancels a pending order and gives the credit back.
func (s *Service) Cancel(ctx context.Context, orderID int64) error {
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var o db.Order
		if err := tx.Preload("Items").First(&o, orderID).Error; err != nil {
			return err
		}
		if o.Status != "pending" {
			return fmt.Errorf("order %d is %s", o.ID, o.Status)
		}
		q := tx.Model(&o)
		if o.PaidAt == nil {
			q = q.Where("paid_at IS NULL")
		}
		if err := q.Where("version = ? OR status = ?", o.Version, "pending").Update("status", "cancelled").Error; err != nil { // want `unguarded Update of versioned model db.Order \(table orders\) through Model\(&o\): no condition on its version column \(version\) guards it`
			return err
		}
		for _, it := range o.Items {
			if err := tx.Model(&db.Product{}).Where("id = ?", it.ProductID).Update("stock", gorm.Expr("stock + ?", it.Quantity)).Error; err != nil { // want `unguarded Update of versioned model db.Product .*repository.Add\("Stock", it.Quantity\)`
				return err
			}
		}
		return credit(tx, o.CustomerID, o.TotalCents-o.DiscountCents)
	})
}

// credit gives cents back to a customer.
func credit(tx *gorm.DB, customerID uint, cents int64) error {
	return tx.Exec("UPDATE customers SET credit_cents = credit_cents + ? WHERE id = ?", cents, customerID).Error // want `unguarded raw SQL UPDATE of versioned model db.Customer \(table customers\)`
}

// Forget deletes a customer's cancelled orders, with their lines.
func (s *Service) Forget(ctx context.Context, customerID uint) error {
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		sub := tx.Model(&db.Order{}).Select("id").Where("customer_id = ? AND status = ?", customerID, "cancelled")
		if err := tx.Where("order_id IN (?)", sub).Delete(&db.LineItem{}).Error; err != nil {
			return err
		}
		return tx.Where("customer_id = ? AND status = ?", customerID, "cancelled").Delete(&db.Order{}).Error // want `unguarded Delete of versioned model db.Order`
	})
}
