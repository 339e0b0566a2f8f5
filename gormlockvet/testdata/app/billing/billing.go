// Package billing charges tokens with gorm.Expr increments: where the
// rewrite to Repository.Apply is mechanical, the report carries it.
package billing

import (
	"context"

	"gorm.io/gorm"

	"example.com/app/model"
	"github.com/gormlock/gormlock/repository"
)

// Service holds one repository of each model.
type Service struct {
	db     *gorm.DB
	tokens *repository.Repository[model.Token]
}

// Charge has everything the fix needs: a fix.
func (s *Service) Charge(ctx context.Context, id uint, n int64) error {
	err := s.db.WithContext(ctx).Model(&model.Token{}).Where("id = ?", id).Update("remain_quota", gorm.Expr("remain_quota - ?", n)).Error // want `unguarded Update of versioned model model.Token .*Repository\[Token\].Apply\(ctx, id, \[\]repository.Change\{repository.Add\("RemainQuota", -n\)\}\)`
	return err
}

// Refund returns the error directly: a fix.
func Refund(ctx context.Context, db *gorm.DB, accounts *repository.Repository[model.Account], id int64, n int64) error {
	return db.Model(&model.Account{}).Where("id = ?", id).UpdateColumn("balance", gorm.Expr("balance + ?", n*2)).Error // want `unguarded UpdateColumn of versioned model model.Account .*repository.Add\("Balance", n \* 2\)`
}

// Use tests the error in an if: a fix.
func Use(ctx context.Context, db *gorm.DB, tokens *repository.Repository[model.Token], id uint, n int64) error {
	if err := db.Model(&model.Token{}).Where("id = ?", id).Update("used_quota", gorm.Expr("used_quota + ?", n)).Error; err != nil { // want `unguarded Update of versioned model model.Token .*repository.Add\("UsedQuota", n\)`
		return err
	}
	return nil
}

// NoRepository has no repository in reach: no fix.
func NoRepository(ctx context.Context, db *gorm.DB, id uint, n int64) error {
	return db.Model(&model.Token{}).Where("id = ?", id).Update("remain_quota", gorm.Expr("remain_quota - ?", n)).Error // want `unguarded Update of versioned model model.Token .*Apply`
}

// NotByKey writes the records a Where other than the key selects: no fix.
func NotByKey(ctx context.Context, db *gorm.DB, tokens *repository.Repository[model.Token], key string, n int64) error {
	return db.Model(&model.Token{}).Where("key = ?", key).Update("remain_quota", gorm.Expr("remain_quota - ?", n)).Error // want `unguarded Update of versioned model model.Token .*Apply`
}

// TwoRepositories has two repositories of the model: no fix.
func TwoRepositories(ctx context.Context, db *gorm.DB, a, b *repository.Repository[model.Token], id uint, n int64) error {
	return db.Model(&model.Token{}).Where("id = ?", id).Update("remain_quota", gorm.Expr("remain_quota - ?", n)).Error // want `unguarded Update of versioned model model.Token .*Apply`
}

// Unsigned deltas cannot be negated: no fix.
func Unsigned(ctx context.Context, db *gorm.DB, tokens *repository.Repository[model.Token], id uint, n uint) error {
	return db.Model(&model.Token{}).Where("id = ?", id).Update("remain_quota", gorm.Expr("remain_quota - ?", n)).Error // want `unguarded Update of versioned model model.Token .*Apply`
}

// Other expressions than an increment get Mutate: no fix.
func Other(ctx context.Context, db *gorm.DB, tokens *repository.Repository[model.Token], id uint) error {
	return db.Model(&model.Token{}).Where("id = ?", id).Update("remain_quota", gorm.Expr("remain_quota * 2")).Error // want `unguarded Update of versioned model model.Token .*Mutate`
}
