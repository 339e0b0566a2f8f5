package migrations

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
	"gorm.io/gorm"
)

// ErrTableExists means that a table one of gormlock's migrations creates
// exists already with other columns than the migration creates, so Up can
// neither create it nor take it as created. Drop or rename that table.
var ErrTableExists = errors.New("migrations: table exists with other columns")

// table is a table a migration creates, with its columns.
type table struct {
	name    string
	columns []string
}

// created lists, by version, the table each migration creates, for adopting
// a table that exists already (see Up). A migration not listed is never
// adopted. The columns are those of the migration's CREATE TABLE; a test
// checks them against the tables Up creates.
var created = map[int64]table{
	1: {"gormlock_leases", []string{"resource", "record_key", "owner", "token_hash", "fence", "acquired_ms", "expires_ms"}},
	2: {"gormlock_operations", []string{"op_key", "resource", "record_key", "kind", "version", "fingerprint", "created_ms", "expires_ms"}},
}

// adopt records as applied, in VersionTable, the pending migrations whose
// tables exist already with the migration's columns, oldest first, up to
// the first pending migration whose table is missing. A table with other
// columns is an error matching ErrTableExists, and nothing is recorded.
func adopt(ctx context.Context, db *gorm.DB, p *goose.Provider) error {
	status, err := p.Status(ctx)
	if err != nil {
		return err
	}
	var found []int64
	for _, s := range status {
		if s.State == goose.StateApplied {
			continue
		}
		t, ok := created[s.Source.Version]
		if !ok {
			break
		}
		have, exists, err := columnsOf(ctx, db, t.name)
		if err != nil {
			return err
		}
		if !exists {
			break
		}
		if problems := compareColumns(t.columns, have); len(problems) > 0 {
			return fmt.Errorf("%w: table %s exists and is not the one migration %d creates: %s; drop or rename it",
				ErrTableExists, t.name, s.Source.Version, strings.Join(problems, "; "))
		}
		found = append(found, s.Source.Version)
	}
	if len(found) == 0 {
		return nil
	}
	store, err := database.NewStore(dialects[db.Dialector.Name()], VersionTable)
	if err != nil {
		return err
	}
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	tx, err := sqlDB.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	for _, v := range found {
		if err := store.Insert(ctx, tx, database.InsertRequest{Version: v}); err != nil {
			return fmt.Errorf("record existing table %s as migration %d: %w", created[v].name, v, err)
		}
	}
	return tx.Commit()
}

// columnsOf returns the column names of the table name, and whether it
// exists.
func columnsOf(ctx context.Context, db *gorm.DB, name string) ([]string, bool, error) {
	m := db.WithContext(ctx).Migrator()
	if !m.HasTable(name) {
		// GORM's HasTable reports a failed query as "no table"; Up's
		// next step reports that failure.
		return nil, false, nil
	}
	cols, err := m.ColumnTypes(name)
	if err != nil {
		return nil, false, err
	}
	names := make([]string, 0, len(cols))
	for _, c := range cols {
		names = append(names, c.Name())
	}
	return names, true, nil
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
