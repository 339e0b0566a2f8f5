package repository_test

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"log"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gormlock/gormlock/internal/tests/fixtures"

	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/repository"
)

// rawUpdateSQL is the statement Repository[fixtures.Account].Update sends,
// written by hand for each dialect.
var rawUpdateSQL = map[string]string{
	"sqlite":   "UPDATE `accounts` SET `owner` = ?, `balance` = ?, `frozen` = ?, `version` = ?, `updated_at` = ? WHERE `id` = ? AND `version` = ?",
	"postgres": `UPDATE "accounts" SET "owner" = $1, "balance" = $2, "frozen" = $3, "version" = GREATEST($4, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT), "updated_at" = $5 WHERE "id" = $6 AND "version" = $7 RETURNING "version"`,
	"mariadb":  "UPDATE `accounts` SET `owner` = ?, `balance` = ?, `frozen` = ?, `version` = LAST_INSERT_ID(GREATEST(?, (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', SYSDATE(6)) - TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), CURRENT_TIMESTAMP(6))))), `updated_at` = ? WHERE `id` = ? AND `version` = ?",
}

// rawUpdate sends rawUpdateSQL for x on sqlDB, as Update does (on
// PostgreSQL and MariaDB reading the new version back), and reports whether
// it matched.
func rawUpdate(ctx context.Context, sqlDB *sql.DB, dialect string, x *fixtures.Account) (bool, error) {
	now := time.Now().UTC().Truncate(time.Microsecond)
	if dialect == "postgres" {
		var v int64
		err := sqlDB.QueryRowContext(ctx, rawUpdateSQL[dialect], x.Owner, x.Balance, x.Frozen, x.Version+1, now, x.ID, x.Version).Scan(&v)
		if errors.Is(err, sql.ErrNoRows) {
			return false, nil
		}
		x.Version, x.UpdatedAt = v, now
		return err == nil, err
	}
	v := max(x.Version+1, now.UnixMicro())
	res, err := sqlDB.ExecContext(ctx, rawUpdateSQL[dialect], x.Owner, x.Balance, x.Frozen, v, now, x.ID, x.Version)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	if n == 1 && dialect == "mariadb" {
		v, err = res.LastInsertId() // the version the server set
	}
	if n == 1 {
		x.Version, x.UpdatedAt = v, now
	}
	return n == 1, err
}

// BenchmarkUpdate compares a guarded Update of an entity in hand with the
// same statement sent through database/sql on the same pool, and with plain
// GORM doing the same guarded write by hand. One worker, one row.
func BenchmarkUpdate(b *testing.B) {
	for _, dialect := range testdb.Dialects {
		b.Run(dialect, func(b *testing.B) {
			db := testdb.Open(b, dialect)
			ctx := context.Background()
			accounts, err := repository.New[fixtures.Account](db)
			if err != nil {
				b.Fatal(err)
			}
			a := &fixtures.Account{Owner: "bench", Balance: 1}
			if err := accounts.Create(ctx, a); err != nil {
				b.Fatal(err)
			}
			b.Run("gormlock", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					a.Balance++
					if err := accounts.Update(ctx, a); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("database-sql", func(b *testing.B) {
				sqlDB, _ := db.DB()
				b.ReportAllocs()
				for b.Loop() {
					a.Balance++
					if ok, err := rawUpdate(ctx, sqlDB, dialect, a); !ok || err != nil {
						b.Fatal(ok, err)
					}
				}
			})
			// The same Update through GORM's callbacks (WithCallbacks; the
			// default when plugins are registered), so a tracing plugin
			// would see it.
			b.Run("gormlock-callbacks", func(b *testing.B) {
				viaCallbacks, err := repository.New[fixtures.Account](db, repository.WithCallbacks(true))
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					a.Balance++
					if err := viaCallbacks.Update(ctx, a); err != nil {
						b.Fatal(err)
					}
				}
			})
			// With GORM's logger at Info writing to io.Discard: what
			// logging every statement costs, the caller's file:line included.
			b.Run("gormlock-logged", func(b *testing.B) {
				loud := db.Session(&gorm.Session{Logger: logger.New(log.New(io.Discard, "", 0), logger.Config{LogLevel: logger.Info})})
				logged, err := repository.New[fixtures.Account](loud)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					a.Balance++
					if err := logged.Update(ctx, a); err != nil {
						b.Fatal(err)
					}
				}
			})
			// The same Update with an operation key: the write and the
			// key's record in one transaction.
			b.Run("gormlock-opkey", func(b *testing.B) {
				b.ReportAllocs()
				var n int
				for b.Loop() {
					a.Balance++
					n++
					if err := accounts.Update(ctx, a, repository.OpKey("bench-"+strconv.Itoa(n)+"-"+strconv.FormatInt(a.Version, 10))); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("gorm-by-hand", func(b *testing.B) {
				gdb := db.Session(&gorm.Session{SkipDefaultTransaction: true})
				b.ReportAllocs()
				for b.Loop() {
					a.Balance++
					res := gdb.WithContext(ctx).Model(&fixtures.Account{}).Where("id = ? AND version = ?", a.ID, a.Version).
						Updates(map[string]any{"owner": a.Owner, "balance": a.Balance, "frozen": a.Frozen, "version": a.Version + 1})
					if res.Error != nil || res.RowsAffected != 1 {
						b.Fatal(res.Error, res.RowsAffected)
					}
					a.Version++
				}
			})
		})
	}
}

// BenchmarkGet compares a read by primary key through the repository with
// the same SELECT sent through database/sql, and with GORM's Take (what Get
// used to run). One worker, one row.
func BenchmarkGet(b *testing.B) {
	for _, dialect := range testdb.Dialects {
		b.Run(dialect, func(b *testing.B) {
			db := testdb.Open(b, dialect)
			ctx := context.Background()
			accounts, err := repository.New[fixtures.Account](db)
			if err != nil {
				b.Fatal(err)
			}
			a := &fixtures.Account{Owner: "bench", Balance: 1}
			if err := accounts.Create(ctx, a); err != nil {
				b.Fatal(err)
			}
			b.Run("gormlock", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := accounts.Get(ctx, a.ID); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("database-sql", func(b *testing.B) {
				sqlDB, _ := db.DB()
				q := rawSelectSQL[dialect]
				b.ReportAllocs()
				for b.Loop() {
					var x fixtures.Account
					if err := sqlDB.QueryRowContext(ctx, q, a.ID).Scan(&x.ID, &x.Version, &x.CreatedAt, &x.UpdatedAt, &x.Owner, &x.Balance, &x.Frozen); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("gorm-take", func(b *testing.B) {
				gdb := db.Session(&gorm.Session{SkipDefaultTransaction: true})
				b.ReportAllocs()
				for b.Loop() {
					var x fixtures.Account
					if err := gdb.WithContext(ctx).Take(&x, a.ID).Error; err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// rawSelectSQL is the read Get sends (every column, by key), written by hand
// for each dialect.
var rawSelectSQL = map[string]string{
	"sqlite":   "SELECT `id`, `version`, `created_at`, `updated_at`, `owner`, `balance`, `frozen` FROM `accounts` WHERE `id` = ?",
	"postgres": `SELECT "id", "version", "created_at", "updated_at", "owner", "balance", "frozen" FROM "accounts" WHERE "id" = $1`,
	"mariadb":  "SELECT `id`, `version`, `created_at`, `updated_at`, `owner`, `balance`, `frozen` FROM `accounts` WHERE `id` = ?",
}

// BenchmarkMutate compares Mutate (read, fn, guarded write) with the same
// read-modify-write written by hand on database/sql, and adds a Get through
// the repository for the read's share. One worker, one row, no conflicts.
func BenchmarkMutate(b *testing.B) {
	for _, dialect := range testdb.Dialects {
		b.Run(dialect, func(b *testing.B) {
			db := testdb.Open(b, dialect)
			ctx := context.Background()
			accounts, err := repository.New[fixtures.Account](db)
			if err != nil {
				b.Fatal(err)
			}
			a := &fixtures.Account{Owner: "bench", Balance: 1}
			if err := accounts.Create(ctx, a); err != nil {
				b.Fatal(err)
			}
			inc := func(a *fixtures.Account) error { a.Balance++; return nil }
			b.Run("gormlock", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := accounts.Mutate(ctx, a.ID, inc); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("database-sql", func(b *testing.B) {
				sqlDB, _ := db.DB()
				sel := rawSelectSQL[dialect]
				b.ReportAllocs()
				for b.Loop() {
					var x fixtures.Account
					if err := sqlDB.QueryRowContext(ctx, sel, a.ID).Scan(&x.ID, &x.Version, &x.CreatedAt, &x.UpdatedAt, &x.Owner, &x.Balance, &x.Frozen); err != nil {
						b.Fatal(err)
					}
					x.Balance++
					if ok, err := rawUpdate(ctx, sqlDB, dialect, &x); !ok || err != nil {
						b.Fatal(ok, err)
					}
				}
			})
		})
	}
}

// BenchmarkMutateParallel is BenchmarkMutate with 8 goroutines per CPU
// spread over 1,000 rows, where round trips overlap and the client's own
// cost shows as a share of the machine rather than of one round trip.
func BenchmarkMutateParallel(b *testing.B) {
	for _, dialect := range testdb.Dialects {
		b.Run(dialect, func(b *testing.B) {
			db := testdb.Open(b, dialect)
			ctx := context.Background()
			sqlDB, _ := db.DB()
			sqlDB.SetMaxOpenConns(40)
			sqlDB.SetMaxIdleConns(40)
			accounts, err := repository.New[fixtures.Account](db)
			if err != nil {
				b.Fatal(err)
			}
			ids := make([]int64, 1000)
			for i := range ids {
				a := &fixtures.Account{Owner: "bench"}
				if err := accounts.Create(ctx, a); err != nil {
					b.Fatal(err)
				}
				ids[i] = a.ID
			}
			inc := func(a *fixtures.Account) error { a.Balance++; return nil }
			var next atomic.Int64
			pick := func() int64 { return ids[next.Add(7919)%int64(len(ids))] }
			b.Run("gormlock", func(b *testing.B) {
				b.ReportAllocs()
				b.SetParallelism(4)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := accounts.Mutate(ctx, pick(), inc); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
			b.Run("database-sql", func(b *testing.B) {
				sel := rawSelectSQL[dialect]
				b.ReportAllocs()
				b.SetParallelism(4)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						id := pick()
						for {
							var x fixtures.Account
							if err := sqlDB.QueryRowContext(ctx, sel, id).Scan(&x.ID, &x.Version, &x.CreatedAt, &x.UpdatedAt, &x.Owner, &x.Balance, &x.Frozen); err != nil {
								b.Error(err)
								return
							}
							x.Balance++
							ok, err := rawUpdate(ctx, sqlDB, dialect, &x)
							if err != nil {
								b.Error(err)
								return
							}
							if ok {
								break
							}
						}
					}
				})
			})
		})
	}
}
