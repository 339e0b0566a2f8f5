package migrations_test

import (
	"context"
	"errors"
	"io/fs"
	"regexp"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	gormsqlite "gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	mysqlopen "github.com/gormlock/gormlock/opendb/mysql"
	pgopen "github.com/gormlock/gormlock/opendb/postgres"
	sqliteopen "github.com/gormlock/gormlock/opendb/sqlite"

	"github.com/gormlock/gormlock/internal/tests/testdb"
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

var ownTables = []string{"gormlock_leases", "gormlock_operations"}

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

// versions returns the versions recorded in VersionTable, one per row.
func versions(t *testing.T, db *gorm.DB) []int64 {
	t.Helper()
	var out []int64
	require.NoError(t, db.Table(migrations.VersionTable).Order("version_id").Pluck("version_id", &out).Error)
	return out
}

func insertLease(t *testing.T, db *gorm.DB, key string) {
	t.Helper()
	require.NoError(t, db.Exec(`INSERT INTO gormlock_leases (resource, record_key, owner, token_hash, fence, acquired_ms, expires_ms)
		VALUES ('accounts', ?, 'ann', NULL, 1, 0, 0)`, key).Error)
}

// runScripts runs the Up statements of the given scripts, one at a time,
// as an application's own migration tool would.
func runScripts(t *testing.T, db *gorm.DB, scripts ...migrations.Script) {
	t.Helper()
	for _, s := range scripts {
		for _, st := range s.UpStatements() {
			require.NoError(t, db.Exec(st).Error, st)
		}
	}
}

func scriptsOf(t *testing.T, db *gorm.DB) []migrations.Script {
	t.Helper()
	scripts, err := migrations.Scripts(db.Dialector.Name())
	require.NoError(t, err)
	require.Len(t, scripts, latest)
	return scripts
}

func TestUpDownUp(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		requireTables(t, db, ownTables, false)
		requireVersion(t, db, 0)

		require.NoError(t, migrations.Up(ctx, db))
		requireTables(t, db, ownTables, true)
		requireVersion(t, db, latest)
		assert.Equal(t, []int64{0, 1, 2}, versions(t, db))
		assert.False(t, db.Migrator().HasTable("goose_db_version"), "gormlock never uses goose's default table")

		// A second Up applies nothing: the data survives and nothing new is recorded.
		insertLease(t, db, "1")
		require.NoError(t, migrations.Up(ctx, db))
		requireVersion(t, db, latest)
		assert.Equal(t, int64(1), count(t, db, `SELECT count(*) FROM gormlock_leases`))
		assert.Equal(t, []int64{0, 1, 2}, versions(t, db))

		require.NoError(t, migrations.Down(ctx, db))
		requireTables(t, db, ownTables, false)
		requireVersion(t, db, 0)
		assert.Equal(t, []int64{0}, versions(t, db))

		// Down with nothing applied is a no-op too.
		require.NoError(t, migrations.Down(ctx, db))
		requireVersion(t, db, 0)

		require.NoError(t, migrations.Up(ctx, db))
		requireTables(t, db, ownTables, true)
		requireVersion(t, db, latest)
		assert.Equal(t, int64(0), count(t, db, `SELECT count(*) FROM gormlock_leases`))
		assert.Equal(t, []int64{0, 1, 2}, versions(t, db))
	})
}

// Version and Down on a database Up never ran on read it and create
// nothing.
func TestVersionAndDownChangeNothingOnAnEmptyDatabase(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		requireVersion(t, db, 0)
		require.NoError(t, migrations.Down(ctx, db))
		assert.False(t, db.Migrator().HasTable(migrations.VersionTable))
		requireTables(t, db, ownTables, false)
	})
}

// row is one row of VersionTable.
type row struct {
	ID        int64
	VersionID int64
	IsApplied bool
	HasTstamp bool
}

func rows(t *testing.T, db *gorm.DB) []row {
	t.Helper()
	var out []row
	require.NoError(t, db.Raw(`SELECT id, version_id, is_applied, tstamp IS NOT NULL AS has_tstamp FROM `+
		migrations.VersionTable+` ORDER BY id`).Scan(&out).Error)
	return out
}

// VersionTable has goose's columns and is written as goose writes it: a
// row for version 0 when the table is created, then one row per applied
// version, is_applied true and stamped with the time; Down deletes the
// version's row.
func TestVersionTableIsGooseShaped(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		require.NoError(t, migrations.Up(ctx, db))
		cols, err := db.Migrator().ColumnTypes(migrations.VersionTable)
		require.NoError(t, err)
		var names []string
		for _, c := range cols {
			names = append(names, c.Name())
		}
		assert.Equal(t, []string{"id", "version_id", "is_applied", "tstamp"}, names)

		got := rows(t, db)
		require.Len(t, got, 3)
		for i, r := range got {
			assert.Equal(t, int64(i), r.VersionID)
			assert.True(t, r.IsApplied, "version %d", r.VersionID)
			assert.True(t, r.HasTstamp, "version %d", r.VersionID)
			if i > 0 {
				assert.Greater(t, r.ID, got[i-1].ID)
			}
		}

		// version_id is unique: a second row for a version is refused.
		err = db.Exec(`INSERT INTO `+migrations.VersionTable+` (version_id, is_applied) VALUES (?, ?)`, 1, true).Error
		require.ErrorIs(t, locking.Classify(err), locking.ErrAlreadyExists)
	})
}

// gooseTables is the version table as goose creates it, per dialect,
// without the unique version_id gormlock's own has.
var gooseTables = map[string]string{
	"sqlite": `CREATE TABLE ` + migrations.VersionTable + ` (
		id INTEGER PRIMARY KEY AUTOINCREMENT,
		version_id INTEGER NOT NULL,
		is_applied INTEGER NOT NULL,
		tstamp TIMESTAMP DEFAULT (datetime('now'))
	)`,
	"postgres": `CREATE TABLE ` + migrations.VersionTable + ` (
		id integer PRIMARY KEY GENERATED BY DEFAULT AS IDENTITY,
		version_id bigint NOT NULL,
		is_applied boolean NOT NULL,
		tstamp timestamp NOT NULL DEFAULT now()
	)`,
	"mysql": `CREATE TABLE ` + migrations.VersionTable + ` (
		id bigint(20) unsigned NOT NULL AUTO_INCREMENT,
		version_id bigint NOT NULL,
		is_applied boolean NOT NULL,
		tstamp datetime NULL default CURRENT_TIMESTAMP,
		PRIMARY KEY(id)
	)`,
}

// A database whose VersionTable goose wrote (the gormlock that ran its
// migrations with goose) reads right, and Up and Down carry on from it. A
// version's newest row decides: goose before v3 rolled a migration back by
// adding a row with is_applied false.
func TestAVersionTableWrittenByGoose(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		scripts := scriptsOf(t, db)
		require.NoError(t, db.Exec(gooseTables[db.Dialector.Name()]).Error)
		record := func(v int64, applied bool) {
			require.NoError(t, db.Exec(`INSERT INTO `+migrations.VersionTable+` (version_id, is_applied) VALUES (?, ?)`, v, applied).Error)
		}
		record(0, true)
		runScripts(t, db, scripts[0])
		record(1, true)
		insertLease(t, db, "7")
		runScripts(t, db, scripts[1])
		record(2, true)
		for _, st := range scripts[1].DownStatements() {
			require.NoError(t, db.Exec(st).Error)
		}
		record(2, false)
		requireVersion(t, db, 1)

		require.NoError(t, migrations.Up(ctx, db))
		requireVersion(t, db, latest)
		requireTables(t, db, ownTables, true)
		assert.Equal(t, int64(1), count(t, db, `SELECT count(*) FROM gormlock_leases`), "migration 1 was not run again")
		require.NoError(t, migrations.Up(ctx, db))
		assert.Equal(t, []int64{0, 1, 2, 2, 2}, versions(t, db))

		require.NoError(t, migrations.Down(ctx, db))
		requireVersion(t, db, 0)
		requireTables(t, db, ownTables, false)
		assert.Equal(t, []int64{0}, versions(t, db))
	})
}

// Down refuses to roll back from a version it does not know (recorded by
// a newer gormlock), and changes nothing; Up leaves it be.
func TestDownRefusesAnUnknownVersion(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		require.NoError(t, migrations.Up(ctx, db))
		require.NoError(t, db.Exec(`INSERT INTO `+migrations.VersionTable+` (version_id, is_applied) VALUES (?, ?)`, 9, true).Error)
		requireVersion(t, db, 9)
		require.NoError(t, migrations.Up(ctx, db))

		err := migrations.Down(ctx, db)
		require.ErrorIs(t, err, locking.ErrNotSupported)
		assert.Regexp(t, `^migrations: down: .*version 9`, err.Error())
		requireTables(t, db, ownTables, true)
		assert.Equal(t, []int64{0, 1, 2, 9}, versions(t, db))
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
	notNull = map[string][]string{"sqlite": {"SQLITE_CONSTRAINT_NOTNULL"}, "postgres": {"23502"}, "mysql": {"1048"}}
	check   = map[string][]string{"sqlite": {"SQLITE_CONSTRAINT_CHECK"}, "postgres": {"23514"}, "mysql": {"4025", "3819"}}
)

func requireConstraint(t *testing.T, db *gorm.DB, err error, code map[string][]string, msg string) {
	t.Helper()
	require.Error(t, err, msg)
	assert.Contains(t, code[db.Dialector.Name()], locking.Code(err), "%s: %v", msg, err)
}

// The application's own migrations, recorded in goose's default table by
// its own tool, and gormlock's never see each other's versions, in either
// order; Down of gormlock's leaves the application's alone.
func TestSideBySideWithTheApplicationsMigrations(t *testing.T) {
	for _, order := range []string{"application first", "gormlock first"} {
		t.Run(order, func(t *testing.T) {
			eachEmpty(t, func(t *testing.T, db *gorm.DB) {
				ctx := context.Background()
				appVersions := func() []int64 {
					var out []int64
					require.NoError(t, db.Table("goose_db_version").Order("version_id").Pluck("version_id", &out).Error)
					return out
				}
				upApp := func() {
					if db.Migrator().HasTable("goose_db_version") {
						return
					}
					require.NoError(t, db.Exec(`CREATE TABLE users (id BIGINT PRIMARY KEY, name TEXT NOT NULL)`).Error)
					require.NoError(t, db.Exec(`CREATE TABLE goose_db_version (id BIGINT PRIMARY KEY, version_id BIGINT NOT NULL, is_applied BOOLEAN NOT NULL)`).Error)
					for v := range 4 {
						require.NoError(t, db.Exec(`INSERT INTO goose_db_version (id, version_id, is_applied) VALUES (?, ?, ?)`, v+1, v, true).Error)
					}
				}
				upGormlock := func() { require.NoError(t, migrations.Up(ctx, db)) }
				if order == "application first" {
					upApp()
					upGormlock()
				} else {
					upGormlock()
					upApp()
				}
				requireTables(t, db, ownTables, true)
				requireVersion(t, db, latest)
				assert.Equal(t, []int64{0, 1, 2, 3}, appVersions())
				assert.Equal(t, []int64{0, 1, 2}, versions(t, db))

				require.NoError(t, migrations.Down(ctx, db))
				requireTables(t, db, ownTables, false)
				requireVersion(t, db, 0)
				requireTables(t, db, []string{"users", "goose_db_version"}, true)
				assert.Equal(t, []int64{0, 1, 2, 3}, appVersions())
			})
		})
	}
}

func TestUpAdoptsTablesCreatedFromScripts(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *gorm.DB) {
		for _, s := range scriptsOf(t, db) {
			if db.Dialector.Name() == "mysql" {
				// go-sql-driver/mysql sends one statement at a time
				// unless multiStatements=true.
				runScripts(t, db, s)
				continue
			}
			require.NoError(t, db.Exec(s.Up).Error, "the whole Up at once")
		}
		insertLease(t, db, "7")
		require.NoError(t, migrations.Up(context.Background(), db))
		requireVersion(t, db, latest)
		assert.Equal(t, []int64{0, 1, 2}, versions(t, db))
		assert.Equal(t, int64(1), count(t, db, `SELECT count(*) FROM gormlock_leases`), "the adopted table kept its row")
	})
}

// A database whose lease table was created from Scripts, by another tool,
// before operation keys existed: Up adopts the table and creates the
// operation table.
func TestUpAdoptsTheFirstScriptAndRunsTheSecond(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		runScripts(t, db, scriptsOf(t, db)[0])
		insertLease(t, db, "7")
		require.False(t, db.Migrator().HasTable("gormlock_operations"))

		require.NoError(t, migrations.Up(ctx, db))
		requireVersion(t, db, latest)
		requireTables(t, db, ownTables, true)
		assert.Equal(t, int64(1), count(t, db, `SELECT count(*) FROM gormlock_leases`), "the adopted table kept its row")
		assert.Equal(t, []int64{0, 1, 2}, versions(t, db))
	})
}

// Only the operation table exists: Up creates the lease table and adopts
// the operation table.
func TestUpRunsTheFirstScriptAndAdoptsTheSecond(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		runScripts(t, db, scriptsOf(t, db)[1])
		require.NoError(t, db.Exec(`INSERT INTO gormlock_operations (op_key, resource, record_key, kind, version, created_ms, expires_ms)
			VALUES ('k', 'accounts', '1', 'update', 2, 0, 0)`).Error)

		require.NoError(t, migrations.Up(ctx, db))
		requireVersion(t, db, latest)
		requireTables(t, db, ownTables, true)
		assert.Equal(t, int64(1), count(t, db, `SELECT count(*) FROM gormlock_operations`), "the adopted table kept its row")
		assert.Equal(t, []int64{0, 1, 2}, versions(t, db))
	})
}

func TestUpRefusesAForeignTable(t *testing.T) {
	for _, tc := range []struct{ table, migration, missing string }{
		{"gormlock_leases", "migration 1", "column record_key is missing"},
		// The lease table is missing, and is not created either.
		{"gormlock_operations", "migration 2", "column op_key is missing"},
	} {
		t.Run(tc.table, func(t *testing.T) {
			eachEmpty(t, func(t *testing.T, db *gorm.DB) {
				require.NoError(t, db.Exec(`CREATE TABLE `+tc.table+` (id BIGINT PRIMARY KEY, resource TEXT, note TEXT)`).Error)
				err := migrations.Up(context.Background(), db)
				require.ErrorIs(t, err, locking.ErrSchemaMismatch)
				for _, part := range []string{"migrations: ", tc.table, tc.migration, tc.missing,
					"column id is not the migration's", "column note is not the migration's"} {
					assert.Contains(t, err.Error(), part)
				}
				assert.NotContains(t, err.Error(), "column resource")
				for _, table := range ownTables {
					if table != tc.table {
						assert.False(t, db.Migrator().HasTable(table), "nothing was run")
					}
				}
				requireVersion(t, db, 0)
			})
		})
	}
}

// The columns Up adopts a table with are those of the table Up creates:
// faced with a table of one of gormlock's names and only a column of its
// own, Up names every column of the table it would create as missing.
func TestAdoptionKnowsTheColumns(t *testing.T) {
	missing := regexp.MustCompile(`column (\w+) is missing`)
	for _, e := range empties {
		t.Run(e.name, func(t *testing.T) {
			db := e.open(t)
			require.NoError(t, migrations.Up(context.Background(), db))
			for _, table := range ownTables {
				cols, err := db.Migrator().ColumnTypes(table)
				require.NoError(t, err, table)
				var want []string
				for _, c := range cols {
					want = append(want, c.Name())
				}

				probe := e.open(t)
				require.NoError(t, probe.Exec(`CREATE TABLE `+table+` (gormlock_probe INTEGER)`).Error)
				err = migrations.Up(context.Background(), probe)
				require.ErrorIs(t, err, locking.ErrSchemaMismatch, table)
				var named []string
				for _, m := range missing.FindAllStringSubmatch(err.Error(), -1) {
					named = append(named, m[1])
				}
				assert.ElementsMatch(t, want, named, table)
				assert.Contains(t, err.Error(), "column gormlock_probe is not the migration's")
			}
		})
	}
}

// Several processes run Up on one database at once, each with connections
// of its own: every migration is applied and recorded once, and none of
// them fails. Then they run Down at once.
func TestConcurrentUp(t *testing.T) {
	const processes, rounds = 8, 3
	for _, tc := range []struct {
		name string
		// dsn returns what open opens: a new, empty database.
		dsn  func(t *testing.T) string
		open func(dsn string, opts ...gorm.Option) (*gorm.DB, error)
	}{
		{"sqlite", func(t *testing.T) string { return t.TempDir() + "/concurrent.db" }, sqliteopen.Open},
		// Opened without package opendb/sqlite's BEGIN IMMEDIATE: two
		// transactions may both read, and the second to write fails.
		{"sqlite deferred", func(t *testing.T) string { return t.TempDir() + "/concurrent.db" },
			func(path string, opts ...gorm.Option) (*gorm.DB, error) {
				return gorm.Open(gormsqlite.Open("file:"+path+"?_journal_mode=WAL&_busy_timeout=10000"), opts...)
			}},
		{"postgres", func(t *testing.T) string { return testdb.PostgresSchema(t) }, pgopen.Open},
		{"mariadb", func(t *testing.T) string { return testdb.MariaDBDatabase(t) }, mysqlopen.Open},
	} {
		t.Run(tc.name, func(t *testing.T) {
			open := func(dsn string) *gorm.DB {
				db, err := tc.open(dsn, &gorm.Config{Logger: logger.Discard})
				require.NoError(t, err)
				t.Cleanup(func() {
					sqlDB, _ := db.DB()
					_ = sqlDB.Close()
				})
				return db
			}
			// What Up alone creates, to compare with.
			alone := open(tc.dsn(t))
			require.NoError(t, migrations.Up(context.Background(), alone))

			for range rounds {
				dsn := tc.dsn(t)
				dbs := make([]*gorm.DB, processes)
				for i := range dbs {
					dbs[i] = open(dsn)
				}
				all := func(fn func(ctx context.Context, db *gorm.DB) error) []error {
					ctx := testdb.Ctx(t)
					var wg sync.WaitGroup
					start := make(chan struct{})
					errs := make([]error, len(dbs))
					for i, db := range dbs {
						wg.Go(func() {
							<-start
							errs[i] = fn(ctx, db)
						})
					}
					close(start)
					wg.Wait()
					return errs
				}

				for i, err := range all(migrations.Up) {
					require.NoError(t, err, "process %d", i)
				}
				db := dbs[0]
				assert.Equal(t, []int64{0, 1, 2}, versions(t, db), "each version recorded once")
				requireVersion(t, db, latest)
				for _, table := range ownTables {
					wantCols, wantIndexes := describeTable(t, alone, table)
					cols, indexes := describeTable(t, db, table)
					assert.Equal(t, wantCols, cols, table)
					assert.Equal(t, wantIndexes, indexes, table)
				}

				for i, err := range all(migrations.Down) {
					require.NoError(t, err, "process %d", i)
				}
				assert.Equal(t, []int64{0}, versions(t, db))
				requireTables(t, db, ownTables, false)
			}
		})
	}
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
			assert.Regexp(t, `^migrations: `, err.Error())
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
	base := testdb.SQLite(t)
	db, err := gorm.Open(renamed{Dialector: base.Dialector, name: "sqlserver"}, &gorm.Config{Logger: logger.Discard})
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
}

func TestNilDB(t *testing.T) {
	ctx := context.Background()
	open := testdb.SQLite(t)
	for name, db := range map[string]*gorm.DB{
		"nil":          nil,
		"zero":         {},
		"no pool":      {Config: &gorm.Config{Dialector: open.Dialector}, Statement: &gorm.Statement{}},
		"no statement": {Config: open.Config},
	} {
		t.Run(name, func(t *testing.T) {
			err := migrations.Up(ctx, db)
			assert.ErrorIs(t, err, locking.ErrInvalidArgument)
			assert.Regexp(t, `^migrations: `, err.Error())
			assert.ErrorIs(t, migrations.Down(ctx, db), locking.ErrInvalidArgument)
			_, err = migrations.Version(ctx, db)
			assert.ErrorIs(t, err, locking.ErrInvalidArgument)
		})
	}
}

func TestUpHonoursContext(t *testing.T) {
	db := testdb.SQLite(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := migrations.Up(ctx, db)
	require.ErrorIs(t, err, context.Canceled)
	assert.Regexp(t, `^migrations: up: `, err.Error())
	assert.False(t, db.Migrator().HasTable("gormlock_leases"))
	assert.False(t, errors.Is(err, locking.ErrInvalidArgument))

	_, err = migrations.Version(ctx, db)
	require.ErrorIs(t, err, context.Canceled, "Version does not take a failed read for an empty database")
}
