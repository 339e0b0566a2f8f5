package shop

import (
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"example.com/app/model"
)

// GORM's clause expressions that guard: an Eq of the version column and
// one value, joined by AND, however it reaches the WHERE.
func clauseGuarded(db *gorm.DB, id uint, v int64) {
	db.Model(&model.Token{}).Where(clause.Eq{Column: "version", Value: v}).Update("name", "x")
	db.Model(&model.Token{}).Where("id = ?", id).Clauses(clause.Where{Exprs: []clause.Expression{
		clause.Eq{Column: clause.Column{Table: clause.CurrentTable, Name: "version"}, Value: v},
	}}).Update("name", "x")
	db.Model(&model.Token{}).Where(clause.And(clause.Eq{Column: "id", Value: id}, clause.Eq{Column: "version", Value: v})).Update("name", "x")
	db.Model(&model.Token{}).Clauses(clause.Returning{}, clause.Expr{SQL: "version = ?", Vars: []any{v}}).Where("id = ?", id).Update("name", "x")
	db.Where(clause.Eq{Column: "id", Value: id}, clause.Eq{Column: "tokens.version", Value: v}).Delete(&model.Token{})
	db.Model(&model.Tagged{}).Where(clause.Eq{Column: clause.Column{Table: "taggeds", Name: "rev"}, Value: v}).Update("n", 1)
}

// And those that do not.
func clauseUnguarded(db *gorm.DB, id uint, v int64, exprs []clause.Expression) {
	db.Model(&model.Token{}).Where(clause.Eq{Column: "version", Value: []int64{v, v + 1}}).Update("name", "x")                                // want `unguarded Update of versioned model model.Token .*: no condition on its version column \(version\) guards it`
	db.Model(&model.Token{}).Where(clause.Eq{Column: "version"}).Update("name", "x")                                                          // want `unguarded Update of versioned model model.Token`
	db.Model(&model.Token{}).Where(clause.Neq{Column: "version", Value: v}).Update("name", "x")                                               // want `unguarded Update of versioned model model.Token`
	db.Model(&model.Token{}).Where(clause.Eq{Column: "subversion", Value: v}).Update("name", "x")                                             // want `unguarded Update of versioned model model.Token`
	db.Model(&model.Token{}).Where(clause.Eq{Column: clause.Column{Table: "orders", Name: "version"}, Value: v}).Update("name", "x")          // want `unguarded Update of versioned model model.Token`
	db.Model(&model.Token{}).Where(clause.Or(clause.Eq{Column: "version", Value: v}, clause.Eq{Column: "id", Value: id})).Update("name", "x") // want `unguarded Update of versioned model model.Token .*Or joins its conditions`
	db.Model(&model.Token{}).Clauses(clause.Where{Exprs: []clause.Expression{
		clause.Eq{Column: "version", Value: v},
		clause.Or(clause.Eq{Column: "id", Value: id}),
	}}).Update("name", "x") // want `unguarded Update of versioned model model.Token .*: its version condition is joined to the others by OR`
	db.Model(&model.Token{}).Where(clause.And(clause.Eq{Column: "version", Value: v}, clause.Or(clause.Eq{Column: "id", Value: id}))).Update("name", "x") // want `unguarded Update of versioned model model.Token`
	db.Model(&model.Token{}).Clauses(clause.Where{Exprs: exprs}).Update("name", "x")                                                                      // want `unguarded Update of versioned model model.Token`
	db.Model(&model.Token{}).Clauses(clause.Locking{Strength: "UPDATE"}).Where("id = ?", id).Update("name", "x")                                          // want `unguarded Update of versioned model model.Token`
}
