package accounts

import (
	"context"
	"time"

	"gorm.io/gorm"

	"example.com/storefront/db"
)

// Tokens checks and meters the partners' API tokens.
type Tokens struct {
	db *gorm.DB
}

// Check reads the token of a key.
func (t *Tokens) Check(ctx context.Context, key string) (*db.APIToken, error) {
	var tok db.APIToken
	err := t.db.WithContext(ctx).Where("key = ? AND NOT revoked", key).First(&tok).Error
	return &tok, err
}

// Meter counts one call: the partner's calls race each other on the row.
func (t *Tokens) Meter(ctx context.Context, tok *db.APIToken, now time.Time) error {
	q := t.db.WithContext(ctx).Table("partner_tokens").Where("id = ?", tok.ID)
	if tok.CallsLeft > 0 {
		return q.Updates(map[string]any{"calls_left": gorm.Expr("calls_left - 1"), "last_used_at": now}).Error // want `unguarded Updates of versioned model db.APIToken \(table partner_tokens\) through Table\("partner_tokens"\): no condition on its version column \(revision\) guards it`
	}
	return q.Update("last_used_at", now).Error // want `unguarded Update of versioned model db.APIToken`
}

// Rotate replaces a token's key, unless it changed since it was read.
func (t *Tokens) Rotate(ctx context.Context, tok *db.APIToken, key string) error {
	return t.db.WithContext(ctx).Model(&db.APIToken{}).
		Where("id = ? AND revision = ?", tok.ID, tok.Revision).
		Updates(map[string]any{"key": key, "revision": tok.Revision + 1}).Error
}

// RevokeAll revokes every token of a customer who left.
func (t *Tokens) RevokeAll(ctx context.Context, customerID uint) error {
	return t.db.WithContext(ctx).Exec(`UPDATE partner_tokens SET revoked = TRUE WHERE customer_id = ?`, customerID).Error // want `unguarded raw SQL UPDATE of versioned model db.APIToken \(table partner_tokens\) through Exec: no condition on its version column \(revision\)`
}

// Expire deletes the tokens unused for a year.
func (t *Tokens) Expire(ctx context.Context, before time.Time) (int64, error) {
	res := t.db.WithContext(ctx).Where("last_used_at < ?", before).Delete(&db.APIToken{}) // want `unguarded Delete of versioned model db.APIToken`
	return res.RowsAffected, res.Error
}
