package repository

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/dialect"
	"github.com/gormlock/gormlock/internal/store"
	"github.com/gormlock/gormlock/locking"
)

// SchemaError lists every problem VerifySchema found in one table. It
// matches locking.ErrSchemaMismatch.
type SchemaError struct {
	Table    string
	Problems []string
}

// notNullAdvice says how to make the version column col NOT NULL on the
// database in use, giving rows without a version a real one first.
func (r *Repository[T]) notNullAdvice(col string) string {
	q := func(name string) string {
		var b strings.Builder
		r.st.Gorm.Dialector.QuoteTo(&b, name)
		return b.String()
	}
	t, v := q(r.m.table), q(col)
	switch r.m.caps.Dialector() {
	case dialect.Postgres:
		return fmt.Sprintf("give rows without a version one, then forbid NULL: UPDATE %s SET %s = (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT WHERE %s IS NULL OR %s = 0; ALTER TABLE %s ALTER COLUMN %s SET NOT NULL", t, v, v, v, t, v)
	case dialect.MySQL:
		return fmt.Sprintf("give rows without a version one, then forbid NULL: UPDATE %s SET %s = %s WHERE %s IS NULL OR %s = 0; ALTER TABLE %s MODIFY %s BIGINT NOT NULL", t, v, dialect.MySQLClockMicros, v, v, t, v)
	}
	return fmt.Sprintf("SQLite cannot add NOT NULL to a column in place: create the table again with %s BIGINT NOT NULL and copy the rows, giving those without a version one (CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER))", v)
}

// Error implements error.
func (e *SchemaError) Error() string {
	return fmt.Sprintf("gormlock: schema mismatch in table %s: %s", e.Table, strings.Join(e.Problems, "; "))
}

// Unwrap returns locking.ErrSchemaMismatch.
func (e *SchemaError) Unwrap() error { return locking.ErrSchemaMismatch }

// VerifySchema checks that T's table exists with every column the model maps,
// that the primary key column is the table's primary key, and that the version
// column is NOT NULL. Guarded writes do write a record a legacy writer left
// at version NULL (or 0): Get reads it at version 0, and the write gives it a
// real version. But only a NOT NULL column keeps other writers from leaving
// such records; for a nullable one the error says how to make it NOT NULL,
// on the database in use.
//
// With leases in the record's row (WithLeasesInRow) it checks that T's table
// has the lease columns migrations.AddLeaseColumns adds, the token's
// nullable. With leases on (WithLeases, WithLeaseTTL) it checks the lease table,
// LeaseTable, too: that it exists with every column gormlock uses, that
// (resource, record_key) is its primary key, and that token_hash accepts NULL
// (releasing a lease writes it). Without the table every guarded write of the
// repository would fail.
//
// It returns a *SchemaError listing every problem of a table, both joined
// (errors.Join) when both tables have problems, or nil; every such error
// matches locking.ErrSchemaMismatch. Call it at start-up, after migrations.
//
// It does not check the operation table: operation keys are chosen per call
// (OpKey), so a repository cannot tell whether it will need it. Call
// VerifyOperationSchema at start-up when you use them.
//
// A failure to ask (ctx ended, the connection broke) is returned as such,
// never reported as a schema problem.
func (r *Repository[T]) VerifySchema(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: VerifySchema: %w", r.m.table, err)
	}
	db := r.DB(ctx)
	entity, err := r.verifyEntityTable(ctx, db)
	if err != nil {
		return fmt.Errorf("%s: VerifySchema: %w", r.m.table, err)
	}
	if r.leases == nil {
		return schemaErr(entity)
	}
	if r.m.leases.row != nil {
		if entity, err = r.verifyLeaseColumns(db, entity); err != nil {
			return fmt.Errorf("%s: VerifySchema: %w", r.m.table, err)
		}
		return schemaErr(entity)
	}
	lease, err := verifyOwnTable(ctx, db, leaseTableSpec)
	if err != nil {
		return fmt.Errorf("%s: VerifySchema: %w", r.m.table, err)
	}
	switch {
	case entity != nil && lease != nil:
		return errors.Join(entity, lease)
	case lease != nil:
		return lease
	}
	return schemaErr(entity)
}

// schemaErr returns e as an error: nil when e is nil.
func schemaErr(e *SchemaError) error {
	if e == nil {
		return nil
	}
	return e
}

// verifyEntityTable returns the problems of T's table, or a failure to ask.
func (r *Repository[T]) verifyEntityTable(ctx context.Context, db *gorm.DB) (*SchemaError, error) {
	var zero T
	if !db.Migrator().HasTable(&zero) {
		if err := askable(ctx, db); err != nil {
			return nil, err
		}
		return &SchemaError{Table: r.m.table, Problems: []string{"table does not exist"}}, nil
	}
	cols, err := db.Migrator().ColumnTypes(&zero)
	if err != nil {
		return nil, locking.Classify(err)
	}
	byName := make(map[string]bool, len(cols))
	keyCol := make(map[string]bool, len(r.m.pks))
	for _, f := range r.m.pks {
		keyCol[f.DBName] = true
	}
	var problems []string
	for _, c := range cols {
		name := c.Name()
		byName[name] = true
		switch {
		case name == r.m.version.DBName:
			if nullable, ok := c.Nullable(); ok && nullable {
				problems = append(problems, fmt.Sprintf("version column %s is nullable; it must be NOT NULL: %s", name, r.notNullAdvice(name)))
			}
		case keyCol[name]:
			if pk, ok := c.PrimaryKey(); ok && !pk {
				problems = append(problems, fmt.Sprintf("column %s is not (part of) the primary key", name))
			}
		}
	}
	for _, f := range r.m.schema.Fields {
		if f.DBName != "" && !byName[f.DBName] {
			problems = append(problems, fmt.Sprintf("column %s (field %s) is missing", f.DBName, f.Name))
		}
	}
	if len(problems) > 0 {
		return &SchemaError{Table: r.m.table, Problems: problems}, nil
	}
	return nil, nil
}

// askable returns nil when db answers a query, and the classified failure
// (or ctx's error) otherwise. GORM's HasTable reports a failed query as "no
// table": this tells the two apart.
func askable(ctx context.Context, db *gorm.DB) error {
	var one int
	if err := db.Raw("SELECT 1").Scan(&one).Error; err != nil {
		return locking.Classify(err)
	}
	return ctx.Err()
}

// VerifyOperationSchema checks the operation table, OperationTable, that
// writes with an operation key (OpKey), LookupOperation and PurgeOperations
// use: that it exists in db with every column gormlock uses and that op_key
// is its primary key. It returns a *SchemaError listing every problem
// (matching locking.ErrSchemaMismatch), or nil. Call it at start-up, after
// migrations, when you use operation keys; VerifySchema does not check this
// table. ctx governs the queries; a failure to ask is returned as such.
func VerifyOperationSchema(ctx context.Context, db *gorm.DB) error {
	s, err := store.Of(db, "VerifyOperationSchema")
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("VerifyOperationSchema: %w", err)
	}
	conn, _ := s.Conn(ctx)
	problems, err := verifyOwnTable(ctx, conn.WithContext(ctx), operationTableSpec)
	if err != nil {
		return fmt.Errorf("VerifyOperationSchema: %w", err)
	}
	return schemaErr(problems)
}

// ownTable is what gormlock needs of one of its own tables.
type ownTable struct {
	name     string
	columns  []string // every column gormlock reads or writes
	key      []string // the primary key's columns
	nullable []string // the columns gormlock writes NULL into
}

// The lease and operation tables as the migrations create them.
var (
	leaseTableSpec = ownTable{
		name:     LeaseTable,
		columns:  []string{"resource", "record_key", "owner", "token_hash", "fence", "acquired_ms", "expires_ms"},
		key:      []string{"resource", "record_key"},
		nullable: []string{"token_hash"},
	}
	operationTableSpec = ownTable{
		name:    OperationTable,
		columns: []string{"op_key", "resource", "record_key", "kind", "version", "fingerprint", "created_ms", "expires_ms"},
		key:     []string{"op_key"},
	}
)

// ownColumn is one column of a table as the database describes it.
type ownColumn struct {
	notNull bool
	pk      bool
}

// verifyOwnTable returns the problems of the table spec names, or a failure
// to ask.
func verifyOwnTable(ctx context.Context, db *gorm.DB, spec ownTable) (*SchemaError, error) {
	if !db.Migrator().HasTable(spec.name) {
		if err := askable(ctx, db); err != nil {
			return nil, err
		}
		return &SchemaError{Table: spec.name, Problems: []string{"table does not exist"}}, nil
	}
	cols, err := describe(db, spec.name)
	if err != nil {
		return nil, locking.Classify(err)
	}
	var problems []string
	for _, name := range spec.columns {
		c, ok := cols[name]
		if !ok {
			problems = append(problems, fmt.Sprintf("column %s is missing", name))
			continue
		}
		if slices.Contains(spec.nullable, name) && c.notNull {
			problems = append(problems, fmt.Sprintf("column %s is NOT NULL; gormlock writes NULL into it", name))
		}
	}
	var key []string
	for name, c := range cols {
		if c.pk {
			key = append(key, name)
		}
	}
	slices.Sort(key)
	if want := slices.Sorted(slices.Values(spec.key)); !slices.Equal(key, want) {
		problem := "the primary key must be (" + strings.Join(spec.key, ", ") + ")"
		if len(key) == 0 {
			problem += "; the table has none"
		} else {
			problem += ", not (" + strings.Join(key, ", ") + ")"
		}
		problems = append(problems, problem)
	}
	if len(problems) > 0 {
		return &SchemaError{Table: spec.name, Problems: problems}, nil
	}
	return nil, nil
}

// describe returns the columns of table by name. SQLite's own description
// (PRAGMA table_info) is read directly: GORM's SQLite driver parses the
// CREATE TABLE text instead, and misreads one with comments (as the
// migrations' are).
func describe(db *gorm.DB, table string) (map[string]ownColumn, error) {
	out := map[string]ownColumn{}
	if db.Dialector.Name() == "sqlite" {
		var rows []struct {
			Name    string
			NotNull bool
			PK      int
		}
		err := db.Raw(`SELECT name, "notnull" AS not_null, pk FROM pragma_table_info(?)`, table).Scan(&rows).Error
		for _, r := range rows {
			out[r.Name] = ownColumn{notNull: r.NotNull, pk: r.PK > 0}
		}
		return out, err
	}
	cols, err := db.Migrator().ColumnTypes(table)
	for _, c := range cols {
		nullable, _ := c.Nullable()
		pk, _ := c.PrimaryKey()
		out[c.Name()] = ownColumn{notNull: !nullable, pk: pk}
	}
	return out, err
}
