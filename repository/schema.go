package repository

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/gormlock/gormlock/locking"
)

// ErrSchemaMismatch means the table does not have what the repository needs;
// VerifySchema returns a *SchemaError matching it.
var ErrSchemaMismatch = errors.New("gormlock: schema mismatch")

// SchemaError lists every problem VerifySchema found in one table.
type SchemaError struct {
	Table    string
	Problems []string
}

// Error implements error.
func (e *SchemaError) Error() string {
	return fmt.Sprintf("gormlock: schema mismatch in table %s: %s", e.Table, strings.Join(e.Problems, "; "))
}

// Unwrap returns ErrSchemaMismatch.
func (e *SchemaError) Unwrap() error { return ErrSchemaMismatch }

// VerifySchema checks that T's table exists with every column the model maps,
// that the primary key column is the table's primary key, and that the version
// column is NOT NULL (a NULL version would match no guard and could never be
// written). It returns a *SchemaError listing every problem, or nil. Call it
// at start-up, after migrations.
//
// A failure to ask (ctx ended, the connection broke) is returned as such,
// never reported as a schema problem.
func (r *Repository[T]) VerifySchema(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: VerifySchema: %w", r.m.table, err)
	}
	db := r.DB(ctx)
	var zero T
	if !db.Migrator().HasTable(&zero) {
		// GORM's HasTable reports a failed query as "no table": ask
		// again in a way that returns the error.
		var one int
		if err := db.Raw("SELECT 1").Scan(&one).Error; err != nil {
			return fmt.Errorf("%s: VerifySchema: %w", r.m.table, locking.Classify(err))
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%s: VerifySchema: %w", r.m.table, err)
		}
		return &SchemaError{Table: r.m.table, Problems: []string{"table does not exist"}}
	}
	cols, err := db.Migrator().ColumnTypes(&zero)
	if err != nil {
		return fmt.Errorf("%s: VerifySchema: %w", r.m.table, locking.Classify(err))
	}
	byName := make(map[string]bool, len(cols))
	var problems []string
	for _, c := range cols {
		name := c.Name()
		byName[name] = true
		switch name {
		case r.m.version.DBName:
			if nullable, ok := c.Nullable(); ok && nullable {
				problems = append(problems, fmt.Sprintf("version column %s is nullable; it must be NOT NULL", name))
			}
		case r.m.pk.DBName:
			if pk, ok := c.PrimaryKey(); ok && !pk {
				problems = append(problems, fmt.Sprintf("column %s is not the primary key", name))
			}
		}
	}
	for _, f := range r.m.schema.Fields {
		if f.DBName != "" && !byName[f.DBName] {
			problems = append(problems, fmt.Sprintf("column %s (field %s) is missing", f.DBName, f.Name))
		}
	}
	if len(problems) > 0 {
		return &SchemaError{Table: r.m.table, Problems: problems}
	}
	return nil
}
