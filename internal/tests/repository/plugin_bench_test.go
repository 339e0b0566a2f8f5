package repository_test

import (
	"testing"

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/testdb"
)

// BenchmarkPlainGORMUpdate measures what the plugin adds to a plain GORM
// update of a versioned model: billing's charge,
// db.Model(&T{}).Where("id = ?", id).Update("remain_quota", gorm.Expr(...)),
// with the plugin off and on, each on a database of its own. One worker,
// one row. PostgreSQL and MariaDB run when their variables are set.
func BenchmarkPlainGORMUpdate(b *testing.B) {
	for _, dialect := range testdb.Dialects {
		b.Run(dialect, func(b *testing.B) {
			for _, on := range []bool{false, true} {
				b.Run("plugin="+onOff(on), func(b *testing.B) {
					db := testdb.Open(b, dialect)
					pluginSetup(b, db, on)
					tok := &pluginToken{Name: "bench", RemainQuota: 1 << 40}
					if err := db.Create(tok).Error; err != nil {
						b.Fatal(err)
					}
					b.ReportAllocs()
					for b.Loop() {
						res := db.Model(&pluginToken{}).Where("id = ?", tok.ID).
							Update("remain_quota", gorm.Expr("remain_quota - ?", 1))
						if res.Error != nil || res.RowsAffected != 1 {
							b.Fatal(res.Error, res.RowsAffected)
						}
					}
				})
			}
		})
	}
}
