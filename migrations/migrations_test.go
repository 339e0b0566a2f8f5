package migrations_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/gormlock/gormlock/internal/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/migrations"
)

// empties opens an empty (unmigrated) database of each dialect, by
// testdb's name for it.
var empties = []struct {
	name string
	open func(testing.TB) *gorm.DB
}{{"sqlite", testdb.SQLite}, {"postgres", testdb.Postgres}, {"mariadb", testdb.MariaDB}}

// eachEmpty runs fn on an empty (unmigrated) database of every dialect.
func eachEmpty(t *testing.T, fn func(t *testing.T, db *gorm.DB)) {
	t.Helper()
	for _, e := range empties {
		t.Run(e.name, func(t *testing.T) { fn(t, e.open(t)) })
	}
}

// latest is the newest migration version.
const latest = 2

var (
	ownTables     = []string{"gormlock_leases", "gormlock_operations"}
	exampleTables = []string{"accounts", "documents", "jobs"}
)

func requireVersion(t *testing.T, db *gorm.DB, want int64) {
	t.Helper()
	v, err := migrations.Version(context.Background(), db)
	require.NoError(t, err)
	require.Equal(t, want, v)
}

func requireTables(t *testing.T, db *gorm.DB, tables []string, want bool) {
	t.Helper()
	for _, table := range tables {
		require.Equal(t, want, db.Migrator().HasTable(table), "table %s exists", table)
	}
}

func count(t *testing.T, db *gorm.DB, query string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, db.Raw(query).Scan(&n).Error)
	return n
}

// versions returns the versions recorded in the goose version table table.
func versions(t *testing.T, db *gorm.DB, table string) []int64 {
	t.Helper()
	var out []int64
	require.NoError(t, db.Table(table).Order("version_id").Pluck("version_id", &out).Error)
	return out
}

func insertLease(t *testing.T, db *gorm.DB, key string) {
	t.Helper()
	require.NoError(t, db.Exec(`INSERT INTO gormlock_leases (resource, record_key, owner, token_hash, fence, acquired_ms, expires_ms)
		VALUES ('accounts', ?, 'ann', NULL, 1, 0, 0)`, key).Error)
}

func TestUpDownUp(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		requireTables(t, db, ownTables, false)
		requireVersion(t, db, 0)

		require.NoError(t, migrations.Up(ctx, db))
		requireTables(t, db, ownTables, true)
		requireVersion(t, db, latest)
		assert.Equal(t, []int64{0, 1, 2}, versions(t, db, migrations.VersionTable))
		requireTables(t, db, exampleTables, false)
		assert.False(t, db.Migrator().HasTable(goose.DefaultTablename), "gormlock never uses goose's default table")

		// A second Up applies nothing: the data survives and goose records nothing new.
		insertLease(t, db, "1")
		require.NoError(t, migrations.Up(ctx, db))
		requireVersion(t, db, latest)
		assert.Equal(t, int64(1), count(t, db, `SELECT count(*) FROM gormlock_leases`))
		assert.Equal(t, []int64{0, 1, 2}, versions(t, db, migrations.VersionTable))

		require.NoError(t, migrations.Down(ctx, db))
		requireTables(t, db, ownTables, false)
		requireVersion(t, db, 0)

		// Down with nothing applied is a no-op too.
		require.NoError(t, migrations.Down(ctx, db))
		requireVersion(t, db, 0)

		require.NoError(t, migrations.Up(ctx, db))
		requireTables(t, db, ownTables, true)
		requireVersion(t, db, latest)
		assert.Equal(t, int64(0), count(t, db, `SELECT count(*) FROM gormlock_leases`))
		requireTables(t, db, exampleTables, false)
	})
}

func TestConstraints(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *gorm.DB) {
		require.NoError(t, migrations.Up(context.Background(), db))
		lease := func(key string, fence any) error {
			return db.Exec(`INSERT INTO gormlock_leases (resource, record_key, fence, acquired_ms, expires_ms)
				VALUES ('accounts', ?, ?, 0, 0)`, key, fence).Error
		}
		require.NoError(t, lease("1", 1))
		requireConstraint(t, db, lease("2", nil), notNull, "null fence")
		requireConstraint(t, db, lease("3", 0), check, "zero fence")
		requireConstraint(t, db, lease("4", -1), check, "negative fence")
		requireConstraint(t, db, db.Exec(`INSERT INTO gormlock_operations (op_key, resource, record_key, kind, version, created_ms, expires_ms)
			VALUES ('k', 'accounts', NULL, 'update', 2, 0, 0)`).Error, notNull, "null record_key")
		assert.Equal(t, int64(1), count(t, db, `SELECT count(*) FROM gormlock_leases`))
		assert.Equal(t, int64(0), count(t, db, `SELECT count(*) FROM gormlock_operations`))
	})
}

// A constraint violation's code per dialect, as locking.Code reports it
// (SQLite's extended result codes SQLITE_CONSTRAINT_NOTNULL and
// SQLITE_CONSTRAINT_CHECK; SQLSTATE; MySQL's error numbers, a CHECK being
// 4025 on MariaDB and 3819 on MySQL), so this file needs no driver's types.
var (
	notNull = map[string][]string{"sqlite": {"SQLITE_1299"}, "postgres": {"23502"}, "mysql": {"1048"}}
	check   = map[string][]string{"sqlite": {"SQLITE_275"}, "postgres": {"23514"}, "mysql": {"4025", "3819"}}
)

func requireConstraint(t *testing.T, db *gorm.DB, err error, code map[string][]string, msg string) {
	t.Helper()
	require.Error(t, err, msg)
	assert.Contains(t, code[db.Dialector.Name()], locking.Code(err), "%s: %v", msg, err)
}

// The application's own goose migrations, 1 to 3, in goose's default
// table. Their SQL runs on every dialect.
var appMigrations = fstest.MapFS{
	"00001_users.sql": {Data: []byte(`-- +goose Up
CREATE TABLE users (id BIGINT PRIMARY KEY, name TEXT NOT NULL);
-- +goose Down
DROP TABLE users;
`)},
	"00002_orders.sql": {Data: []byte(`-- +goose Up
CREATE TABLE orders (id BIGINT PRIMARY KEY, user_id BIGINT NOT NULL);
-- +goose Down
DROP TABLE orders;
`)},
	"00003_users_email.sql": {Data: []byte(`-- +goose Up
ALTER TABLE users ADD COLUMN email TEXT;
-- +goose Down
ALTER TABLE users DROP COLUMN email;
`)},
}

var gooseDialects = map[string]goose.Dialect{"sqlite": goose.DialectSQLite3, "postgres": goose.DialectPostgres, "mysql": goose.DialectMySQL}

// gooseProvider returns a provider of fsys's migrations in goose's default
// table, as an application that uses goose has.
func gooseProvider(t *testing.T, db *gorm.DB, fsys fs.FS) *goose.Provider {
	t.Helper()
	sqlDB, err := db.DB()
	require.NoError(t, err)
	p, err := goose.NewProvider(gooseDialects[db.Dialector.Name()], sqlDB, fsys)
	require.NoError(t, err)
	return p
}

func requireAppVersion(t *testing.T, app *goose.Provider, want int64) {
	t.Helper()
	v, err := app.GetDBVersion(context.Background())
	require.NoError(t, err)
	require.Equal(t, want, v)
}

// requireAppSchema checks that the application's three migrations have
// taken effect (or that none has).
func requireAppSchema(t *testing.T, db *gorm.DB, want bool) {
	t.Helper()
	requireTables(t, db, []string{"users", "orders"}, want)
	if want {
		assert.True(t, db.Migrator().HasColumn("users", "email"), "migration 3 ran")
	}
}

func TestSideBySideWithTheApplicationsGooseMigrations(t *testing.T) {
	for _, order := range []string{"application first", "gormlock first"} {
		t.Run(order, func(t *testing.T) {
			eachEmpty(t, func(t *testing.T, db *gorm.DB) {
				ctx := context.Background()
				app := gooseProvider(t, db, appMigrations)
				upApp := func() {
					_, err := app.Up(ctx)
					require.NoError(t, err)
				}
				upGormlock := func() { require.NoError(t, migrations.Up(ctx, db)) }
				if order == "application first" {
					upApp()
					upGormlock()
				} else {
					upGormlock()
					upApp()
				}

				// Both fully applied, each in its own table.
				requireAppSchema(t, db, true)
				requireTables(t, db, ownTables, true)
				requireAppVersion(t, app, 3)
				requireVersion(t, db, latest)
				assert.Equal(t, []int64{0, 1, 2, 3}, versions(t, db, goose.DefaultTablename))
				assert.Equal(t, []int64{0, 1, 2}, versions(t, db, migrations.VersionTable))

				// Again, in the other order: nothing to do.
				upGormlock()
				upApp()
				assert.Equal(t, []int64{0, 1, 2, 3}, versions(t, db, goose.DefaultTablename))
				assert.Equal(t, []int64{0, 1, 2}, versions(t, db, migrations.VersionTable))

				// Down of one leaves the other.
				require.NoError(t, migrations.Down(ctx, db))
				requireTables(t, db, ownTables, false)
				requireVersion(t, db, 0)
				requireAppSchema(t, db, true)
				requireAppVersion(t, app, 3)

				upGormlock()
				_, err := app.DownTo(ctx, 0)
				require.NoError(t, err)
				requireAppSchema(t, db, false)
				requireAppVersion(t, app, 0)
				requireTables(t, db, ownTables, true)
				requireVersion(t, db, latest)
			})
		})
	}
}

// legacy returns the migrations of the gormlock that recorded its versions
// in goose_db_version (1 and 2 the example tables, 3 the lease table, 4 the
// operation table), in goose's default table as it applied them. That
// gormlock did not support MySQL: the test is skipped there.
func legacy(t *testing.T, db *gorm.DB) *goose.Provider {
	t.Helper()
	if db.Dialector.Name() == "mysql" {
		t.Skip("no gormlock that kept its versions in goose_db_version ran on MySQL or MariaDB")
	}
	return gooseProvider(t, db, os.DirFS(filepath.Join("testdata", "legacy", db.Dialector.Name())))
}

// The negative control of the test above: with the previous gormlock's
// migrations in goose_db_version, the application's migrations 1 to 3 are
// skipped, as the issue reports.
func TestTheLegacyMigrationsSkippedTheApplications(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		_, err := legacy(t, db).Up(ctx)
		require.NoError(t, err)
		applied, err := gooseProvider(t, db, appMigrations).Up(ctx)
		require.NoError(t, err, "goose sees versions 1 to 3 applied, silently")
		assert.Empty(t, applied)
		requireAppSchema(t, db, false)
	})
}

func TestUpAdoptsADatabaseOfThePreviousVersion(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		old := legacy(t, db)
		_, err := old.Up(ctx)
		require.NoError(t, err)
		insertLease(t, db, "7")
		before := versions(t, db, goose.DefaultTablename)
		require.Equal(t, []int64{0, 1, 2, 3, 4}, before)

		require.NoError(t, migrations.Up(ctx, db))
		requireVersion(t, db, latest)
		assert.Equal(t, []int64{0, 1, 2}, versions(t, db, migrations.VersionTable))
		assert.Equal(t, int64(1), count(t, db, `SELECT count(*) FROM gormlock_leases`), "the lease table was kept")
		assert.Equal(t, before, versions(t, db, goose.DefaultTablename), "goose_db_version is left alone")
		requireTables(t, db, exampleTables, true)

		// Down now drops gormlock's tables, and only those.
		require.NoError(t, migrations.Down(ctx, db))
		requireTables(t, db, ownTables, false)
		requireTables(t, db, exampleTables, true)
	})
}

func TestUpAdoptsWhatExistsAndCreatesTheRest(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		_, err := legacy(t, db).UpTo(ctx, 3) // a gormlock from before operation keys
		require.NoError(t, err)
		insertLease(t, db, "7")
		require.False(t, db.Migrator().HasTable("gormlock_operations"))

		require.NoError(t, migrations.Up(ctx, db))
		requireVersion(t, db, latest)
		requireTables(t, db, ownTables, true)
		assert.Equal(t, int64(1), count(t, db, `SELECT count(*) FROM gormlock_leases`))
		assert.Equal(t, []int64{0, 1, 2, 3}, versions(t, db, goose.DefaultTablename))
	})
}

func TestUpAdoptsTablesCreatedFromScripts(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *gorm.DB) {
		scripts, err := migrations.Scripts(db.Dialector.Name())
		require.NoError(t, err)
		for _, s := range scripts {
			if db.Dialector.Name() == "mysql" {
				// go-sql-driver/mysql sends one statement at a time
				// unless multiStatements=true.
				for _, st := range s.UpStatements() {
					require.NoError(t, db.Exec(st).Error, st)
				}
				continue
			}
			require.NoError(t, db.Exec(s.Up).Error, "the whole Up at once")
		}
		require.NoError(t, migrations.Up(context.Background(), db))
		requireVersion(t, db, latest)
	})
}

// A database whose lease table was created from Scripts, by another tool,
// before operation keys existed: Up adopts the table and creates the
// operation table.
func TestUpAdoptsTheFirstScriptAndRunsTheSecond(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		scripts, err := migrations.Scripts(db.Dialector.Name())
		require.NoError(t, err)
		for _, st := range scripts[0].UpStatements() {
			require.NoError(t, db.Exec(st).Error, st)
		}
		insertLease(t, db, "7")
		require.False(t, db.Migrator().HasTable("gormlock_operations"))

		require.NoError(t, migrations.Up(ctx, db))
		requireVersion(t, db, latest)
		requireTables(t, db, ownTables, true)
		assert.Equal(t, int64(1), count(t, db, `SELECT count(*) FROM gormlock_leases`), "the adopted table kept its row")
		assert.Equal(t, []int64{0, 1, 2}, versions(t, db, migrations.VersionTable))
	})
}

func TestUpRefusesAForeignTable(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *gorm.DB) {
		require.NoError(t, db.Exec(`CREATE TABLE gormlock_leases (id BIGINT PRIMARY KEY, resource TEXT, note TEXT)`).Error)
		err := migrations.Up(context.Background(), db)
		require.ErrorIs(t, err, migrations.ErrTableExists)
		for _, part := range []string{"gormlock_leases", "migration 1", "column record_key is missing",
			"column id is not the migration's", "column note is not the migration's"} {
			assert.Contains(t, err.Error(), part)
		}
		assert.NotContains(t, err.Error(), "column resource")
		assert.False(t, db.Migrator().HasTable("gormlock_operations"), "nothing was run")
		requireVersion(t, db, 0)
	})
}

// The columns Up's adoption expects are those the migrations create.
func TestAdoptionKnowsTheColumns(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *gorm.DB) {
		require.NoError(t, migrations.Up(context.Background(), db))
		created := migrations.Created()
		require.Len(t, created, latest)
		for v, want := range created {
			cols, err := db.Migrator().ColumnTypes(want[0])
			require.NoError(t, err, "migration %d", v)
			var names []string
			for _, c := range cols {
				names = append(names, c.Name())
			}
			assert.ElementsMatch(t, want[1:], names, "migration %d", v)
		}
	})
}

func TestFS(t *testing.T) {
	for _, dialect := range []string{"sqlite", "postgres", "mysql"} {
		t.Run(dialect, func(t *testing.T) {
			fsys, err := migrations.FS(dialect)
			require.NoError(t, err)
			entries, err := fs.ReadDir(fsys, ".")
			require.NoError(t, err)
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			assert.Equal(t, []string{"00001_leases.sql", "00002_operations.sql"}, names)
			for _, name := range names {
				body, err := fs.ReadFile(fsys, name)
				require.NoError(t, err)
				assert.Contains(t, string(body), "-- +goose Up", name)
				assert.Contains(t, string(body), "-- +goose Down", name)
			}
		})
	}

	for _, dialect := range []string{"mariadb", "sqlserver", "", "sqlite3", "postgresql"} {
		t.Run("unsupported "+dialect, func(t *testing.T) {
			fsys, err := migrations.FS(dialect)
			require.ErrorIs(t, err, locking.ErrNotSupported)
			assert.Nil(t, fsys)
			assert.Contains(t, err.Error(), `"`+dialect+`"`)
			scripts, err := migrations.Scripts(dialect)
			require.ErrorIs(t, err, locking.ErrNotSupported)
			assert.Nil(t, scripts)
		})
	}
}

// renamed reports another dialect's name over a working SQLite connection.
type renamed struct {
	gorm.Dialector
	name string
}

func (r renamed) Name() string { return r.name }

func TestUnsupportedDialectIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sqlserver-pretender.db")
	db, err := gorm.Open(renamed{Dialector: sqlite.Open("file:" + path), name: "sqlserver"},
		&gorm.Config{Logger: logger.Discard})
	require.NoError(t, err)
	t.Cleanup(func() {
		sqlDB, _ := db.DB()
		_ = sqlDB.Close()
	})
	ctx := context.Background()

	err = migrations.Up(ctx, db)
	require.ErrorIs(t, err, locking.ErrNotSupported)
	assert.Contains(t, err.Error(), `"sqlserver"`)
	assert.False(t, db.Migrator().HasTable(migrations.VersionTable), "nothing was run")
	assert.False(t, db.Migrator().HasTable("gormlock_leases"), "nothing was run")

	require.ErrorIs(t, migrations.Down(ctx, db), locking.ErrNotSupported)
	_, err = migrations.Version(ctx, db)
	require.ErrorIs(t, err, locking.ErrNotSupported)
	p, err := migrations.Provider(db)
	require.ErrorIs(t, err, locking.ErrNotSupported)
	assert.Nil(t, p)
}

func TestNilDB(t *testing.T) {
	ctx := context.Background()
	_, err := migrations.Provider(nil)
	assert.ErrorIs(t, err, locking.ErrInvalidArgument)
	assert.ErrorIs(t, migrations.Up(ctx, nil), locking.ErrInvalidArgument)
	assert.ErrorIs(t, migrations.Down(ctx, nil), locking.ErrInvalidArgument)
	_, err = migrations.Version(ctx, nil)
	assert.ErrorIs(t, err, locking.ErrInvalidArgument)
}

func TestUpHonoursContext(t *testing.T) {
	db := testdb.SQLite(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := migrations.Up(ctx, db)
	require.ErrorIs(t, err, context.Canceled)
	assert.False(t, db.Migrator().HasTable("gormlock_leases"))
	assert.False(t, errors.Is(err, locking.ErrInvalidArgument))
}
