package repository_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

// quotaToken is the table as an application declares it: the
// version column has a default, 1, which an INSERT that leaves the column
// out gives every incarnation of a key.
type quotaToken struct {
	ID          int64  `gorm:"column:id;primaryKey;autoIncrement"`
	Name        string `gorm:"column:name;size:100;not null"`
	Note        string `gorm:"column:note;size:100"`
	RemainQuota int64  `gorm:"column:remain_quota;not null"`
	Version     int64  `gorm:"column:version;not null;default:1"`
}

func (quotaToken) TableName() string { return "quota_tokens" }

// quotaCreates are the plain GORM ways of creating quota token id with a
// remaining quota of 500; stale is a copy of the record's earlier
// incarnation, which an application may well create again (for the first
// incarnation, a new record at version 0).
var quotaCreates = map[string]func(db *gorm.DB, id int64, stale quotaToken) error{
	"Select": func(db *gorm.DB, id int64, _ quotaToken) error {
		return db.Select("ID", "Name", "RemainQuota").Create(&quotaToken{ID: id, Name: "t", RemainQuota: 500}).Error
	},
	"Select by column": func(db *gorm.DB, id int64, _ quotaToken) error {
		return db.Select("id", "name", "remain_quota").Create(&quotaToken{ID: id, Name: "t", RemainQuota: 500}).Error
	},
	"Omit the version": func(db *gorm.DB, id int64, _ quotaToken) error {
		return db.Omit("Version").Create(&quotaToken{ID: id, Name: "t", RemainQuota: 500}).Error
	},
	"Omit the version column": func(db *gorm.DB, id int64, _ quotaToken) error {
		return db.Omit("quota_tokens.version", "note").Create(&quotaToken{ID: id, Name: "t", RemainQuota: 500}).Error
	},
	"map": func(db *gorm.DB, id int64, _ quotaToken) error {
		return db.Model(&quotaToken{}).Create(map[string]any{"id": id, "name": "t", "remain_quota": 500}).Error
	},
	"map with Select": func(db *gorm.DB, id int64, _ quotaToken) error {
		return db.Model(&quotaToken{}).Select("id", "name", "remain_quota").
			Create(map[string]any{"id": id, "name": "t", "remain_quota": 500, "version": 1}).Error
	},
	"map with a version": func(db *gorm.DB, id int64, stale quotaToken) error {
		return db.Model(&quotaToken{}).Create(map[string]any{"id": id, "name": "t", "remain_quota": 500, "Version": stale.Version}).Error
	},
	"map with an expression for the version": func(db *gorm.DB, id int64, _ quotaToken) error {
		return db.Model(&quotaToken{}).Create(map[string]any{"id": id, "name": "t", "remain_quota": 500, "version": gorm.Expr("?", 1)}).Error
	},
	"CreateInBatches with Select": func(db *gorm.DB, id int64, _ quotaToken) error {
		batch := []quotaToken{{ID: id, Name: "t", RemainQuota: 500}}
		return db.Select("ID", "Name", "RemainQuota").CreateInBatches(&batch, 10).Error
	},
	"FirstOrCreate": func(db *gorm.DB, id int64, _ quotaToken) error {
		return db.Attrs(quotaToken{Name: "t", RemainQuota: 500}).FirstOrCreate(&quotaToken{}, quotaToken{ID: id}).Error
	},
	"FirstOrCreate by version": func(db *gorm.DB, id int64, stale quotaToken) error {
		// FirstOrCreate copies the conditions into the record it creates.
		return db.Where(map[string]any{"id": id, "version": stale.Version}).
			Attrs(quotaToken{Name: "t", RemainQuota: 500}).FirstOrCreate(&quotaToken{}).Error
	},
	"the deleted record's copy": func(db *gorm.DB, _ int64, stale quotaToken) error {
		again := stale
		again.RemainQuota = 500
		return db.Create(&again).Error
	},
	"upsert doing nothing": func(db *gorm.DB, id int64, _ quotaToken) error {
		return db.Clauses(clause.OnConflict{DoNothing: true}).Select("ID", "Name", "RemainQuota").
			Create(&quotaToken{ID: id, Name: "t", RemainQuota: 500}).Error
	},
	"upsert updating": func(db *gorm.DB, id int64, _ quotaToken) error {
		return db.Clauses(clause.OnConflict{UpdateAll: true}).Omit("Version").
			Create(&quotaToken{ID: id, Name: "t", RemainQuota: 500}).Error
	},
	"Save": func(db *gorm.DB, id int64, _ quotaToken) error {
		return db.Save(&quotaToken{ID: id, Name: "t", RemainQuota: 500}).Error
	},
}

// recreateQuotaToken creates token id with create, reads a copy, deletes
// the record with plain GORM and creates it again the same way (from the
// copy, where create takes one); then a guarded Update of the copy charges
// the quota down to 10.
// It returns the quota the record has after it and the Update's error.
func recreateQuotaToken(t *testing.T, db *gorm.DB, id int64, create func(*gorm.DB, int64, quotaToken) error) (int64, error) {
	t.Helper()
	ctx := testdb.Ctx(t)
	tokens := mustRepo[quotaToken](t, db)
	require.NoError(t, create(db, id, quotaToken{ID: id, Name: "t", RemainQuota: 500}), "the first incarnation")
	stale, err := tokens.Get(ctx, id)
	require.NoError(t, err)
	require.NoError(t, db.Delete(&quotaToken{}, id).Error)
	require.NoError(t, create(db, id, *stale), "the second incarnation")
	now, err := tokens.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, int64(500), now.RemainQuota)
	stale.RemainQuota = 10
	err = tokens.Update(ctx, stale)
	var quota int64
	require.NoError(t, db.Raw("SELECT remain_quota FROM quota_tokens WHERE id = ?", id).Scan(&quota).Error)
	return quota, err
}

// TestPluginRecreatedKeyGetsANewVersion: whichever way plain GORM creates a
// record again after a delete, the new record gets a version never used
// before, so a copy of the deleted one is refused as stale instead of
// overwriting it. The negative control, without the plugin, loses the
// quota: both incarnations are at the column's default.
func TestPluginRecreatedKeyGetsANewVersion(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		require.NoError(t, db.AutoMigrate(&quotaToken{}))
		plain := db.Session(&gorm.Session{NewDB: true})
		quota, err := recreateQuotaToken(t, plain, 1, quotaCreates["Select"])
		require.NoError(t, err, "the negative control: without the plugin the copy passes the guard")
		require.Equal(t, int64(10), quota, "the negative control: the new record's quota is overwritten")

		require.NoError(t, db.Use(repository.Plugin()))
		id := int64(100)
		for name, create := range quotaCreates {
			id++
			t.Run(name, func(t *testing.T) {
				quota, err := recreateQuotaToken(t, db, id, create)
				require.ErrorIs(t, err, locking.ErrStaleData)
				require.Equal(t, int64(500), quota, "the new record keeps its quota")
			})
		}
	})
}

// TestPluginCreateKeepsSelectAndOmit: the plugin adds the version to a
// create's Select (removes it from its Omit) for that statement only: the
// other columns stay as the caller chose, and a *gorm.DB used again builds
// its next statement from the caller's lists.
func TestPluginCreateKeepsSelectAndOmit(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		require.NoError(t, db.AutoMigrate(&quotaToken{}))
		require.NoError(t, db.Use(repository.Plugin()))
		sel := db.Select("ID", "Name", "RemainQuota")
		a := quotaToken{ID: 1, Name: "a", Note: "left out", RemainQuota: 5}
		require.NoError(t, sel.Create(&a).Error)
		require.Equal(t, []string{"ID", "Name", "RemainQuota"}, sel.Statement.Selects)
		var row quotaToken
		require.NoError(t, db.Raw("SELECT * FROM quota_tokens WHERE id = 1").Scan(&row).Error)
		require.Equal(t, "", row.Note, "a column the Select leaves out stays out")
		require.Equal(t, a.Version, row.Version, "the entity holds the version the row has")
		require.Greater(t, row.Version, int64(1))

		om := db.Omit("Version", "Note")
		b := quotaToken{ID: 2, Name: "b", Note: "left out", RemainQuota: 5}
		require.NoError(t, om.Create(&b).Error)
		require.Equal(t, []string{"Version", "Note"}, om.Statement.Omits)
		require.NoError(t, db.Raw("SELECT * FROM quota_tokens WHERE id = 2").Scan(&row).Error)
		require.Equal(t, "", row.Note)
		require.Equal(t, b.Version, row.Version)
		require.Greater(t, row.Version, a.Version)
	})
}

// quotaCode is a model GORM creates from a []map: none of its columns has
// a default the database fills in (GORM 1.30 fails to scan those back into
// a slice of maps, with or without the plugin).
type quotaCode struct {
	Code        string `gorm:"column:code;primaryKey;size:20"`
	RemainQuota int64  `gorm:"column:remain_quota;not null"`
	Version     int64  `gorm:"column:version;not null"`
}

func (quotaCode) TableName() string { return "quota_codes" }

// TestPluginCreateFromMapsGivesNewVersions: records created from a []map
// each get a version never used before, also when the maps carry the
// version of a deleted record with the same key.
func TestPluginCreateFromMapsGivesNewVersions(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		require.NoError(t, db.AutoMigrate(&quotaCode{}))
		require.NoError(t, db.Use(repository.Plugin()))
		ctx := testdb.Ctx(t)
		codes := mustRepo[quotaCode](t, db)
		rows := []map[string]any{{"code": "a", "remain_quota": 500}, {"code": "b", "remain_quota": 500}}
		require.NoError(t, db.Model(&quotaCode{}).Create(rows).Error)
		a, err := codes.Get(ctx, "a")
		require.NoError(t, err)
		b, err := codes.Get(ctx, "b")
		require.NoError(t, err)
		require.NotEqual(t, a.Version, b.Version)
		require.Equal(t, a.Version, rows[0]["version"], "the map holds the version the row has")

		require.NoError(t, db.Where("code IN ?", []string{"a", "b"}).Delete(&quotaCode{}).Error)
		again := []map[string]any{
			{"code": "a", "remain_quota": 500, "version": a.Version},
			{"code": "b", "remain_quota": 500, "Version": b.Version},
		}
		require.NoError(t, db.Model(&quotaCode{}).Create(&again).Error)
		for _, stale := range []*quotaCode{a, b} {
			stale.RemainQuota = 10
			require.ErrorIs(t, codes.Update(ctx, stale), locking.ErrStaleData, stale.Code)
			now, err := codes.Get(ctx, stale.Code)
			require.NoError(t, err)
			require.Equal(t, int64(500), now.RemainQuota, stale.Code)
			require.Greater(t, now.Version, stale.Version, stale.Code)
		}
	})
}
