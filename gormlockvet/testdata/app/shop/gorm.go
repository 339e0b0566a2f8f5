// Package shop writes the models of package model in every way GORM and
// raw SQL allow: each unguarded write carries the report it must get.
package shop

import (
	"context"

	"gorm.io/gorm"

	"example.com/app/model"
)

// Through Model, of every kind.

func chargeByID(db *gorm.DB, id uint, n int64) error {
	return db.Model(&model.Token{}).Where("id = ?", id).Update("remain_quota", gorm.Expr("remain_quota - ?", n)).Error // want `unguarded Update of versioned model model.Token \(table tokens\) through Model\(&model.Token\{\}\): no condition on its version column \(version\) guards it, so it can erase a concurrent change; write it with Repository\[Token\].Apply\(ctx, id, \[\]repository.Change\{repository.Add\("RemainQuota", -n\)\}\)`
}

func rename(db *gorm.DB, t *model.Token, name string) error {
	return db.Model(t).Updates(map[string]any{"name": name}).Error // want `unguarded Updates of versioned model model.Token .* through Model\(t\): .*Mutate.*GuardGORMUpdates\(\)\) guards this call only where it is registered`
}

func renameAll(db *gorm.DB, ts []model.Token) error {
	return db.Model(&ts).Update("name", "x").Error // want `unguarded Update of versioned model model.Token .* through Model\(&ts\)`
}

func column(db *gorm.DB, id int64) {
	db.Model(&model.Account{}).Where("id = ?", id).UpdateColumn("balance", 0)                 // want `unguarded UpdateColumn of versioned model model.Account \(table accounts\)`
	db.Model(&model.Account{}).Where("id = ?", id).UpdateColumns(map[string]any{"owner": ""}) // want `unguarded UpdateColumns of versioned model model.Account`
	db.Model(&model.Doc{}).Where("id = ?", id).Updates(model.Doc{Title: "t"})                 // want `unguarded Updates of versioned model model.Doc \(table docs\)`
	db.Model(&model.Tagged{}).Where("id = ?", id).Update("n", 1)                              // want `unguarded Update of versioned model model.Tagged \(table taggeds\) through .*: no condition on its version column \(rev\)`
	db.Model(&model.Plain{}).Where("id = ?", id).Update("n", 1)                               // want `unguarded Update of versioned model model.Plain \(table plains\)`
	db.Model(&model.Custom{}).Where("id = ?", id).Update("n", 1)                              // want `unguarded Update of versioned model model.Custom \(table custom_things\)`
}

// Save and Delete name the model by their value.

func save(db *gorm.DB, t *model.Token) error {
	return db.Save(t).Error // want `unguarded Save of versioned model model.Token .* through Save\(t\): .*Repository\[Token\].Update.*inserts the record again`
}

func deletes(db *gorm.DB, id uint, t *model.Token) {
	db.Delete(&model.Token{}, id)                             // want `unguarded Delete of versioned model model.Token .* through Delete\(&model.Token\{\}\): .*Repository\[Token\].Delete`
	db.Delete(t)                                              // want `unguarded Delete of versioned model model.Token`
	db.Where("key = ?", "k").Delete(&model.Token{})           // want `unguarded Delete of versioned model model.Token`
	db.Delete(&model.Token{}, "id = ? OR version = ?", id, 3) // want `unguarded Delete of versioned model model.Token`
}

func updatesValue(db *gorm.DB, a *model.Account) {
	db.Where("id = ?", a.ID).Updates(a) // want `unguarded Updates of versioned model model.Account .* through Updates\(a\)`
}

// Conditions that guard nothing.

func orJoined(db *gorm.DB, id uint, v int64) {
	db.Model(&model.Token{}).Where("version = ?", v).Or("id = ?", id).Update("name", "x")           // want `unguarded Update of versioned model model.Token .*: its version condition is joined to the others by OR`
	db.Model(&model.Token{}).Where("id = ? OR version = ?", id, v).Update("name", "x")              // want `unguarded Update of versioned model model.Token`
	db.Model(&model.Token{}).Not("version = ?", v).Where("id = ?", id).Update("name", "x")          // want `unguarded Update of versioned model model.Token`
	db.Model(&model.Token{}).Where("note <> 'version = 1'").Where("id = ?", id).Update("name", "x") // want `unguarded Update of versioned model model.Token`
	db.Model(&model.Token{}).Where("subversion = ?", v).Update("name", "x")                         // want `unguarded Update of versioned model model.Token`
	db.Model(&model.Token{}).Where("id = ? /* AND version = ? */", id).Update("name", "x")          // want `unguarded Update of versioned model model.Token`
	db.Model(&model.Tagged{}).Where("version = ?", v).Update("n", 1)                                // want `unguarded Update of versioned model model.Tagged`
}

// Chains kept in variables, built in branches, passed around.

func variables(db *gorm.DB, id uint, byKey bool) {
	q := db.Model(&model.Token{})
	if byKey {
		q = q.Where("key = ?", "k")
	} else {
		q = q.Where("id = ?", id)
	}
	q.Update("name", "x") // want `unguarded Update of versioned model model.Token`

	g := db.Model(&model.Token{}).Where("version = ?", 1)
	if byKey {
		g = db.Model(&model.Token{}).Where("id = ?", id) // the unguarded branch
	}
	g.Update("name", "y") // want `unguarded Update of versioned model model.Token`
}

func tokens(db *gorm.DB) *gorm.DB { return db.Model(&model.Token{}) }

func byID(db *gorm.DB, id uint) *gorm.DB { return db.Where("id = ?", id) }

func helpers(db *gorm.DB, id uint) {
	byID(tokens(db), id).Update("name", "x") // want `unguarded Update of versioned model model.Token`
}

func apply(q *gorm.DB) {
	q.Update("name", "x") // want `unguarded Update of versioned model model.Token .* \(the \*gorm.DB is the one passed at gorm.go:\d+\)`
}

func passes(db *gorm.DB, id uint) {
	apply(db.Model(&model.Token{}).Where("id = ?", id))
}

func inTransaction(ctx context.Context, db *gorm.DB, id uint) error {
	return db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		return tx.Model(&model.Account{}).Where("id = ?", id).Update("balance", gorm.Expr("balance + ?", 5)).Error // want `unguarded Update of versioned model model.Account .*Apply\(ctx, id, \[\]repository.Change\{repository.Add\("Balance", 5\)\}\)`
	})
}

func captured(db *gorm.DB, id uint) func() {
	q := db.Model(&model.Token{}).Where("id = ?", id)
	return func() {
		q.Update("name", "x") // want `unguarded Update of versioned model model.Token`
	}
}

func scoped(db *gorm.DB, id uint) {
	db.Scopes(func(d *gorm.DB) *gorm.DB { return d.Model(&model.Token{}) }).Where("id = ?", id).Update("name", "x") // want `unguarded Update of versioned model model.Token`
}

// Table names a versioned model's table, in this package or another.

func tables(db *gorm.DB, id uint) {
	db.Table("tokens").Where("id = ?", id).Updates(map[string]any{"name": "x"}) // want `unguarded Updates of versioned model model.Token \(table tokens\) through Table\("tokens"\)`
	db.Table("custom_things").Where("id = ?", id).Delete(nil)                   // want `unguarded Delete of versioned model model.Custom`
	db.Table("logs").Where("id = ?", id).Updates(map[string]any{"msg": "x"})
}

// The generic API.

func generic(ctx context.Context, db *gorm.DB, id uint) {
	gorm.G[model.Token](db).Where("id = ?", id).Update(ctx, "name", "x") // want `unguarded Update of versioned model model.Token`
	gorm.G[model.Token](db).Where("id = ?", id).Delete(ctx)              // want `unguarded Delete of versioned model model.Token`
	gorm.G[model.Token](db).Where("id = ? AND version = ?", id, 4).Update(ctx, "name", "x")
	gorm.G[model.Log](db).Where("id = ?", id).Update(ctx, "msg", "x")
}

// Scopes made by a function of the package.

func atVersion(v int64) func(*gorm.DB) *gorm.DB {
	return func(d *gorm.DB) *gorm.DB { return d.Where("version = ?", v) }
}

func byKey(key string) func(*gorm.DB) *gorm.DB {
	return func(d *gorm.DB) *gorm.DB { return d.Where("key = ?", key) }
}

func scopeFactories(db *gorm.DB, id uint, v int64) {
	db.Model(&model.Token{}).Scopes(atVersion(v)).Where("id = ?", id).Update("name", "x")
	db.Model(&model.Token{}).Scopes(byKey("k")).Update("name", "x") // want `unguarded Update of versioned model model.Token`
}
