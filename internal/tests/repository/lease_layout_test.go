package repository_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/migrations"
	"github.com/gormlock/gormlock/repository"
)

// The lease layouts every lease suite runs on: the lease table
// (WithLeases) and the record's own row (WithLeasesInRow, its columns
// added with migrations.AddLeaseColumns).
var leaseLayouts = []string{"table", "row"}

// leaseLayout prepares db for layout and returns the option that turns
// leases on in it.
func leaseLayout(t testing.TB, db *gorm.DB, layout string) repository.Option {
	t.Helper()
	if layout == "table" {
		return repository.WithLeases()
	}
	for _, m := range []any{&fixtures.Account{}, &fixtures.Document{}} {
		require.NoError(t, migrations.AddLeaseColumns(context.Background(), db, m))
	}
	return repository.WithLeasesInRow()
}

// eachLeaseLayout runs fn on every database in each lease layout.
func eachLeaseLayout(t *testing.T, fn func(t *testing.T, db *gorm.DB, withLeases repository.Option)) {
	t.Helper()
	for _, layout := range leaseLayouts {
		t.Run(layout, func(t *testing.T) {
			testdb.Each(t, func(t *testing.T, db *gorm.DB) {
				fn(t, db, leaseLayout(t, db, layout))
			})
		})
	}
}

// leasesInRow reports whether db was prepared for the row layout: its
// documents table has the lease columns.
func leasesInRow(db *gorm.DB) bool {
	return db.Migrator().HasColumn("documents", "gormlock_lease_token")
}

// VerifySchema of a repository with leases in the row reports the lease
// columns the table lacks, and nothing once migrations.AddLeaseColumns
// added them; it does not need the lease table.
func TestVerifySchemaChecksTheLeaseColumns(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		accounts, err := repository.New[fixtures.Account](db, repository.WithLeasesInRow())
		require.NoError(t, err)
		err = accounts.VerifySchema(ctx)
		require.ErrorIs(t, err, locking.ErrSchemaMismatch)
		require.ErrorContains(t, err, "column gormlock_lease_token is missing")
		require.NoError(t, migrations.AddLeaseColumns(ctx, db, &fixtures.Account{}))
		require.NoError(t, db.Exec("DROP TABLE gormlock_leases").Error)
		require.NoError(t, accounts.VerifySchema(ctx))
	})
}
