package repository_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver, with pgx's defaults
	_ "github.com/mattn/go-sqlite3"    // the "sqlite3" database/sql driver
	"gorm.io/driver/postgres"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/internal/tests/testdb"
	pgopen "github.com/gormlock/gormlock/opendb/postgres"
	sqliteopen "github.com/gormlock/gormlock/opendb/sqlite"
	"github.com/gormlock/gormlock/repository"
)

// hotPathRoundEnv numbers BenchmarkHotPath's round (one test process each):
// in odd rounds the baseline of each pair runs first, in even ones gormlock.
const hotPathRoundEnv = "GORMLOCK_BENCH_ROUND"

// BenchmarkHotPath measures issue 29's hot path, defaults everywhere, each
// pair side by side in one round: gormlock opened by opendb/postgres or
// opendb/sqlite with nothing set, against
//
//   - Get: plain GORM's First, opened with gorm.io/driver/postgres (or
//     gorm.io/driver/sqlite) and an empty gorm.Config;
//   - Update: the same guarded UPDATE ... WHERE id = ? AND version = ?
//     through database/sql with pgx's driver and its defaults (or
//     go-sqlite3); Update/ctx=cancellable is the same pair with a context
//     that can end (context.WithCancel), as an HTTP handler passes;
//   - Mutate: the same read-modify-write written by hand with plain GORM
//     (First, change, Updates with a version condition, RowsAffected checked).
//
// On PostgreSQL every side connects directly with the same DSN. On SQLite
// gormlock and the baselines each open a file of their own, in one
// directory, with opendb/sqlite's DSN (WAL, synchronous=NORMAL, busy
// timeout): the drivers' own defaults would put the baselines on a
// rollback journal with synchronous=FULL, another database setup rather
// than another client. One worker, one row per side.
// A round is one run of the test binary (-count repeats each sub-benchmark
// back to back, which would not interleave them): the pairs of a round run
// next to each other, gormlock first or the baseline first as
// GORMLOCK_BENCH_ROUND is even or odd. Compare the pairs' ratios within a
// round, not across rounds:
//
//	go test -c -o /tmp/hotpath.test ./internal/tests/repository
//	for r in 1 2 3 4 5 6 7 8; do GORMLOCK_BENCH_ROUND=$r /tmp/hotpath.test -test.run '^$' -test.bench '^BenchmarkHotPath$' -test.benchmem; done
func BenchmarkHotPath(b *testing.B) {
	round, _ := strconv.Atoi(os.Getenv(hotPathRoundEnv))
	for _, dialect := range []string{"postgres", "sqlite"} {
		b.Run("db="+dialect, func(b *testing.B) {
			for _, p := range hotPathPairs(b, dialect) {
				sides := []func(){
					func() { b.Run("op="+p.op+"/impl=gormlock", p.gormlock.bench) },
					func() { b.Run("op="+p.op+"/impl="+p.baselineName, p.baseline.bench) },
				}
				if round%2 == 1 {
					sides[0], sides[1] = sides[1], sides[0]
				}
				for _, run := range sides {
					run()
				}
			}
		})
	}
}

// BenchmarkHotPathInterleaved measures BenchmarkHotPath's PostgreSQL pairs
// call by call: every iteration makes one gormlock call and one baseline
// call, in turns first (gormlock first in even iterations), timing each,
// and reports gormlock's time over the baseline's as "ratio", with each
// side's ns per call. Both sides of a ratio therefore run under the same
// load and the same state of the server's disk, which drift over a second
// on a shared machine (the commit's flush is most of an Update); its ns/op
// is the two calls together. Allocations per side are BenchmarkHotPath's.
//
// Not on SQLite: there gormlock's gate copies the log back into the
// database in a goroutine beside the writes (see sqlitegate), and call by
// call that work would be timed as the baseline's next call, not as
// gormlock's; BenchmarkHotPath's rounds of a side at a time count it.
//
//	go test -c -o /tmp/hotpath.test ./internal/tests/repository
//	/tmp/hotpath.test -test.run '^$' -test.bench '^BenchmarkHotPathInterleaved$' -test.count 8
func BenchmarkHotPathInterleaved(b *testing.B) {
	b.Run("db=postgres", func(b *testing.B) {
		for _, p := range hotPathPairs(b, "postgres") {
			b.Run("op="+p.op+"/vs="+p.baselineName, func(b *testing.B) {
				var gl, base time.Duration
				i := 0
				for b.Loop() {
					sides := [2]hotPathCall{p.gormlock, p.baseline}
					took := [2]*time.Duration{&gl, &base}
					if i%2 == 1 {
						sides[0], sides[1] = sides[1], sides[0]
						took[0], took[1] = took[1], took[0]
					}
					i++
					for k, call := range sides {
						start := time.Now()
						if err := call(); err != nil {
							b.Fatal(err)
						}
						*took[k] += time.Since(start)
					}
				}
				if base > 0 {
					b.ReportMetric(float64(gl)/float64(base), "ratio")
				}
				b.ReportMetric(float64(gl.Nanoseconds())/float64(i), "gormlock-ns/call")
				b.ReportMetric(float64(base.Nanoseconds())/float64(i), "baseline-ns/call")
			})
		}
	})
}

// hotPathCall is one call of a hot-path pair's side.
type hotPathCall func() error

// bench runs c as a benchmark of its own, reporting its allocations.
func (c hotPathCall) bench(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if err := c(); err != nil {
			b.Fatal(err)
		}
	}
}

// hotPathPair is one of issue 29's hot-path comparisons: gormlock's call
// and the baseline a user would write without it, each on a row of its
// own.
type hotPathPair struct {
	op, baselineName   string
	gormlock, baseline hotPathCall
}

// hotPathPairs opens gormlock, plain GORM and database/sql on dialect's
// database, defaults everywhere (see BenchmarkHotPath), creates a row for
// each side and returns the pairs: Get, Update, Update with a context
// that can end, and Mutate.
func hotPathPairs(b *testing.B, dialect string) []hotPathPair {
	var glDB, gormDB *gorm.DB
	baselineDB := (*gorm.DB)(nil) // gormlock on the baselines' database, to set it up
	var sqlDB *sql.DB
	var err error
	switch dialect {
	case "postgres":
		dsn := testdb.PostgresSchema(b)
		glDB, err = pgopen.Open(dsn)
		if err == nil {
			gormDB, err = gorm.Open(postgres.Open(dsn), &gorm.Config{})
		}
		if err == nil {
			sqlDB, err = sql.Open("pgx", dsn)
		}
		baselineDB = glDB
	case "sqlite":
		// A file for each side: a side's writes then leave the other's
		// connections' page caches alone, and each side's connections
		// copy only its own writes back from the log (the baselines'
		// connections checkpoint in their commits; gormlock's writer
		// leaves that to its gate), as in BenchmarkHotPath's runs of a
		// side at a time.
		dir := b.TempDir()
		baselinePath := filepath.Join(dir, "baseline.db")
		glDB, err = sqliteopen.Open(filepath.Join(dir, "gormlock.db"))
		if err == nil {
			baselineDB, err = sqliteopen.Open(baselinePath)
		}
		var dsn string
		if err == nil {
			dsn, err = sqliteopen.DSN(baselinePath)
		}
		if err == nil {
			gormDB, err = gorm.Open(sqlite.Open(dsn), &gorm.Config{})
		}
		if err == nil {
			sqlDB, err = sql.Open("sqlite3", dsn)
		}
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = sqlDB.Close()
		_ = fixtures.Close(gormDB)
		_ = fixtures.Close(glDB)
	})
	ctx := context.Background()
	dbs := []*gorm.DB{glDB}
	if baselineDB != glDB {
		dbs = append(dbs, baselineDB) // SQLite: the baselines' own file
	}
	for _, db := range dbs {
		if err := fixtures.Migrate(ctx, db); err != nil {
			b.Fatal(err)
		}
	}
	create := func(db *gorm.DB, a *fixtures.Account) *repository.Repository[fixtures.Account] {
		r, err := repository.New[fixtures.Account](db)
		if err == nil {
			err = r.Create(ctx, a)
		}
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
	mine := &fixtures.Account{Owner: "gormlock", Balance: 1}
	theirs := &fixtures.Account{Owner: "baseline", Balance: 1}
	accounts := create(glDB, mine)
	create(baselineDB, theirs)
	if baselineDB != glDB {
		if err := fixtures.Close(baselineDB); err != nil {
			b.Fatal(err)
		}
	}
	inc := func(a *fixtures.Account) error { a.Balance++; return nil }
	rawUpdated := func(ctx context.Context) hotPathCall {
		return func() error {
			theirs.Balance++
			ok, err := rawUpdate(ctx, sqlDB, dialect, theirs)
			if err == nil && !ok {
				err = errors.New("the baseline's guarded UPDATE matched no row")
			}
			return err
		}
	}
	updated := func(ctx context.Context) hotPathCall {
		return func() error {
			mine.Balance++
			return accounts.Update(ctx, mine)
		}
	}
	// The same pair with a context that can end, as an HTTP handler's:
	// database/sql then watches it on every call, and gormlock waits for
	// SQLite's write lock in Go.
	cctx, cancel := context.WithCancel(ctx)
	b.Cleanup(cancel)
	return []hotPathPair{
		{
			op: "Get", baselineName: "gorm-first",
			gormlock: func() error { _, err := accounts.Get(ctx, mine.ID); return err },
			baseline: func() error { var x fixtures.Account; return gormDB.WithContext(ctx).First(&x, theirs.ID).Error },
		},
		{op: "Update", baselineName: "database-sql", gormlock: updated(ctx), baseline: rawUpdated(ctx)},
		{op: "Update/ctx=cancellable", baselineName: "database-sql", gormlock: updated(cctx), baseline: rawUpdated(cctx)},
		{
			op: "Mutate", baselineName: "gorm-by-hand",
			gormlock: func() error {
				a, err := accounts.Mutate(ctx, mine.ID, inc)
				if err == nil {
					*mine = *a // for a pair that may come after
				}
				return err
			},
			baseline: func() error {
				var x fixtures.Account
				if err := gormDB.WithContext(ctx).First(&x, theirs.ID).Error; err != nil {
					return err
				}
				x.Balance++
				res := gormDB.WithContext(ctx).Model(&fixtures.Account{}).Where("id = ? AND version = ?", x.ID, x.Version).
					Updates(map[string]any{"balance": x.Balance, "version": x.Version + 1})
				if res.Error == nil && res.RowsAffected == 1 {
					theirs.Version = x.Version + 1 // for a pair that may come after
				}
				if res.Error == nil && res.RowsAffected != 1 {
					return fmt.Errorf("the baseline's guarded Updates matched %d rows, want 1", res.RowsAffected)
				}
				return res.Error
			},
		},
	}
}
