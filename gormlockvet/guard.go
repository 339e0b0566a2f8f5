package gormlockvet

import (
	"go/types"

	"github.com/gormlock/gormlock/gormlockvet/internal/sqltext"
)

// sqlGuards reports whether the SQL condition cond is guarded by an
// equality on column joined by AND at its top level.
func sqlGuards(cond, column string) bool { return sqltext.Guards(cond, column) }

func isString(t types.Type) bool {
	b, ok := t.Underlying().(*types.Basic)
	return ok && b.Info()&types.IsString != 0
}
