package repository_test

// What an application's GORM logger, callbacks and plugins see of
// gormlock's statements, and where dbresolver sends them.

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	mysqlopen "github.com/gormlock/gormlock/opendb/mysql"
	pgopen "github.com/gormlock/gormlock/opendb/postgres"
	sqliteopen "github.com/gormlock/gormlock/opendb/sqlite"

	"github.com/stretchr/testify/require"
	"gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
	"gorm.io/plugin/dbresolver"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

// recorder is a GORM logger that keeps every statement it is shown.
type recorder struct {
	mu   sync.Mutex
	sqls []string
}

func (r *recorder) LogMode(logger.LogLevel) logger.Interface      { return r }
func (r *recorder) Info(context.Context, string, ...interface{})  {}
func (r *recorder) Warn(context.Context, string, ...interface{})  {}
func (r *recorder) Error(context.Context, string, ...interface{}) {}
func (r *recorder) Trace(_ context.Context, _ time.Time, fc func() (string, int64), _ error) {
	sql, _ := fc()
	r.mu.Lock()
	r.sqls = append(r.sqls, sql)
	r.mu.Unlock()
}

// take returns the statements logged since the last take.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.sqls
	r.sqls = nil
	return out
}

// logged runs op and returns the statements it logged, each checked to
// name this file as the caller.
func logged(t *testing.T, rec *recorder, op func() error) []string {
	t.Helper()
	rec.take()
	require.NoError(t, op())
	sqls := rec.take()
	for _, s := range sqls {
		require.Contains(t, s, "/* gormlock: ", "the caller is named: %s", s)
		require.Contains(t, s, "observe_test.go:", "the caller is this test: %s", s)
	}
	return sqls
}

// containsStatement reports a statement starting with prefix, after
// MariaDB's SET STATEMENT ... FOR, if any.
func containsStatement(sqls []string, prefix string) bool {
	for _, s := range sqls {
		s = strings.TrimSpace(s)
		if strings.HasPrefix(s, "SET STATEMENT ") {
			if _, rest, ok := strings.Cut(s, " FOR "); ok {
				s = rest
			}
		}
		// PostgreSQL's one-statement lease calls are CTEs: WITH g AS
		// (INSERT INTO gormlock_leases ...
		if _, rest, ok := strings.Cut(s, " AS ("); ok && strings.HasPrefix(s, "WITH ") {
			s = rest
		}
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

func TestLoggerSeesEveryStatementWithTheCaller(t *testing.T) {
	for _, callbacks := range []bool{false, true} {
		name := "fast path"
		if callbacks {
			name = "callbacks"
		}
		t.Run(name, func(t *testing.T) {
			eachApp(t, func(t *testing.T, db *gorm.DB) {
				ctx := testdb.Ctx(t)
				rec := &recorder{}
				db = db.Session(&gorm.Session{Logger: rec})
				products := mustRepo[product](t, db, repository.WithLeases(), repository.WithCallbacks(callbacks))
				p := &product{Name: "lamp"}
				sqls := logged(t, rec, func() error { return products.Create(ctx, p) })
				require.True(t, containsStatement(sqls, "INSERT INTO"), "%q", sqls)

				sqls = logged(t, rec, func() error { var err error; p, err = products.Get(ctx, p.ID); return err })
				require.True(t, containsStatement(sqls, "SELECT"), "%q", sqls)

				p.Stock = 4
				sqls = logged(t, rec, func() error { return products.Update(ctx, p) })
				require.True(t, containsStatement(sqls, "UPDATE"), "%q", sqls)
				require.Contains(t, strings.Join(sqls, "\n"), "4", "arguments are shown")

				sqls = logged(t, rec, func() error {
					_, err := products.Mutate(ctx, p.ID, func(p *product) error { p.Stock++; return nil })
					return err
				})
				require.True(t, containsStatement(sqls, "SELECT") && containsStatement(sqls, "UPDATE"), "%q", sqls)

				// The stale check is a statement too.
				stale := *p
				stale.Version--
				rec.take()
				require.ErrorIs(t, products.Update(ctx, &stale), locking.ErrStaleData)
				require.Len(t, rec.take(), 2, "the guarded UPDATE and the version read")

				var lease *repository.Lease
				sqls = logged(t, rec, func() error {
					var err error
					_, lease, err = products.Leases().Acquire(ctx, p.ID, "alice")
					return err
				})
				require.True(t, containsStatement(sqls, "INSERT INTO gormlock_leases"), "%q", sqls)
				sqls = logged(t, rec, func() error { return products.Leases().Release(ctx, lease) })
				require.True(t, containsStatement(sqls, "UPDATE gormlock_leases"), "%q", sqls)

				p, err := products.Get(ctx, p.ID)
				require.NoError(t, err)
				sqls = logged(t, rec, func() error { return products.Delete(ctx, p) })
				require.True(t, containsStatement(sqls, "UPDATE"), "a soft delete: %q", sqls)
			})
		})
	}
}

// A callback an application (or a tracing plugin) registers on GORM's Raw
// and Row processors sees gormlock's statements in callbacks mode.
func TestCallbacksSeeStatements(t *testing.T) {
	eachApp(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		var mu sync.Mutex
		var seen []string
		record := func(tx *gorm.DB) {
			mu.Lock()
			seen = append(seen, tx.Statement.SQL.String())
			mu.Unlock()
		}
		require.NoError(t, db.Callback().Raw().Before("gorm:raw").Register("test:seen", record))
		require.NoError(t, db.Callback().Row().Before("gorm:row").Register("test:seen", record))
		// What a tracing plugin does, for GORM's own statements.
		require.NoError(t, db.Callback().Create().Before("gorm:create").Register("test:seen", func(tx *gorm.DB) {
			mu.Lock()
			seen = append(seen, "create")
			mu.Unlock()
		}))

		for _, on := range []bool{false, true} {
			products := mustRepo[product](t, db, repository.WithCallbacks(on))
			mu.Lock()
			seen = nil
			mu.Unlock()
			p := &product{Name: "lamp"}
			require.NoError(t, products.Create(ctx, p))
			p.Stock = 2
			require.NoError(t, products.Update(ctx, p))
			_, err := products.Get(ctx, p.ID)
			require.NoError(t, err)
			mu.Lock()
			got := append([]string(nil), seen...)
			mu.Unlock()
			require.Contains(t, got, "create", "GORM's Create always runs its callbacks")
			if on {
				require.True(t, containsStatement(got, "UPDATE") && containsStatement(got, "SELECT"), "callbacks mode: %q", got)
			} else {
				require.False(t, containsStatement(got, "UPDATE"), "fast path: %q", got)
			}
		}
	})
}

// With dbresolver whose replica is another database, holding an older copy
// of the record: Find reads the replica, and every read a write depends on
// reads the primary.
func TestDBResolverKeepsDecidingReadsOnThePrimary(t *testing.T) {
	for _, d := range testdb.Dialects {
		t.Run(d, func(t *testing.T) {
			ctx := testdb.Ctx(t)
			var primaryDB, replica *gorm.DB
			var replicaDialector gorm.Dialector
			switch d {
			case "sqlite":
				dir := t.TempDir()
				primaryDB = testdb.OpenSQLiteFile(t, filepath.Join(dir, "primary.db"))
				replica = testdb.OpenSQLiteFile(t, filepath.Join(dir, "replica.db"))
				dsn, err := sqliteopen.DSN(filepath.Join(dir, "replica.db"))
				require.NoError(t, err)
				replicaDialector = sqlite.Open(dsn)
			case "mariadb":
				primaryDB = testdb.Open(t, d)
				dsn, err := mysqlopen.DSN(testdb.MariaDBDatabase(t))
				require.NoError(t, err)
				replica, err = mysqlopen.Open(dsn)
				require.NoError(t, err)
				t.Cleanup(func() { _ = fixtures.Close(replica) })
				require.NoError(t, fixtures.Migrate(ctx, replica))
				replicaDialector = mysql.Open(dsn)
			default:
				primaryDB = testdb.Open(t, d)
				dsn := testdb.PostgresSchema(t)
				var err error
				replica, err = pgopen.Open(dsn)
				require.NoError(t, err)
				t.Cleanup(func() { _ = fixtures.Close(replica) })
				require.NoError(t, fixtures.Migrate(ctx, replica))
				replicaDialector = postgres.Open(dsn)
			}
			for _, db := range []*gorm.DB{primaryDB, replica} {
				require.NoError(t, db.AutoMigrate(&product{}))
			}
			// The replica lags: it has the record's first state only.
			products := mustRepo[product](t, primaryDB)
			p := &product{Name: "lamp", Stock: 1}
			require.NoError(t, products.Create(ctx, p))
			old := *p
			require.NoError(t, replica.Create(&old).Error)
			p.Stock = 2
			require.NoError(t, products.Update(ctx, p))

			require.NoError(t, primaryDB.Use(dbresolver.Register(dbresolver.Config{Replicas: []gorm.Dialector{replicaDialector}})))
			for _, callbacks := range []bool{true, false} {
				resolved := mustRepo[product](t, primaryDB, repository.WithLeases(), repository.WithCallbacks(callbacks))
				list, err := resolved.Find(ctx)
				require.NoError(t, err)
				require.Len(t, list, 1)
				require.Equal(t, 1, list[0].Stock, "Find reads the replica (the test's premise)")

				got, err := resolved.Get(ctx, p.ID)
				require.NoError(t, err)
				stock := got.Stock
				require.Greater(t, stock, 1, "Get reads the primary")
				out, err := resolved.Mutate(ctx, p.ID, func(p *product) error { p.Stock++; return nil })
				require.NoError(t, err)
				require.Equal(t, stock+1, out.Stock)
				out, err = resolved.Upsert(ctx, p.ID, func() *product { return &product{} }, func(p *product) error { p.Stock++; return nil })
				require.NoError(t, err)
				require.Equal(t, stock+2, out.Stock)
				out, err = resolved.MutateRowLocked(ctx, p.ID, func(p *product) error { p.Stock++; return nil })
				require.NoError(t, err)
				require.Equal(t, stock+3, out.Stock)
				leased, lease, err := resolved.Leases().Acquire(ctx, p.ID, "alice")
				require.NoError(t, err)
				require.Equal(t, stock+3, leased.Stock)
				leased.Stock++
				require.NoError(t, resolved.Leases().Update(ctx, leased, lease))

				// The stale check reads the primary's version.
				var se *locking.StaleDataError
				require.ErrorAs(t, resolved.Update(ctx, &list[0]), &se, "callbacks=%v", callbacks)
				require.Equal(t, leased.Version, se.Actual)
			}
		})
	}
}
