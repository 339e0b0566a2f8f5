package migrations_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/migrations"
	"github.com/gormlock/gormlock/repository"
)

// account is a table another service inserts into with raw SQL, leaving
// the version to the column's default.
type account struct {
	ID          int64  `gorm:"column:id;primaryKey;autoIncrement"`
	Name        string `gorm:"column:name;size:100;not null"`
	RemainQuota int64  `gorm:"column:remain_quota;not null"`
	Version     int64  `gorm:"column:version;not null;default:1"`
}

func (account) TableName() string { return "accounts" }

func accountVersion(t *testing.T, db *gorm.DB, id int64) int64 {
	t.Helper()
	var v int64
	require.NoError(t, db.Raw("SELECT version FROM accounts WHERE id = ?", id).Scan(&v).Error)
	return v
}

// recreateAccount inserts account id with raw SQL, reads a copy with
// gormlock, deletes the row and inserts it again with the same SQL; then a
// guarded Update of the copy charges the quota down to 10. It returns the
// quota the row has after it and the Update's error.
func recreateAccount(t *testing.T, db *gorm.DB, id int64) (int64, error) {
	t.Helper()
	ctx := testdb.Ctx(t)
	accounts, err := repository.New[account](db)
	require.NoError(t, err)
	insert := "INSERT INTO accounts (id, name, remain_quota) VALUES (?, 'a', 500)"
	rawExec(t, db, 1, insert, id)
	stale, err := accounts.Get(ctx, id)
	require.NoError(t, err)
	rawExec(t, db, 1, "DELETE FROM accounts WHERE id = ?", id)
	rawExec(t, db, 1, insert, id)
	stale.RemainQuota = 10
	err = accounts.Update(ctx, stale)
	var quota int64
	require.NoError(t, db.Raw("SELECT remain_quota FROM accounts WHERE id = ?", id).Scan(&quota).Error)
	return quota, err
}

// TestVersionTriggerGivesInsertsAFirstVersion: with the trigger, a raw
// INSERT that leaves the version to its default (or writes a counter's 1)
// gets a clock reading, so a key deleted and inserted again never starts at
// a version a copy of the deleted row holds: the copy's guarded write is
// refused. The negative control, without the trigger, loses the quota.
func TestVersionTriggerGivesInsertsAFirstVersion(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		require.NoError(t, db.AutoMigrate(&account{}))
		quota, err := recreateAccount(t, db, 1)
		require.NoError(t, err, "the negative control: both rows at version 1")
		require.Equal(t, int64(10), quota, "the negative control: the new row's quota is overwritten")

		require.NoError(t, migrations.CreateVersionTrigger(ctx, db, &account{}))
		assert.Equal(t, int64(1), triggers(t, db, "gormlock_first_version_accounts"))
		floor := time.Now().Add(-time.Hour).UnixMicro()
		quota, err = recreateAccount(t, db, 2)
		require.ErrorIs(t, err, locking.ErrStaleData)
		require.Equal(t, int64(500), quota, "the new row keeps its quota")
		assert.Greater(t, accountVersion(t, db, 2), floor)

		// A counter's first version, and several rows in one INSERT.
		rawExec(t, db, 3, "INSERT INTO accounts (id, name, remain_quota, version) VALUES (3, 'c', 1, 1), (4, 'd', 1, 0), (5, 'e', 1, 2)")
		for id := int64(3); id <= 5; id++ {
			assert.Greater(t, accountVersion(t, db, id), floor, "account %d", id)
		}
		// A clock reading of the INSERT's own is kept (on SQLite, one above
		// the versions of the rows deleted before).
		own := time.Now().UnixMicro() + 1000
		rawExec(t, db, 1, "INSERT INTO accounts (id, name, remain_quota, version) VALUES (6, 'f', 1, ?)", own)
		assert.Equal(t, own, accountVersion(t, db, 6))

		// An upsert that updates is an UPDATE: the row already there is
		// advanced; one that inserts gets a first version.
		upsert := "INSERT INTO accounts (id, name, remain_quota) VALUES (?, 'g', 1) ON CONFLICT (id) DO UPDATE SET name = excluded.name"
		if db.Dialector.Name() == "mysql" {
			upsert = "INSERT INTO accounts (id, name, remain_quota) VALUES (?, 'g', 1) ON DUPLICATE KEY UPDATE name = VALUES(name)"
		}
		require.NoError(t, db.Exec(upsert, 6).Error)
		assert.Greater(t, accountVersion(t, db, 6), own)
		require.NoError(t, db.Exec(upsert, 7).Error)
		assert.Greater(t, accountVersion(t, db, 7), floor)

		// gormlock's Create, and its GORM plugin's, keep the version they
		// gave: the entity and the row agree.
		accounts, err := repository.New[account](db)
		require.NoError(t, err)
		made := &account{ID: 50, Name: "h", RemainQuota: 1}
		require.NoError(t, accounts.Create(ctx, made))
		assert.Equal(t, made.Version, accountVersion(t, db, made.ID))
		plugged := db.Session(&gorm.Session{NewDB: true})
		require.NoError(t, plugged.Use(repository.Plugin()))
		viaPlugin := &account{ID: 51, Name: "i", RemainQuota: 1}
		require.NoError(t, plugged.Select("ID", "Name", "RemainQuota").Create(viaPlugin).Error)
		assert.Equal(t, viaPlugin.Version, accountVersion(t, db, viaPlugin.ID))

		// Dropped, the INSERT trigger goes too.
		require.NoError(t, migrations.DropVersionTrigger(ctx, db, &account{}))
		assert.Zero(t, triggers(t, db, "gormlock_first_version_accounts"))
		rawExec(t, db, 1, "INSERT INTO accounts (id, name, remain_quota) VALUES (100, 'z', 1)")
		assert.Equal(t, int64(1), accountVersion(t, db, 100))
	})
}

// TestVersionTriggerRecreateAtOnce: a key inserted, updated, deleted and
// inserted again as fast as the database runs it (on SQLite many times
// within one millisecond of its clock), by raw SQL and by gormlock's
// Create in turn, starts above every version its earlier rows had, every
// round, and gormlock's Create keeps the version it gave.
func TestVersionTriggerRecreateAtOnce(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		require.NoError(t, db.AutoMigrate(&account{}))
		require.NoError(t, migrations.CreateVersionTrigger(ctx, db, &account{}))
		accounts, err := repository.New[account](db)
		require.NoError(t, err)
		insert := "INSERT INTO accounts (id, name, remain_quota) VALUES (1, 'a', 500)"
		var last int64
		for round := range 100 {
			// Every other round gormlock creates the record: the version
			// it gives is the one the row keeps.
			if round%2 == 1 {
				a := &account{ID: 1, Name: "a", RemainQuota: 500}
				require.NoError(t, accounts.Create(ctx, a))
				require.Equal(t, a.Version, accountVersion(t, db, 1), "round %d: Create's version is the row's", round)
			} else {
				rawExec(t, db, 1, insert)
			}
			first := accountVersion(t, db, 1)
			rawExec(t, db, 1, "UPDATE accounts SET remain_quota = remain_quota - 1 WHERE id = 1")
			second := accountVersion(t, db, 1)
			require.Greater(t, second, first, "round %d", round)
			require.Greater(t, first, last, "round %d: above every version of the rows before", round)
			rawExec(t, db, 1, "DELETE FROM accounts WHERE id = 1")
			last = second
		}
	})
}
