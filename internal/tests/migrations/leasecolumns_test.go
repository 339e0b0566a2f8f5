package migrations_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/migrations"
	"github.com/gormlock/gormlock/models"
)

var leaseColumns = []string{"gormlock_lease_owner", "gormlock_lease_token", "gormlock_lease_fence", "gormlock_lease_acquired_ms", "gormlock_lease_expires_ms"}

// AddLeaseColumns adds the five lease columns to the model's table, keeps
// its rows (a fence of 0, no lease), changes nothing when run again, and
// DropLeaseColumns takes them away; bad arguments are refused.
func TestAddLeaseColumns(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		require.NoError(t, db.Create(&fixtures.Account{Owner: "before", Model: models.Model{Versioned: models.Versioned{Version: 1}}}).Error)
		has := func() (n int) {
			for _, c := range leaseColumns {
				if db.Migrator().HasColumn("accounts", c) {
					n++
				}
			}
			return n
		}
		require.Zero(t, has())
		require.NoError(t, migrations.AddLeaseColumns(ctx, db, &fixtures.Account{}))
		assert.Equal(t, len(leaseColumns), has())
		require.NoError(t, migrations.AddLeaseColumns(ctx, db, &fixtures.Account{}), "again: nothing to add")
		var row struct {
			Owner string
			Fence int64
			Token *string
		}
		require.NoError(t, db.Raw("SELECT owner, gormlock_lease_fence AS fence, gormlock_lease_token AS token FROM accounts").Scan(&row).Error)
		assert.Equal(t, "before", row.Owner)
		assert.Zero(t, row.Fence)
		assert.Nil(t, row.Token, "no lease held")
		require.NoError(t, db.Create(&fixtures.Account{Owner: "after", Model: models.Model{Versioned: models.Versioned{Version: 1}}}).Error, "the model has no fields for them, and GORM writes the rest")

		require.NoError(t, migrations.DropLeaseColumns(ctx, db, &fixtures.Account{}))
		assert.Zero(t, has())
		require.NoError(t, migrations.DropLeaseColumns(ctx, db, &fixtures.Account{}), "again: nothing to drop")

		require.ErrorIs(t, migrations.AddLeaseColumns(ctx, db, nil), locking.ErrInvalidArgument)
		require.ErrorIs(t, migrations.AddLeaseColumns(ctx, nil, &fixtures.Account{}), locking.ErrInvalidArgument)
		require.ErrorIs(t, migrations.AddLeaseColumns(ctx, db, 42), locking.ErrInvalidArgument)
	})
}
