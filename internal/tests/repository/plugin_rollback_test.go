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
	ID       int64 `gorm:"primaryKey"`
	Name     string
	Children []pluginFlakyChild `gorm:"foreignKey:ParentID"`
	models.Versioned
}

// pluginFlakyChild is written with its parent (an association).
type pluginFlakyChild struct {
	ID       int64 `gorm:"primaryKey"`
	ParentID int64
	Name     string
	models.Versioned
}

func (pluginFlakyChild) TableName() string { return "plugin_flaky_children" }

func (pluginFlaky) TableName() string { return "plugin_flaky" }

var failAfterUpdate, failAfterCreate atomic.Bool

func (pluginFlaky) AfterCreate(*gorm.DB) error {
	if failAfterCreate.Load() {
		return errHookFailed
	}
	return nil
}

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
		require.NoError(t, db.AutoMigrate(&pluginFlaky{}, &pluginFlakyChild{}))
		require.NoError(t, db.Use(repository.Plugin(repository.GuardGORMUpdates())))
		ctx := testdb.Ctx(t)
		flaky := mustRepo[pluginFlaky](t, db)
		row := func(id int64) (r pluginFlaky) {
			require.NoError(t, db.Raw("SELECT id, name, version FROM plugin_flaky WHERE id = ?", id).Scan(&r).Error)
			return r
		}
		t.Cleanup(func() { failAfterUpdate.Store(false); failAfterCreate.Store(false) })

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

		t.Run("create", func(t *testing.T) {
			rec := &pluginFlaky{ID: 3, Name: "first"}
			failAfterCreate.Store(true)
			err := db.Create(rec).Error
			failAfterCreate.Store(false)
			require.ErrorIs(t, err, errHookFailed)
			var n int64
			require.NoError(t, db.Raw("SELECT count(*) FROM plugin_flaky WHERE id = ?", rec.ID).Scan(&n).Error)
			require.Zero(t, n, "the create was rolled back")
			require.Zero(t, rec.Version, "the record holds no version, as it has no row")
			require.NoError(t, db.Save(rec).Error, "saved again, the record is created")
			require.NotZero(t, rec.Version)
			require.Equal(t, rec.Version, row(rec.ID).Version)
		})

		t.Run("association", func(t *testing.T) {
			rec := &pluginFlaky{ID: 4, Name: "first"}
			require.NoError(t, flaky.Create(ctx, rec))
			before := row(rec.ID)
			rec.Name = "second"
			rec.Children = []pluginFlakyChild{{ID: 40, Name: "child"}}
			failAfterUpdate.Store(true)
			err := db.Save(rec).Error
			failAfterUpdate.Store(false)
			require.ErrorIs(t, err, errHookFailed)
			require.Equal(t, before, row(rec.ID))
			require.Equal(t, before.Version, rec.Version)
			var n int64
			require.NoError(t, db.Raw("SELECT count(*) FROM plugin_flaky_children WHERE id = 40").Scan(&n).Error)
			require.Zero(t, n, "the association's create was rolled back")
			require.Zero(t, rec.Children[0].Version, "the child holds no version, as it has no row")

			require.NoError(t, db.Save(rec).Error)
			require.Equal(t, rec.Version, row(rec.ID).Version)
			var childVersion int64
			require.NoError(t, db.Raw("SELECT version FROM plugin_flaky_children WHERE id = 40").Scan(&childVersion).Error)
			require.NotZero(t, childVersion)
			require.Equal(t, childVersion, rec.Children[0].Version)
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
