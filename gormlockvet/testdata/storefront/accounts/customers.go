// Package accounts keeps the customers, their store credit and their
// partners' API tokens.
package accounts

import (
	"context"
	"errors"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"example.com/storefront/db"
	"github.com/gormlock/gormlock/repository"
)

// Customers reads and writes customers.
type Customers struct {
	db   *gorm.DB
	repo *repository.Repository[db.Customer]
}

// NewCustomers returns the customers' store on conn.
func NewCustomers(conn *gorm.DB) (*Customers, error) {
	repo, err := repository.New[db.Customer](conn)
	if err != nil {
		return nil, err
	}
	return &Customers{db: conn, repo: repo}, nil
}

// byEmail is the chain of one customer, by the address they sign in with.
func (c *Customers) byEmail(ctx context.Context, email string) *gorm.DB {
	return c.db.WithContext(ctx).Model(&db.Customer{}).Where("email = ?", email)
}

// ByEmail reads a customer.
func (c *Customers) ByEmail(ctx context.Context, email string) (*db.Customer, error) {
	var out db.Customer
	err := c.byEmail(ctx, email).Take(&out).Error
	return &out, err
}

// SetPassword stores a new password hash after a reset by e-mail.
func (c *Customers) SetPassword(ctx context.Context, email, hash string) error {
	return c.byEmail(ctx, email).Update("password_hash", hash).Error // want `unguarded Update of versioned model db.Customer \(table customers\) through Model\(&db.Customer\{\}\)`
}

// Rename changes the name on the profile page, as the page read it.
func (c *Customers) Rename(ctx context.Context, cu *db.Customer, name string) error {
	return c.db.WithContext(ctx).Model(&db.Customer{}).
		Where(&db.Customer{ID: cu.ID, Version: cu.Version}).
		Updates(map[string]any{"name": name, "version": cu.Version + 1}).Error
}

// ChangePlan moves a customer to another plan, checked by a clause the
// way the billing team writes its queries.
func (c *Customers) ChangePlan(ctx context.Context, cu *db.Customer, plan string) error {
	res := c.db.WithContext(ctx).Model(&db.Customer{}).
		Clauses(clause.Where{Exprs: []clause.Expression{
			clause.Eq{Column: "id", Value: cu.ID},
			clause.Eq{Column: "version", Value: cu.Version},
		}}).
		Updates(map[string]any{"plan": plan, "version": cu.Version + 1})
	if res.RowsAffected == 0 && res.Error == nil {
		return errors.New("accounts: the customer changed since it was read")
	}
	return res.Error
}

// TopUp adds store credit the customer bought.
func (c *Customers) TopUp(ctx context.Context, id uint, cents int64) (*db.Customer, error) {
	return c.repo.Apply(ctx, id, []repository.Change{repository.Add("CreditCents", cents)})
}

// Refund gives credit back after a complaint.
func (c *Customers) Refund(ctx context.Context, id uint, cents int64) error {
	err := c.db.WithContext(ctx).Model(&db.Customer{}).Where("id = ?", id).UpdateColumn("credit_cents", gorm.Expr("credit_cents + ?", cents)).Error // want `unguarded UpdateColumn of versioned model db.Customer .*Repository\[Customer\].Apply\(ctx, id, \[\]repository.Change\{repository.Add\("CreditCents", cents\)\}\)`
	return err
}

// Disable blocks a customer; support may disable one the customer is
// editing at the same moment.
func (c *Customers) Disable(ctx context.Context, id uint) error {
	_, err := c.repo.Mutate(ctx, id, func(cu *db.Customer) error {
		cu.Disabled = true
		return nil
	})
	return err
}

// Merge moves what a duplicate account had to the one kept.
func (c *Customers) Merge(ctx context.Context, keep, dup *db.Customer) error {
	return c.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Model(&db.Order{}).Where("customer_id = ?", dup.ID).Update("customer_id", keep.ID).Error; err != nil { // want `unguarded Update of versioned model db.Order`
			return err
		}
		keep.CreditCents += dup.CreditCents
		if err := tx.Save(keep).Error; err != nil { // want `unguarded Save of versioned model db.Customer \(table customers\) through Save\(keep\): .*inserts the record again`
			return err
		}
		return tx.Delete(dup).Error // want `unguarded Delete of versioned model db.Customer .* through Delete\(dup\)`
	})
}
