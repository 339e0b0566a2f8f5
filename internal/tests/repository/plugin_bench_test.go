package repository_test

import (
	"testing"

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/repository"
)

// BenchmarkPlainGORMUpdate measures what the plugin adds to a plain GORM
// update of a versioned model: billing's charge,
// db.Model(&T{}).Where("id = ?", id).Update("remain_quota", gorm.Expr(...)),
// with the plugin off and on, each on a database of its own; and, with
// GuardGORMUpdates (plugin=guard), the same charge of a loaded record,
// db.Model(&t).Update(...), which the plugin guards by its version and
// checks (the WHERE, with the guard, is built once more and read by
// internal/sqlguard). One worker, one row. PostgreSQL and MariaDB run when
// their variables are set.
func BenchmarkPlainGORMUpdate(b *testing.B) {
	for _, dialect := range testdb.Dialects {
		b.Run(dialect, func(b *testing.B) {
			for _, mode := range []string{"off", "on", "guard"} {
				b.Run("plugin="+mode, func(b *testing.B) {
					db := testdb.Open(b, dialect)
					var opts []repository.PluginOption
					if mode == "guard" {
						opts = append(opts, repository.GuardGORMUpdates())
					}
					pluginSetup(b, db, mode != "off", opts...)
					tok := &pluginToken{Name: "bench", RemainQuota: 1 << 40}
					if err := db.Create(tok).Error; err != nil {
						b.Fatal(err)
					}
					b.ReportAllocs()
					for b.Loop() {
						var res *gorm.DB
						if mode == "guard" {
							res = db.Model(tok).Update("remain_quota", gorm.Expr("remain_quota - ?", 1))
						} else {
							res = db.Model(&pluginToken{}).Where("id = ?", tok.ID).
								Update("remain_quota", gorm.Expr("remain_quota - ?", 1))
						}
						if res.Error != nil || res.RowsAffected != 1 {
							b.Fatal(res.Error, res.RowsAffected)
						}
					}
				})
			}
		})
	}
}

// BenchmarkPluginGuardCPU measures the plugin's own work on a guarded
// update, without the database: GuardGORMUpdates' charge of a loaded
// record in a DryRun session without GORM's default transaction (GORM
// builds the statement and sends nothing), plugin off, with
// GuardGORMUpdates, and with GuardGORMUpdates on a call with a Where of its
// own, whose WHERE the plugin checks with internal/sqlguard.
func BenchmarkPluginGuardCPU(b *testing.B) {
	for _, dialect := range testdb.Dialects {
		b.Run(dialect, func(b *testing.B) {
			for _, mode := range []string{"off", "guard", "guard+where"} {
				b.Run("plugin="+mode, func(b *testing.B) {
					db := testdb.Open(b, dialect)
					pluginSetup(b, db, mode != "off", repository.GuardGORMUpdates())
					tok := &pluginToken{ID: 1, Name: "bench", RemainQuota: 1 << 40}
					tok.Version = 1_800_000_000_000_000
					dry := db.Session(&gorm.Session{DryRun: true, SkipDefaultTransaction: true})
					b.ReportAllocs()
					for b.Loop() {
						q := dry.Model(tok)
						if mode == "guard+where" {
							q = q.Where("status = ?", 0)
						}
						if err := q.Update("remain_quota", gorm.Expr("remain_quota - ?", 1)).Error; err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}
