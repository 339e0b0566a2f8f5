package repository_test

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/repository"
)

// pluginFlaky is a model whose AfterUpdate hook fails while failAfterUpdate
// is set: GORM then rolls its default transaction back.
type pluginFlaky struct {
	ID   int64 `gorm:"primaryKey"`
	Name string
	models.Versioned
}

func (pluginFlaky) TableName() string { return "plugin_flaky" }

var failAfterUpdate atomic.Bool

var errHookFailed = errors.New("the AfterUpdate hook failed")

func (pluginFlaky) AfterUpdate(*gorm.DB) error {
	if failAfterUpdate.Load() {
		return errHookFailed
	}
	return nil
}

// A plain GORM update the plugin guarded (GuardGORMUpdates) that GORM's
// default transaction rolled back leaves the record with the version the
// row still holds: saving it again is guarded by that version and
// succeeds, where the version of the update rolled back made it stale. An
// update without GORM's transaction committed by itself, and the record
// keeps its new version.
func TestPluginUpdateRolledBackKeepsTheRecordsVersion(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		require.NoError(t, db.AutoMigrate(&pluginFlaky{}))
		require.NoError(t, db.Use(repository.Plugin(repository.GuardGORMUpdates())))
		ctx := testdb.Ctx(t)
		flaky := mustRepo[pluginFlaky](t, db)
		row := func(id int64) (r pluginFlaky) {
			require.NoError(t, db.Raw("SELECT id, name, version FROM plugin_flaky WHERE id = ?", id).Scan(&r).Error)
			return r
		}
		t.Cleanup(func() { failAfterUpdate.Store(false) })

		t.Run("default transaction", func(t *testing.T) {
			rec := &pluginFlaky{ID: 1, Name: "first"}
			require.NoError(t, flaky.Create(ctx, rec))
			before := row(rec.ID)

			failAfterUpdate.Store(true)
			rec.Name = "second"
			err := db.Save(rec).Error
			failAfterUpdate.Store(false)
			require.ErrorIs(t, err, errHookFailed)
			require.Equal(t, before, row(rec.ID), "the update was rolled back")
			require.Equal(t, before.Version, rec.Version, "the record says the version the row holds")

			// Saved again, guarded by that version.
			require.NoError(t, db.Save(rec).Error)
			after := row(rec.ID)
			require.Equal(t, "second", after.Name)
			require.Greater(t, after.Version, before.Version)
			require.Equal(t, after.Version, rec.Version)

			// Still guarded: a copy from before the save is stale.
			old := before
			old.Name = "third"
			require.ErrorIs(t, db.Save(&old).Error, locking.ErrStaleData)
			require.Equal(t, after, row(rec.ID))
		})

		t.Run("no transaction of GORM's", func(t *testing.T) {
			rec := &pluginFlaky{ID: 2, Name: "first"}
			require.NoError(t, flaky.Create(ctx, rec))
			before := row(rec.ID)

			failAfterUpdate.Store(true)
			rec.Name = "second"
			err := db.Session(&gorm.Session{SkipDefaultTransaction: true}).Save(rec).Error
			failAfterUpdate.Store(false)
			require.ErrorIs(t, err, errHookFailed)
			after := row(rec.ID)
			require.Equal(t, "second", after.Name, "the update committed by itself")
			require.Greater(t, after.Version, before.Version)
			require.Equal(t, after.Version, rec.Version, "the record says the version the row holds")
		})
	})
}
