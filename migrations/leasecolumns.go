package migrations

import (
	"context"
	"fmt"
	"strings"

	"gorm.io/gorm"

	caps "github.com/gormlock/gormlock/internal/dialect"
	"github.com/gormlock/gormlock/locking"
)

// AddLeaseColumns adds to model's table the columns a repository built
// with repository.WithLeasesInRow keeps the record's lease in:
// gormlock_lease_owner, gormlock_lease_token (the SHA-256 of the holder's
// token; NULL while no lease is held), gormlock_lease_fence (BIGINT NOT
// NULL DEFAULT 0), gormlock_lease_acquired_ms and gormlock_lease_expires_ms
// (by the database's clock). Columns the table has already are left as they
// are, so running it again changes nothing. The model needs no fields for
// them: GORM never reads or writes them.
//
// On SQLite and PostgreSQL the columns are added in one transaction; on
// MySQL and MariaDB, whose DDL commits by itself, one after another. Adding
// a nullable column or one with a constant default rewrites no rows on
// PostgreSQL 11 or later, SQLite and MariaDB 10.3 or later (instant ALTER).
// A nil db or model is an error matching locking.ErrInvalidArgument, a
// dialect other than sqlite, postgres and mysql one matching
// locking.ErrNotSupported.
func AddLeaseColumns(ctx context.Context, db *gorm.DB, model any) error {
	table, err := leaseTable(db, model, "AddLeaseColumns")
	if err != nil {
		return err
	}
	name := db.Dialector.Name()
	add := func(tx *gorm.DB) error {
		m := tx.Migrator()
		for _, c := range caps.LeaseColumns(name) {
			if m.HasColumn(table, c[0]) {
				continue
			}
			stmt := "ALTER TABLE " + quote(tx, table) + " ADD COLUMN " + quote(tx, c[0]) + " " + c[1]
			if err := tx.Exec(stmt).Error; err != nil {
				return fmt.Errorf("migrations: AddLeaseColumns %s: %s: %w", table, c[0], locking.Classify(err))
			}
		}
		return nil
	}
	db = db.WithContext(ctx)
	if name == caps.MySQL {
		return add(db)
	}
	return db.Transaction(add)
}

// DropLeaseColumns drops the columns AddLeaseColumns added to model's
// table; columns already gone are skipped. It refuses what AddLeaseColumns
// refuses.
func DropLeaseColumns(ctx context.Context, db *gorm.DB, model any) error {
	table, err := leaseTable(db, model, "DropLeaseColumns")
	if err != nil {
		return err
	}
	db = db.WithContext(ctx)
	m := db.Migrator()
	for _, c := range caps.LeaseColumns(db.Dialector.Name()) {
		if !m.HasColumn(table, c[0]) {
			continue
		}
		if err := db.Exec("ALTER TABLE " + quote(db, table) + " DROP COLUMN " + quote(db, c[0])).Error; err != nil {
			return fmt.Errorf("migrations: DropLeaseColumns %s: %s: %w", table, c[0], locking.Classify(err))
		}
	}
	return nil
}

// leaseTable checks db and model and returns model's table.
func leaseTable(db *gorm.DB, model any, op string) (string, error) {
	if db == nil || db.Config == nil || db.Dialector == nil || db.Statement == nil {
		return "", locking.Invalid("migrations: %s: db is nil or not opened with gorm.Open", op)
	}
	if model == nil {
		return "", locking.Invalid("migrations: %s: model is nil", op)
	}
	if _, ok := dialects[db.Dialector.Name()]; !ok {
		return "", fmt.Errorf("migrations: %w: %s: dialect %q", locking.ErrNotSupported, op, db.Dialector.Name())
	}
	stmt := &gorm.Statement{DB: db}
	if err := stmt.Parse(model); err != nil {
		return "", locking.Invalid("migrations: %s: %v", op, err)
	}
	return stmt.Schema.Table, nil
}

// quote quotes an identifier for db's dialect.
func quote(db *gorm.DB, name string) string {
	var b strings.Builder
	db.Dialector.QuoteTo(&b, name)
	return b.String()
}
