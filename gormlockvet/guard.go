package gormlockvet

import (
	"go/types"
	"regexp"

	"github.com/gormlock/gormlock/internal/sqlguard"
)

// The guard decision is internal/sqlguard's, the one strict mode
// (repository.StrictGORMWrites) makes of the same text at run time.

// condGuardsSQL reports whether a condition written for GORM's Where (or
// Delete's inline condition, or gorm.Expr) guards a write of m.
func condGuardsSQL(cond string, m *model) bool {
	return sqlguard.Guards(cond, m.verCol, m.table)
}

// postgresPlaceholder finds a $1 placeholder: raw SQL written for
// PostgreSQL.
var postgresPlaceholder = regexp.MustCompile(`\$[0-9]`)

// whereGuards reports whether the WHERE text of a raw statement guards a
// write of m: read as PostgreSQL's SQL when it has $n placeholders, else
// as GORM's (every database's reading).
func whereGuards(where string, m *model) bool {
	d := sqlguard.GORM
	if postgresPlaceholder.MatchString(where) {
		d = sqlguard.Postgres
	}
	return d.Guards(where, m.verCol, m.table)
}

func isString(t types.Type) bool {
	b, ok := t.Underlying().(*types.Basic)
	return ok && b.Info()&types.IsString != 0
}
