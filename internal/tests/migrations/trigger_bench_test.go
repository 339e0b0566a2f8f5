package migrations_test

import (
	"context"
	"os"
	"testing"

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/migrations"
	"github.com/gormlock/gormlock/repository"
)

// benchDatabase is a database the trigger's benchmarks run on.
type benchDatabase struct {
	name string
	open func(testing.TB) *gorm.DB
}

// benchDatabases are SQLite, and the servers whose variables are set.
func benchDatabases() []benchDatabase {
	dbs := []benchDatabase{{"sqlite", testdb.SQLite}}
	if os.Getenv(testdb.PostgresEnv) != "" {
		dbs = append(dbs, benchDatabase{"postgres", testdb.Postgres})
	}
	if os.Getenv(testdb.MariaDBEnv) != "" {
		dbs = append(dbs, benchDatabase{"mariadb", testdb.MariaDB})
	}
	return dbs
}

// batch is how many tokens the benchmarks update in turn, and how many
// UPDATEs one transaction holds in the commit=batch sub-benchmarks: each
// of its rows once, so that no row's chain of versions grows long.
const batch = 100

// benchOp is one UPDATE of the benchmarks, run with ctx on conn (the
// database, or the open transaction).
type benchOp func(b *testing.B, ctx context.Context, conn *gorm.DB, repo *repository.Repository[token], tk *token)

// eachTrigger runs op in a loop, from one goroutine, as sub-benchmarks
// <database>/commit=each|batch/trigger=off|on, each on a fresh database
// holding batch tokens, which it updates in turn. commit=each runs every UPDATE as a statement of its
// own, which waits for its commit to be flushed to disk; commit=batch runs
// them in transactions of batch UPDATEs, leaving the statement's own cost.
func eachTrigger(b *testing.B, op benchOp) {
	for _, d := range benchDatabases() {
		for _, commit := range []string{"each", "batch"} {
			for _, on := range []bool{false, true} {
				name := d.name + "/commit=" + commit + "/trigger=off"
				if on {
					name = d.name + "/commit=" + commit + "/trigger=on"
				}
				b.Run(name, func(b *testing.B) {
					db := d.open(b)
					repo, first := tokens(b, db, 1<<40)
					toks := []*token{first}
					for len(toks) < batch {
						tk := &token{Name: "gateway", Status: "active", RemainQuota: 1 << 40}
						if err := repo.Create(context.Background(), tk); err != nil {
							b.Fatal(err)
						}
						toks = append(toks, tk)
					}
					if on {
						if err := migrations.CreateVersionTrigger(context.Background(), db, &token{}); err != nil {
							b.Fatal(err)
						}
					}
					loop(b, db, commit == "batch", func(ctx context.Context, conn *gorm.DB, n int) {
						op(b, ctx, conn, repo, toks[n%batch])
					})
				})
			}
		}
	}
}

// loop runs op once per iteration, numbered from 0: on db, or in
// transactions of batch iterations each.
func loop(b *testing.B, db *gorm.DB, inTx bool, op func(ctx context.Context, conn *gorm.DB, n int)) {
	ctx, conn := context.Background(), db
	var tx *gorm.DB
	begin := func() {
		tx = db.Begin()
		if tx.Error != nil {
			b.Fatal(tx.Error)
		}
		var err error
		if ctx, err = repository.WithTx(context.Background(), tx); err != nil {
			b.Fatal(err)
		}
		conn = tx
	}
	commit := func() {
		if err := tx.Commit().Error; err != nil {
			b.Fatal(err)
		}
	}
	if inTx {
		begin()
	}
	n := 0
	for b.Loop() {
		op(ctx, conn, n)
		if n++; inTx && n%batch == 0 {
			commit()
			begin()
		}
	}
	if inTx {
		commit()
	}
}

// BenchmarkRawUpdate is a raw single-row UPDATE that leaves the version
// alone: with the trigger on, the trigger advances it.
func BenchmarkRawUpdate(b *testing.B) {
	eachTrigger(b, func(b *testing.B, _ context.Context, conn *gorm.DB, _ *repository.Repository[token], tk *token) {
		if err := conn.Exec(chargeSQL, tk.ID).Error; err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkGuardedUpdate is gormlock's guarded Update of one record: it
// advances the version itself, and the trigger, when on, only checks that
// it did.
func BenchmarkGuardedUpdate(b *testing.B) {
	eachTrigger(b, func(b *testing.B, ctx context.Context, conn *gorm.DB, repo *repository.Repository[token], tk *token) {
		tk.RemainQuota--
		if err := repo.Update(ctx, tk); err != nil {
			b.Fatal(err)
		}
		if tk.Version == 0 {
			// MySQL and MariaDB answer an UPDATE of a table with an
			// UPDATE trigger with LAST_INSERT_ID 0, where gormlock
			// reads the version: read it here, off the clock.
			b.StopTimer()
			tk.Version = dbVersion(b, conn, tk.ID)
			b.StartTimer()
		}
	})
}

// BenchmarkRawInsertDelete is a raw INSERT that leaves the version to its
// default and a DELETE of the same row, in transactions of batch pairs:
// with the triggers on, the INSERT trigger gives the row a first version
// (on SQLite, above the floor the DELETE trigger keeps).
func BenchmarkRawInsertDelete(b *testing.B) {
	for _, d := range benchDatabases() {
		for _, on := range []bool{false, true} {
			name := d.name + "/trigger=off"
			if on {
				name = d.name + "/trigger=on"
			}
			b.Run(name, func(b *testing.B) {
				db := d.open(b)
				if err := db.AutoMigrate(&account{}); err != nil {
					b.Fatal(err)
				}
				if on {
					if err := migrations.CreateVersionTrigger(context.Background(), db, &account{}); err != nil {
						b.Fatal(err)
					}
				}
				loop(b, db, true, func(_ context.Context, conn *gorm.DB, n int) {
					if err := conn.Exec("INSERT INTO accounts (id, name, remain_quota) VALUES (?, 'a', 1)", n+1).Error; err != nil {
						b.Fatal(err)
					}
					if err := conn.Exec("DELETE FROM accounts WHERE id = ?", n+1).Error; err != nil {
						b.Fatal(err)
					}
				})
			})
		}
	}
}
