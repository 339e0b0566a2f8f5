package repository_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

// legacyToken is a table written before gormlock: its version column
// allows NULL, and old code left rows at 0 or NULL.
type legacyToken struct {
	ID          int64 `gorm:"primaryKey;autoIncrement:false"`
	Name        string
	RemainQuota int64
	Version     int64
}

// Rows a legacy writer left at version 0 or NULL are writable by Update,
// Mutate, Apply and ForceIncrement: Get reads them at version 0, the guard
// matches them, and the write gives them a real version, after which a copy
// read at 0 is stale. VerifySchema says how to make the column NOT NULL.
func TestLegacyRowsAtVersionZeroOrNull(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		require.NoError(t, db.Exec("CREATE TABLE legacy_tokens (id BIGINT PRIMARY KEY, name VARCHAR(100) NOT NULL, remain_quota BIGINT NOT NULL, version BIGINT NULL)").Error)
		for id, v := range map[int64]any{1: 0, 2: nil, 3: 0, 4: nil, 5: 0, 6: nil, 7: nil} {
			require.NoError(t, db.Exec("INSERT INTO legacy_tokens (id, name, remain_quota, version) VALUES (?, 'old', 10, ?)", id, v).Error)
		}
		tokens, err := repository.New[legacyToken](db)
		require.NoError(t, err)
		readVersion := func(id int64) (v *int64) {
			require.NoError(t, db.Raw("SELECT version FROM legacy_tokens WHERE id = ?", id).Row().Scan(&v))
			return v
		}

		for _, id := range []int64{1, 2} { // Update, at 0 and at NULL
			e, err := tokens.Get(ctx, id)
			require.NoError(t, err)
			require.Zero(t, e.Version, "a legacy record reads at version 0")
			old := *e
			e.Name = "new"
			require.NoError(t, tokens.Update(ctx, e))
			require.Positive(t, e.Version)
			require.Equal(t, e.Version, *readVersion(id), "the write gave the record a real version")
			old.Name = "stale"
			require.ErrorIs(t, tokens.Update(ctx, &old), locking.ErrStaleData, "a copy read at 0 is stale now")
		}
		for _, id := range []int64{3, 4} { // Mutate
			got, err := tokens.Mutate(ctx, id, func(e *legacyToken) error { e.RemainQuota--; return nil })
			require.NoError(t, err)
			require.EqualValues(t, 9, got.RemainQuota)
			v := readVersion(id)
			require.NotNil(t, v, "id %d: %+v", id, got)
			require.Equal(t, got.Version, *v)
		}
		for _, id := range []int64{5, 6} { // Apply
			got, err := tokens.Apply(ctx, id, []repository.Change{repository.Add("RemainQuota", -2)})
			require.NoError(t, err)
			require.EqualValues(t, 8, got.RemainQuota)
			require.Positive(t, *readVersion(id))
		}
		e, err := tokens.Get(ctx, int64(7)) // ForceIncrement
		require.NoError(t, err)
		require.NoError(t, tokens.ForceIncrement(ctx, e))
		require.Equal(t, e.Version, *readVersion(7))

		// The column allows NULL: VerifySchema refuses it and says how to
		// make it NOT NULL.
		err = tokens.VerifySchema(ctx)
		require.ErrorIs(t, err, locking.ErrSchemaMismatch)
		require.ErrorContains(t, err, "version column version is nullable; it must be NOT NULL")
		if db.Dialector.Name() != "sqlite" {
			require.ErrorContains(t, err, "WHERE")
			require.ErrorContains(t, err, "NOT NULL")
		}
	})
}
