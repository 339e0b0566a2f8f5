package repository_test

import (
	"context"
	"path/filepath"
	"testing"

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/models"
	pgopen "github.com/gormlock/gormlock/opendb/postgres"
	sqliteopen "github.com/gormlock/gormlock/opendb/sqlite"
	"github.com/gormlock/gormlock/repository"
)

// benchStock is a product whose stock is outside the version.
type benchStock struct {
	models.Model
	Name  string `gorm:"column:name;not null"`
	Price int64  `gorm:"column:price;not null"`
	Stock int64  `gorm:"column:stock;not null" gormlock:"unversioned"`
}

// BenchmarkUnversionedUpdate measures Update of a model with an
// unversioned field (which brings the field back after the write) and
// Mutate whose fn changes that field only (writeUnversioned), on SQLite
// and PostgreSQL, defaults everywhere, one worker, one row. Compare it
// with the same benchmark built from another commit, run alternately:
//
//	go test -c -o /tmp/unv.test ./internal/tests/repository
//	for r in 1 2 3 4 5; do /tmp/unv.test -test.run '^$' -test.bench '^BenchmarkUnversionedUpdate$' -test.benchmem; done
func BenchmarkUnversionedUpdate(b *testing.B) {
	for _, d := range []string{"sqlite", "postgres"} {
		b.Run("db="+d, func(b *testing.B) {
			var db *gorm.DB
			var err error
			if d == "postgres" {
				db, err = pgopen.Open(testdb.PostgresSchema(b))
			} else {
				db, err = sqliteopen.Open(filepath.Join(b.TempDir(), "unversioned.db"))
			}
			if err != nil {
				b.Fatal(err)
			}
			if err := db.AutoMigrate(&benchStock{}); err != nil {
				b.Fatal(err)
			}
			repo, err := repository.New[benchStock](db)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			e := &benchStock{Name: "lamp", Price: 1, Stock: 100}
			if err := repo.Create(ctx, e); err != nil {
				b.Fatal(err)
			}
			b.Run("op=Update", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					e.Price++
					if err := repo.Update(ctx, e); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("op=MutateUnversioned", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := repo.Mutate(ctx, e.ID, func(p *benchStock) error { p.Stock++; return nil }); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
