package shop

import (
	"context"

	"gorm.io/gorm"

	"example.com/app/model"
	"github.com/gormlock/gormlock/repository"
)

// Guarded writes, in every form strict mode accepts.
func guarded(db *gorm.DB, id uint, v int64, t *model.Token) {
	db.Model(&model.Token{}).Where("id = ? AND version = ?", id, v).Update("name", "x")
	db.Model(&model.Token{}).Where("id = ?", id).Where("version = ?", v).Update("name", "x")
	db.Model(&model.Token{}).Where("tokens.version = ?", v).Update("name", "x")
	db.Model(&model.Token{}).Where(map[string]any{"id": id, "version": v}).Update("name", "x")
	db.Model(&model.Token{}).Where(&model.Token{Versioning: t.Versioning}).Update("name", "x")
	db.Model(&model.Tagged{}).Where("rev = ?", v).Update("n", 1)
	db.Model(&model.Plain{}).Where("version", v).Update("n", 1)
	db.Model(&model.Token{}).Where(gorm.Expr("version = ?", v)).Update("name", "x")
	db.Model(&model.Token{}).Where(db.Where("version = ?", v).Where("id = ?", id)).Update("name", "x")
	db.Delete(&model.Token{}, "id = ? AND version = ?", id, v)
	db.Where("version = ?", t.Version).Save(t)
	cond := "version = ?"
	db.Model(&model.Token{}).Where(cond, v).Delete(&model.Token{})
	q := db.Model(&model.Token{})
	q = q.Where("version = ?", v)
	q.Update("name", "y")
}

// Reads, creates, unversioned models, and gormlock's own calls.
func silent(ctx context.Context, db *gorm.DB, tokens *repository.Repository[model.Token], id uint) error {
	var t model.Token
	db.First(&t, id)
	db.Model(&model.Token{}).Where("id = ?", id).Find(&t)
	db.Create(&model.Token{Name: "x"})
	db.Model(&model.Log{}).Where("id = ?", id).Update("msg", "x")
	db.Save(&model.Log{ID: 1})
	db.Delete(&model.Log{}, 1)
	db.Model(&model.Note{}).Where("id = ?", id).Update("body", "x")
	db.Model(&model.Hidden{}).Where("id = ?", id).Update("n", 1)
	db.Model(&model.ReadOnly{}).Where("id = ?", id).Update("n", 1)
	db.Exec("UPDATE logs SET msg = ? WHERE id = ?", "x", id)
	db.Exec("SELECT * FROM tokens WHERE id = ? FOR UPDATE", id)
	db.Exec("UPDATE notes SET body = 'UPDATE tokens SET name = 1' WHERE id = ?", id)
	if _, err := tokens.Mutate(ctx, int64(id), func(t *model.Token) error { t.Name = "x"; return nil }); err != nil {
		return err
	}
	if _, err := tokens.Apply(ctx, int64(id), []repository.Change{repository.Add("RemainQuota", 1)}); err != nil {
		return err
	}
	return tokens.Delete(ctx, &t)
}

// Deliberate unguarded writes, marked.
func marked(db *gorm.DB, owner string) {
	//gormlockvet:ignore test cleanup, nothing runs beside it
	db.Where("owner = ?", owner).Delete(&model.Account{})
	db.Exec("DELETE FROM accounts WHERE owner = ?", owner) //gormlockvet:ignore test cleanup
}
