// Package jobs holds the nightly batch: it runs alone, on database/sql and
// GORM both.
package jobs

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"gorm.io/gorm"

	"example.com/storefront/db"
)

// Nightly is the batch.
type Nightly struct {
	DB  *gorm.DB
	SQL *sql.DB
	Log func(format string, args ...any)
}

// Run runs every step; it stops at the first that fails.
func (n *Nightly) Run(ctx context.Context, now time.Time) error {
	for name, step := range map[string]func(context.Context, time.Time) error{
		"grant monthly credit": n.grantCredit,
		"cancel stale orders":  n.cancelStale,
		"trim the audit trail": n.trimAudit,
		"refill partner calls": n.refillCalls,
	} {
		if err := step(ctx, now); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

// grantCredit gives the customers of the premium plan their monthly credit.
func (n *Nightly) grantCredit(ctx context.Context, now time.Time) error {
	if now.Day() != 1 {
		return nil
	}
	res, err := n.SQL.ExecContext(ctx, `UPDATE customers SET credit_cents = credit_cents + $1 WHERE plan = $2`, 500, "premium") // want `unguarded raw SQL UPDATE of versioned model db.Customer`
	if err != nil {
		return err
	}
	rows, _ := res.RowsAffected()
	n.Log("granted credit to %d customers", rows)
	return nil
}

// cancelStale cancels the orders left pending for a day.
func (n *Nightly) cancelStale(ctx context.Context, now time.Time) error {
	stale := n.DB.WithContext(ctx).Model(&db.Order{}).Where("status = ? AND created_at < ?", "pending", now.Add(-24*time.Hour))
	var count int64
	if err := stale.Count(&count).Error; err != nil || count == 0 {
		return err
	}
	return stale.Update("status", "cancelled").Error // want `unguarded Update of versioned model db.Order`
}

// trimAudit keeps a year of the audit trail.
func (n *Nightly) trimAudit(ctx context.Context, now time.Time) error {
	if err := n.DB.WithContext(ctx).Where("at < ?", now.AddDate(-1, 0, 0)).Delete(&db.AuditEntry{}).Error; err != nil {
		return err
	}
	_, err := n.SQL.ExecContext(ctx, "DELETE FROM order_lines WHERE order_id NOT IN (SELECT id FROM orders)")
	return err
}

// refillCalls gives every partner token its daily calls back. The tokens
// are only metered in the daytime; nothing else writes them at night.
func (n *Nightly) refillCalls(ctx context.Context, _ time.Time) error {
	//gormlockvet:ignore the batch runs alone: the API is closed during it
	return n.DB.WithContext(ctx).Session(&gorm.Session{AllowGlobalUpdate: true}).Model(&db.APIToken{}).Update("calls_left", 1000).Error
}
