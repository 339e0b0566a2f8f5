package repository_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/logger"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/repository"
)

// pluginToken is the table: a quota that billing charges with
// plain GORM while an editor writes the record with gormlock.
type pluginToken struct {
	ID          int64  `gorm:"column:id;primaryKey;autoIncrement"`
	Name        string `gorm:"column:name;size:100;not null"`
	Status      int    `gorm:"column:status;not null"`
	RemainQuota int64  `gorm:"column:remain_quota;not null"`
	models.Versioned
}

func (pluginToken) TableName() string { return "plugin_tokens" }

// pluginItem is an existing GORM application's model: gorm.Model (soft
// delete), a version tagged under another name, and a BeforeUpdate hook
// that counts its calls.
type pluginItem struct {
	gorm.Model
	Rev   int64 `gormlock:"version" gorm:"not null;default:1"`
	Name  string
	Stock int
}

func (pluginItem) TableName() string { return "plugin_items" }

var pluginItemHooks atomic.Int64

func (pluginItem) BeforeUpdate(*gorm.DB) error { pluginItemHooks.Add(1); return nil }

// pluginNote has no version: the plugin leaves it alone.
type pluginNote struct {
	ID      int64 `gorm:"primaryKey"`
	Text    string
	Version string // a field named Version that is not an int64
}

func (pluginNote) TableName() string { return "plugin_notes" }

// pluginSetup creates the plugin tests' tables on db and, with on,
// registers the plugin with opts.
func pluginSetup(t testing.TB, db *gorm.DB, on bool, opts ...repository.PluginOption) {
	t.Helper()
	require.NoError(t, db.AutoMigrate(&pluginToken{}, &pluginItem{}, &pluginNote{}))
	if on {
		require.NoError(t, db.Use(repository.Plugin(opts...)))
	}
}

// tokenRow reads a token with plain SQL, which the plugin does not see.
func tokenRow(t *testing.T, db *gorm.DB, id int64) (row pluginToken, found bool) {
	t.Helper()
	res := db.Raw("SELECT id, name, status, remain_quota, version FROM plugin_tokens WHERE id = ?", id).Scan(&row)
	require.NoError(t, res.Error)
	return row, res.RowsAffected == 1
}

func newToken(t *testing.T, tokens *repository.Repository[pluginToken], name string, quota int64) *pluginToken {
	t.Helper()
	tok := &pluginToken{Name: name, RemainQuota: quota}
	require.NoError(t, tokens.Create(context.Background(), tok))
	return tok
}

// TestPluginPlainWritesAdvanceTheVersion: every kind of plain GORM update
// of a versioned model moves the version on, so that a guarded Update from a
// copy read before it is refused as stale instead of erasing it.
func TestPluginPlainWritesAdvanceTheVersion(t *testing.T) {
	writes := []struct {
		name  string
		write func(db *gorm.DB, tok pluginToken) error
		check func(t *testing.T, row pluginToken)
	}{
		{"Updates with a struct", func(db *gorm.DB, tok pluginToken) error {
			return db.Model(&pluginToken{}).Where("id = ?", tok.ID).Updates(pluginToken{Name: "renamed"}).Error
		}, func(t *testing.T, row pluginToken) { require.Equal(t, "renamed", row.Name) }},
		{"Updates with a map that sets the version", func(db *gorm.DB, tok pluginToken) error {
			return db.Model(&pluginToken{}).Where("id = ?", tok.ID).Updates(map[string]any{"name": "renamed", "version": int64(1)}).Error
		}, func(t *testing.T, row pluginToken) { require.Equal(t, "renamed", row.Name) }},
		{"Update with gorm.Expr", func(db *gorm.DB, tok pluginToken) error {
			return db.Model(&pluginToken{}).Where("id = ?", tok.ID).Update("remain_quota", gorm.Expr("remain_quota - ?", 7)).Error
		}, func(t *testing.T, row pluginToken) { require.Equal(t, int64(93), row.RemainQuota) }},
		{"UpdateColumn", func(db *gorm.DB, tok pluginToken) error {
			return db.Model(&pluginToken{}).Where("id = ?", tok.ID).UpdateColumn("remain_quota", gorm.Expr("remain_quota + ?", 5)).Error
		}, func(t *testing.T, row pluginToken) { require.Equal(t, int64(105), row.RemainQuota) }},
		{"UpdateColumns", func(db *gorm.DB, tok pluginToken) error {
			return db.Model(&pluginToken{}).Where("id = ?", tok.ID).UpdateColumns(map[string]any{"status": 2, "Version": 3}).Error
		}, func(t *testing.T, row pluginToken) { require.Equal(t, 2, row.Status) }},
		{"Updates of the record itself", func(db *gorm.DB, tok pluginToken) error {
			return db.Model(&tok).Updates(map[string]any{"status": 3}).Error
		}, func(t *testing.T, row pluginToken) { require.Equal(t, 3, row.Status) }},
		{"Save of the copy read before", func(db *gorm.DB, tok pluginToken) error {
			tok.Name = "saved" // the copy holds the version it was read at: not written back
			return db.Save(&tok).Error
		}, func(t *testing.T, row pluginToken) { require.Equal(t, "saved", row.Name) }},
		{"Save of a record built without its version", func(db *gorm.DB, tok pluginToken) error {
			return db.Save(&pluginToken{ID: tok.ID, Name: "rebuilt", RemainQuota: 1}).Error
		}, func(t *testing.T, row pluginToken) { require.Equal(t, "rebuilt", row.Name) }},
		{"upsert updating every column", func(db *gorm.DB, tok pluginToken) error {
			tok.Name = "upserted"
			return db.Clauses(clause.OnConflict{UpdateAll: true}).Create(&tok).Error
		}, func(t *testing.T, row pluginToken) { require.Equal(t, "upserted", row.Name) }},
		{"upsert updating one column", func(db *gorm.DB, tok pluginToken) error {
			tok.RemainQuota = 1
			return db.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "id"}}, DoUpdates: clause.AssignmentColumns([]string{"remain_quota"})}).Create(&tok).Error
		}, func(t *testing.T, row pluginToken) { require.Equal(t, int64(1), row.RemainQuota) }},
		{"Save of a slice", func(db *gorm.DB, tok pluginToken) error {
			tok.Status = 4
			return db.Save(&[]pluginToken{tok}).Error
		}, func(t *testing.T, row pluginToken) { require.Equal(t, 4, row.Status) }},
	}
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		pluginSetup(t, db, true)
		ctx := testdb.Ctx(t)
		tokens := mustRepo[pluginToken](t, db)
		for _, w := range writes {
			t.Run(w.name, func(t *testing.T) {
				tok := newToken(t, tokens, "key", 100)
				stale := *tok
				require.NoError(t, w.write(db, *tok))
				row, found := tokenRow(t, db, tok.ID)
				require.True(t, found)
				require.Greater(t, row.Version, tok.Version, "the plain write advanced the version")
				w.check(t, row)

				stale.Name = "editor"
				err := tokens.Update(ctx, &stale)
				require.ErrorIs(t, err, locking.ErrStaleData, "the editor's copy, read before the plain write, is stale")
				after, _ := tokenRow(t, db, tok.ID)
				require.Equal(t, row, after, "the refused write changed nothing")

				fresh, err := tokens.Get(ctx, tok.ID)
				require.NoError(t, err)
				fresh.Name = "editor"
				require.NoError(t, tokens.Update(ctx, fresh), "a copy read after the plain write is not stale")
			})
		}
	})
}

// TestPluginBatchUpdateAdvancesEveryRow: an update of every row a Where
// matches advances each row's version.
func TestPluginBatchUpdateAdvancesEveryRow(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		pluginSetup(t, db, true)
		ctx := testdb.Ctx(t)
		tokens := mustRepo[pluginToken](t, db)
		var read []pluginToken
		for i := range 3 {
			read = append(read, *newToken(t, tokens, fmt.Sprintf("batch-%d", i), 10))
		}
		other := newToken(t, tokens, "other", 10)
		other.Status = 9
		require.NoError(t, tokens.Update(ctx, other))

		res := db.Model(&pluginToken{}).Where("status = ?", 0).Update("remain_quota", gorm.Expr("remain_quota * ?", 2))
		require.NoError(t, res.Error)
		require.Equal(t, int64(3), res.RowsAffected)
		for _, tok := range read {
			row, _ := tokenRow(t, db, tok.ID)
			require.Greater(t, row.Version, tok.Version)
			require.Equal(t, int64(20), row.RemainQuota)
			stale := tok
			require.ErrorIs(t, tokens.Update(ctx, &stale), locking.ErrStaleData)
		}
		row, _ := tokenRow(t, db, other.ID)
		require.Equal(t, other.Version, row.Version, "a row the Where left out keeps its version")
	})
}

// TestPluginCreateGivesAFirstVersion: a plain GORM Create of a record at
// version 0 gives it a first version, a clock reading, never 0; a version
// the record holds is kept.
func TestPluginCreateGivesAFirstVersion(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		pluginSetup(t, db, true)
		ctx := testdb.Ctx(t)
		tokens := mustRepo[pluginToken](t, db)
		floor := time.Now().Add(-time.Hour).UnixMicro()

		one := &pluginToken{Name: "one"}
		require.NoError(t, db.Create(one).Error)
		row, _ := tokenRow(t, db, one.ID)
		require.Greater(t, row.Version, floor)
		require.Equal(t, row.Version, one.Version, "the entity holds the version it was created at")
		one.Name = "written by gormlock"
		require.NoError(t, tokens.Update(ctx, one), "a guarded write of the created entity passes")

		batch := []pluginToken{{Name: "a"}, {Name: "b"}, {Name: "c"}}
		require.NoError(t, db.Create(&batch).Error)
		seen := map[int64]bool{}
		for _, tok := range batch {
			row, _ := tokenRow(t, db, tok.ID)
			require.Greater(t, row.Version, floor)
			require.Equal(t, row.Version, tok.Version)
			require.False(t, seen[row.Version], "every record its own version")
			seen[row.Version] = true
		}

		now := time.Now().UTC()
		m := map[string]any{"name": "from a map", "status": 0, "remain_quota": 3, "created_at": now, "updated_at": now}
		require.NoError(t, db.Model(&pluginToken{}).Create(m).Error)
		var v int64
		require.NoError(t, db.Raw("SELECT version FROM plugin_tokens WHERE name = ?", "from a map").Scan(&v).Error)
		require.Greater(t, v, floor)

		// A version the record holds may be one an earlier record with its
		// key had: the new record gets a version above it, from the clock.
		held := &pluginToken{Name: "imported", Versioned: models.Versioned{Version: 42}}
		require.NoError(t, db.Create(held).Error)
		row, _ = tokenRow(t, db, held.ID)
		require.Greater(t, row.Version, floor, "a version the record holds is not reused")
		require.Equal(t, row.Version, held.Version)

		// The tagged version field of a gorm.Model model.
		item := &pluginItem{Name: "lamp", Stock: 1}
		require.NoError(t, db.Create(item).Error)
		require.Greater(t, item.Rev, floor)
		before := item.Rev
		require.NoError(t, db.Model(&pluginItem{}).Where("id = ?", item.ID).Update("stock", gorm.Expr("stock + 1")).Error)
		var rev int64
		require.NoError(t, db.Raw("SELECT rev FROM plugin_items WHERE id = ?", item.ID).Scan(&rev).Error)
		require.Greater(t, rev, before)
	})
}

// TestPluginSaveOfAGoneRecord: Save of a record that is gone falls back to
// an insert (GORM's upsert); the record comes back at a version above the
// one the copy held, so the copy's version names no state of it.
func TestPluginSaveOfAGoneRecord(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		pluginSetup(t, db, true)
		ctx := testdb.Ctx(t)
		tokens := mustRepo[pluginToken](t, db)
		tok := newToken(t, tokens, "gone", 5)
		stale := *tok
		require.NoError(t, tokens.Delete(ctx, tok))
		require.NoError(t, db.Save(&stale).Error)
		row, found := tokenRow(t, db, tok.ID)
		require.True(t, found)
		require.Greater(t, row.Version, tok.Version)
	})
}

// TestPluginLeavesOtherModelsAlone: a model without a usable version, and
// statements without a model, are written as GORM writes them.
func TestPluginLeavesOtherModelsAlone(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		pluginSetup(t, db, true, repository.GuardGORMUpdates(), repository.StrictGORMWrites(true))
		n := &pluginNote{ID: 1, Text: "a", Version: "v1"}
		require.NoError(t, db.Create(n).Error)
		require.NoError(t, db.Model(n).Update("text", "b").Error)
		require.NoError(t, db.Save(&pluginNote{ID: 1, Text: "c", Version: "v2"}).Error)
		require.NoError(t, db.Table("plugin_notes").Where("id = ?", 1).Updates(map[string]any{"text": "d"}).Error)
		var got pluginNote
		require.NoError(t, db.First(&got, 1).Error)
		require.Equal(t, pluginNote{ID: 1, Text: "d", Version: "v2"}, got)
		require.NoError(t, db.Delete(&got).Error)
	})
}

// TestPluginGuardGORMUpdates: with GuardGORMUpdates, a plain GORM update of
// a record read with its version is guarded: from a stale copy it is
// refused with ErrStaleData and writes nothing.
func TestPluginGuardGORMUpdates(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		pluginSetup(t, db, true, repository.GuardGORMUpdates())
		ctx := testdb.Ctx(t)
		tokens := mustRepo[pluginToken](t, db)
		tok := newToken(t, tokens, "key", 100)
		stale := *tok
		require.NoError(t, db.Model(&pluginToken{}).Where("id = ?", tok.ID).Update("remain_quota", gorm.Expr("remain_quota - ?", 30)).Error)
		charged, _ := tokenRow(t, db, tok.ID)

		for _, c := range []struct {
			name  string
			write func(cp *pluginToken) *gorm.DB
		}{
			{"Save", func(cp *pluginToken) *gorm.DB { cp.Name = "editor"; return db.Save(cp) }},
			{"Updates of the record", func(cp *pluginToken) *gorm.DB {
				return db.Model(cp).Updates(map[string]any{"name": "editor", "remain_quota": cp.RemainQuota})
			}},
			{"Update of the record with gorm.Expr", func(cp *pluginToken) *gorm.DB {
				return db.Model(cp).Update("remain_quota", gorm.Expr("remain_quota - ?", 1))
			}},
			{"UpdateColumns of the record", func(cp *pluginToken) *gorm.DB { return db.Model(cp).UpdateColumns(pluginToken{Name: "editor"}) }},
			{"Updates with an OR in the Where", func(cp *pluginToken) *gorm.DB {
				return db.Model(cp).Where("name = ?", "nobody").Or("name = ?", "key").Updates(map[string]any{"name": "editor"})
			}},
		} {
			t.Run(c.name, func(t *testing.T) {
				cp := stale
				res := c.write(&cp)
				require.ErrorIs(t, res.Error, locking.ErrStaleData)
				var se *locking.StaleDataError
				require.ErrorAs(t, res.Error, &se)
				require.Equal(t, tok.Version, se.Expected)
				require.Equal(t, charged.Version, se.Actual)
				require.Equal(t, "plugin_tokens", se.Table)
				require.Equal(t, tok.ID, se.ID)
				require.Equal(t, tok.Version, cp.Version, "the stale entity keeps its version")
				row, _ := tokenRow(t, db, tok.ID)
				require.Equal(t, charged, row, "nothing written")
			})
		}

		// A record read with its version: the write passes, and the entity
		// holds the version the database holds, exactly.
		fresh, err := tokens.Get(ctx, tok.ID)
		require.NoError(t, err)
		fresh.Name = "saved"
		require.NoError(t, db.Save(fresh).Error)
		row, _ := tokenRow(t, db, tok.ID)
		require.Equal(t, row.Version, fresh.Version)
		require.Greater(t, fresh.Version, charged.Version)
		res := db.Model(fresh).Update("status", 5)
		require.NoError(t, res.Error)
		require.Equal(t, int64(1), res.RowsAffected)
		row, _ = tokenRow(t, db, tok.ID)
		require.Equal(t, row.Version, fresh.Version)
		// The same *gorm.DB used twice builds each statement afresh.
		q := db.Model(fresh)
		require.NoError(t, q.Update("status", 6).Error)
		require.NoError(t, q.Update("status", 7).Error)
		row, _ = tokenRow(t, db, tok.ID)
		require.Equal(t, 7, row.Status)
		require.Equal(t, row.Version, fresh.Version)
		fresh.Name = "then gormlock"
		require.NoError(t, tokens.Update(ctx, fresh), "gormlock's guard takes the entity as the plugin left it")

		// Other conditions that leave a current record out: GORM's own
		// outcome, no error and no row.
		res = db.Model(fresh).Where("status = ?", 99).Update("name", "x")
		require.NoError(t, res.Error)
		require.Zero(t, res.RowsAffected)

		// Not guarded: the model holds no version, or no key.
		require.NoError(t, db.Model(&pluginToken{}).Where("id = ?", tok.ID).Update("status", 8).Error)
		require.NoError(t, db.Model(&pluginToken{Versioned: models.Versioned{Version: 1}}).Where("id = ?", tok.ID).Update("status", 9).Error)

		// A gone record is stale and not found, and Save does not insert it
		// again.
		gone := newToken(t, tokens, "gone", 1)
		copyOfGone := *gone
		require.NoError(t, tokens.Delete(ctx, gone))
		err = db.Save(&copyOfGone).Error
		require.ErrorIs(t, err, locking.ErrStaleData)
		require.ErrorIs(t, err, locking.ErrNotFound)
		_, found := tokenRow(t, db, gone.ID)
		require.False(t, found, "the stale Save did not insert the record again")

		// A soft-deleted record is gone too.
		item := &pluginItem{Name: "lamp"}
		require.NoError(t, db.Create(item).Error)
		itemCopy := *item
		require.NoError(t, db.Delete(item).Error)
		itemCopy.Stock = 3
		err = db.Save(&itemCopy).Error
		require.ErrorIs(t, err, locking.ErrStaleData)
		require.ErrorIs(t, err, locking.ErrNotFound)
	})
}

// TestPluginKeepsTranslateError: with gorm.Config{TranslateError: true},
// GORM's translated errors stay as they are, and a stale write still
// matches ErrStaleData.
func TestPluginKeepsTranslateError(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		pluginSetup(t, db, true, repository.GuardGORMUpdates())
		db.Config.TranslateError = true
		tokens := mustRepo[pluginToken](t, db)
		tok := newToken(t, tokens, "key", 1)
		dup := &pluginToken{ID: tok.ID, Name: "dup"}
		require.ErrorIs(t, db.Create(dup).Error, gorm.ErrDuplicatedKey)
		stale := *tok
		require.NoError(t, db.Model(&pluginToken{}).Where("id = ?", tok.ID).Update("status", 1).Error)
		require.ErrorIs(t, db.Save(&stale).Error, locking.ErrStaleData)
	})
}

// TestPluginStrictGORMWrites: StrictGORMWrites(true) refuses every plain
// GORM update or delete of a versioned model that no version guards, before
// its hooks run, and writes nothing; StrictGORMWrites(false) logs it, with
// the table and the caller, and lets it run.
func TestPluginStrictGORMWrites(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		pluginSetup(t, db, true, repository.StrictGORMWrites(true))
		ctx := testdb.Ctx(t)
		tokens := mustRepo[pluginToken](t, db)
		tok := newToken(t, tokens, "key", 10)
		row, _ := tokenRow(t, db, tok.ID)

		refused := map[string]func() error{
			"Update by Where": func() error {
				return db.Model(&pluginToken{}).Where("id = ?", tok.ID).Update("remain_quota", gorm.Expr("remain_quota - ?", 1)).Error
			},
			"Save":                  func() error { cp := *tok; cp.Name = "x"; return db.Save(&cp).Error },
			"Updates of the record": func() error { cp := *tok; return db.Model(&cp).Updates(map[string]any{"name": "x"}).Error },
			"Delete":                func() error { cp := *tok; return db.Delete(&cp).Error },
			"Delete by Where":       func() error { return db.Where("name = ?", "key").Delete(&pluginToken{}).Error },
		}
		for name, write := range refused {
			err := write()
			require.ErrorIs(t, err, locking.ErrUnguardedWrite, name)
			require.ErrorContains(t, err, "plugin_tokens", name)
			require.ErrorContains(t, err, "plugin_test.go:", name)
			got, found := tokenRow(t, db, tok.ID)
			require.True(t, found, name)
			require.Equal(t, row, got, "%s wrote nothing", name)
		}
		item := &pluginItem{Name: "lamp"}
		require.NoError(t, db.Create(item).Error)
		hooks := pluginItemHooks.Load()
		require.ErrorIs(t, db.Model(item).Update("stock", 2).Error, locking.ErrUnguardedWrite)
		require.Equal(t, hooks, pluginItemHooks.Load(), "refused before its hooks ran")

		// Guarded by a condition on the version: allowed, and advanced.
		res := db.Model(&pluginToken{}).Where("id = ? AND version = ?", tok.ID, tok.Version).Update("remain_quota", gorm.Expr("remain_quota - ?", 1))
		require.NoError(t, res.Error)
		require.Equal(t, int64(1), res.RowsAffected)
		got, _ := tokenRow(t, db, tok.ID)
		require.Greater(t, got.Version, tok.Version)
		require.NoError(t, db.Where(map[string]any{"version": got.Version}).Delete(&pluginToken{}, tok.ID).Error)
		_, found := tokenRow(t, db, tok.ID)
		require.False(t, found)

		// gormlock's own writes are not plain GORM writes.
		own := newToken(t, tokens, "own", 1)
		own.Name = "changed"
		require.NoError(t, tokens.Update(ctx, own))
		require.NoError(t, tokens.Delete(ctx, own))

		// With GuardGORMUpdates, an update of a record read with its version
		// is guarded.
		guarded := testdb.Open(t, testdbName(db))
		pluginSetup(t, guarded, true, repository.GuardGORMUpdates(), repository.StrictGORMWrites(true))
		gtokens := mustRepo[pluginToken](t, guarded)
		g := newToken(t, gtokens, "guarded", 1)
		g.Name = "saved"
		require.NoError(t, guarded.Save(g).Error)
		require.ErrorIs(t, guarded.Model(&pluginToken{}).Where("id = ?", g.ID).Update("status", 1).Error, locking.ErrUnguardedWrite)

		// Logged: the write runs, and the logger's Warn names the table and
		// the caller.
		logged := testdb.Open(t, testdbName(db))
		pluginSetup(t, logged, true, repository.StrictGORMWrites(false))
		ltokens := mustRepo[pluginToken](t, logged)
		l := newToken(t, ltokens, "logged", 10)
		rec := &warnRecorder{}
		quiet := logged.Session(&gorm.Session{Logger: rec})
		require.NoError(t, quiet.Model(&pluginToken{}).Where("id = ?", l.ID).Update("remain_quota", gorm.Expr("remain_quota - ?", 1)).Error)
		require.NoError(t, quiet.Delete(&pluginToken{}, l.ID).Error)
		warns := rec.all()
		require.Len(t, warns, 2)
		require.Contains(t, warns[0], "unguarded update of plugin_tokens")
		require.Contains(t, warns[1], "unguarded delete of plugin_tokens")
		for _, w := range warns {
			require.Contains(t, w, "plugin_test.go:")
		}
		_, found = tokenRow(t, logged, l.ID)
		require.False(t, found, "the logged delete ran")
	})
}

// testdbName is the testdb dialect db was opened as: gorm's "mysql" is
// testdb's "mariadb".
func testdbName(db *gorm.DB) string {
	if name := db.Dialector.Name(); name != "mysql" {
		return name
	}
	return "mariadb"
}

// warnRecorder is a GORM logger that keeps its warnings.
type warnRecorder struct {
	mu    sync.Mutex
	warns []string
}

func (r *warnRecorder) LogMode(logger.LogLevel) logger.Interface { return r }
func (r *warnRecorder) Info(context.Context, string, ...any)     {}
func (r *warnRecorder) Error(context.Context, string, ...any)    {}
func (r *warnRecorder) Trace(context.Context, time.Time, func() (string, int64), error) {
}
func (r *warnRecorder) Warn(_ context.Context, msg string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.warns = append(r.warns, fmt.Sprintf(msg, args...))
}
func (r *warnRecorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.warns...)
}

// testPlugin is another GORM plugin, which does nothing.
type testPlugin struct{}

func (testPlugin) Name() string              { return "test-plugin" }
func (testPlugin) Initialize(*gorm.DB) error { return nil }

// TestPluginLeavesGormlockOnItsFastPath: with only gormlock's plugin
// registered, gormlock's own statements do not go through GORM's Raw and
// Row callbacks; with another plugin they do (the negative control).
func TestPluginLeavesGormlockOnItsFastPath(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		pluginSetup(t, db, true, repository.GuardGORMUpdates())
		ctx := testdb.Ctx(t)
		var seen atomic.Int64
		count := func(*gorm.DB) { seen.Add(1) }
		require.NoError(t, db.Callback().Raw().Before("gorm:raw").Register("test:count_raw", count))
		require.NoError(t, db.Callback().Row().Before("gorm:row").Register("test:count_row", count))
		work := func(tokens *repository.Repository[pluginToken]) {
			tok := newToken(t, tokens, "fast", 1)
			tok.Name = "updated"
			require.NoError(t, tokens.Update(ctx, tok))
			_, err := tokens.Mutate(ctx, tok.ID, func(x *pluginToken) error { x.Status++; return nil })
			require.NoError(t, err)
			_, err = tokens.Get(ctx, tok.ID)
			require.NoError(t, err)
		}

		work(mustRepo[pluginToken](t, db))
		require.Zero(t, seen.Load(), "gormlock's statements took the direct path")

		require.NoError(t, db.Use(testPlugin{}))
		work(mustRepo[pluginToken](t, db))
		require.Positive(t, seen.Load(), "with another plugin, they go through the callbacks")
	})
}

// TestPluginRefusesBadSetups: invalid options and unusable databases are
// errors, never panics.
func TestPluginRefusesBadSetups(t *testing.T) {
	db := testdb.SQLite(t)
	require.Equal(t, "gormlock", repository.Plugin().Name())
	require.ErrorIs(t, db.Use(repository.Plugin(repository.StrictGORMWrites(true), repository.StrictGORMWrites(false))), locking.ErrInvalidArgument)
	require.ErrorIs(t, repository.Plugin().Initialize(nil), locking.ErrInvalidArgument)
	require.ErrorIs(t, repository.Plugin().Initialize(&gorm.DB{}), locking.ErrInvalidArgument)
	require.ErrorIs(t, repository.Plugin().Initialize(&gorm.DB{Config: &gorm.Config{}}), locking.ErrInvalidArgument)

	other, err := gorm.Open(sqlserverish{sqlite.Open(t.TempDir() + "/x.db")}, &gorm.Config{})
	require.NoError(t, err)
	require.ErrorIs(t, other.Use(repository.Plugin()), locking.ErrNotSupported)

	require.NoError(t, db.Use(repository.Plugin(nil, repository.StrictGORMWrites(false), repository.StrictGORMWrites(false))))
	require.ErrorIs(t, db.Use(repository.Plugin()), gorm.ErrRegistered)
}

// The workload: billing charges a token's quota with plain GORM
// while an editor changes the token's name and status with gormlock's
// Mutate, which writes every column from its read.
const (
	billers       = 4
	chargesEach   = 150
	startingQuota = billers * chargesEach
)

// TestPluginPartialAdoptionLosesNoUpdates is the "done when": with
// the plugin no charge is lost; without it (the negative control) the
// editor's writes erase charges.
func TestPluginPartialAdoptionLosesNoUpdates(t *testing.T) {
	for _, d := range testdb.Dialects {
		t.Run(d, func(t *testing.T) {
			for _, on := range []bool{true, false} {
				t.Run(fmt.Sprintf("plugin=%s", onOff(on)), func(t *testing.T) {
					db := testdb.Open(t, d)
					pluginSetup(t, db, on)
					charged, edits, refused, final := billingWorkload(t, db)
					lost := final - (startingQuota - charged)
					t.Logf("%s plugin=%s: %d charges, %d edits (%d attempts refused as stale), quota %d, %d units lost",
						d, onOff(on), charged, edits, refused, final, lost)
					require.Equal(t, int64(startingQuota), charged, "every charge ran")
					require.Positive(t, edits, "the editor wrote")
					if on {
						require.Zero(t, lost, "no charge lost")
						require.Positive(t, refused, "the guard saw billing's writes")
					} else {
						require.Positive(t, lost, "the negative control loses charges: the test can fail")
						require.Zero(t, refused, "billing's writes are invisible to the guard")
					}
				})
			}
		})
	}
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// editorRetry lets the editor retry often and soon, so that it writes
// while billing runs.
var editorRetry = repository.Retry(locking.RetryPolicy{MaxAttempts: 100, BaseDelay: 100 * time.Microsecond, MaxDelay: time.Millisecond})

// billingWorkload runs the workload on a fresh token and returns
// the charges that succeeded, the editor's successful writes, its attempts
// refused as stale, and the final quota. The editor goes on until billing is
// over and it has written at least once.
func billingWorkload(t *testing.T, db *gorm.DB) (charged, edits, refused, final int64) {
	t.Helper()
	ctx := testdb.Ctx(t)
	tokens := mustRepo[pluginToken](t, db)
	tok := newToken(t, tokens, "key", startingQuota)

	start := make(chan struct{})
	billed := make(chan struct{})
	errs := make(chan error, billers+1)
	var charges, writes atomic.Int64
	var bill, edit sync.WaitGroup
	for range billers {
		bill.Go(func() {
			<-start
			for range chargesEach {
				res := db.WithContext(ctx).Model(&pluginToken{}).Where("id = ?", tok.ID).
					Update("remain_quota", gorm.Expr("remain_quota - ?", 1))
				if res.Error != nil {
					errs <- fmt.Errorf("charge: %w", res.Error)
					return
				}
				charges.Add(res.RowsAffected)
			}
		})
	}
	var attempts int64
	edit.Go(func() {
		<-start
		for i := 0; ; i++ {
			select {
			case <-billed:
				if writes.Load() > 0 {
					return
				}
			default:
			}
			var rep repository.MutateReport
			_, err := tokens.Mutate(ctx, tok.ID, func(x *pluginToken) error {
				x.Name = fmt.Sprintf("key-%d", i)
				x.Status = i % 3
				return nil
			}, repository.Report(&rep), editorRetry)
			attempts += int64(rep.Attempts)
			switch {
			case err == nil:
				writes.Add(1)
			case errors.Is(err, locking.ErrStaleData): // retries ran out; nothing written
			default:
				errs <- fmt.Errorf("edit: %w", err)
				return
			}
		}
	})
	close(start)
	bill.Wait()
	close(billed)
	edit.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	row, found := tokenRow(t, db, tok.ID)
	require.True(t, found)
	require.True(t, strings.HasPrefix(row.Name, "key"))
	return charges.Load(), writes.Load(), attempts - writes.Load(), row.RemainQuota
}
