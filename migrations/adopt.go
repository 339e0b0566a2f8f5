package migrations

import (
	"fmt"
	"slices"
	"strings"

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/locking"
)

// table is a table a migration creates, with its columns.
type table struct {
	name    string
	columns []string
}

// created lists, by version, the table each migration creates, for adopting
// a table that exists already (see Up). A migration not listed is never
// adopted. The columns are those of the migration's CREATE TABLE.
var created = map[int64]table{
	1: {"gormlock_leases", []string{"resource", "record_key", "owner", "token_hash", "fence", "acquired_ms", "expires_ms"}},
	2: {"gormlock_operations", []string{"op_key", "resource", "record_key", "kind", "version", "fingerprint", "created_ms", "expires_ms"}},
}

// adoptable reports whether the table migration version creates exists
// already with the migration's columns, so that Up records the migration
// instead of running it. A table of that name with other columns is an
// error matching locking.ErrSchemaMismatch, naming the differences.
func (r *runner) adoptable(tx *gorm.DB, version int64) (bool, error) {
	t, ok := created[version]
	if !ok {
		return false, nil
	}
	exists, err := r.tableExists(tx, t.name)
	if err != nil || !exists {
		return false, err
	}
	cols, err := tx.Migrator().ColumnTypes(t.name)
	if err != nil {
		return false, fmt.Errorf("read the columns of %s: %w", t.name, locking.Classify(err))
	}
	have := make([]string, 0, len(cols))
	for _, c := range cols {
		have = append(have, c.Name())
	}
	if problems := compareColumns(t.columns, have); len(problems) > 0 {
		return false, fmt.Errorf("migrations: %w: table %s exists and is not the one migration %d creates: %s; drop or rename it",
			locking.ErrSchemaMismatch, t.name, version, strings.Join(problems, "; "))
	}
	return true, nil
}

// compareColumns lists how the columns have differ from want.
func compareColumns(want, have []string) []string {
	var problems []string
	for _, c := range want {
		if !slices.Contains(have, c) {
			problems = append(problems, "column "+c+" is missing")
		}
	}
	for _, c := range have {
		if !slices.Contains(want, c) {
			problems = append(problems, "column "+c+" is not the migration's")
		}
	}
	return problems
}
