package repository

import (
	"testing"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Only gormlock's own guards (column = plain value) leave a write Keyed,
// sent on SQLite with a context that does not end (store.Detach); anything
// GORM writes as SQL of the caller's does not.
func TestPlainEqualities(t *testing.T) {
	col := clause.Column{Name: "title"}
	for _, c := range []struct {
		name  string
		conds []clause.Expression
		want  bool
	}{
		{"none", nil, true},
		{"a value", []clause.Expression{clause.Eq{Column: col, Value: "x"}}, true},
		{"bytes", []clause.Expression{clause.Eq{Column: col, Value: []byte("x")}}, true},
		{"NULL", []clause.Expression{clause.Eq{Column: col, Value: nil}}, true},
		{"a column by name", []clause.Expression{clause.Eq{Column: "title", Value: 1}}, true},
		{"a raw column", []clause.Expression{clause.Eq{Column: clause.Column{Name: "(SELECT 1)", Raw: true}, Value: 1}}, false},
		{"an expression value", []clause.Expression{clause.Eq{Column: col, Value: gorm.Expr("(SELECT 1)")}}, false},
		{"a subquery value", []clause.Expression{clause.Eq{Column: col, Value: &gorm.DB{}}}, false},
		{"a list", []clause.Expression{clause.Eq{Column: col, Value: []any{gorm.Expr("1")}}}, false},
		{"a hook's Where", []clause.Expression{clause.Expr{SQL: "title = ?", Vars: []any{"x"}}}, false},
		{"one of two", []clause.Expression{clause.Eq{Column: col, Value: "x"}, clause.Expr{SQL: "1 = 1"}}, false},
	} {
		if got := plainEqualities(c.conds); got != c.want {
			t.Errorf("%s: plainEqualities = %v, want %v", c.name, got, c.want)
		}
	}
}
