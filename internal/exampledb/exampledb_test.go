package exampledb_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/exampledb"
	"github.com/gormlock/gormlock/internal/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/migrations"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/repository"
)

// eachEmpty runs fn on an empty (unmigrated) database of every dialect.
func eachEmpty(t *testing.T, fn func(t *testing.T, db *gorm.DB)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) { fn(t, testdb.SQLite(t)) })
	t.Run("postgres", func(t *testing.T) { fn(t, testdb.Postgres(t)) })
	t.Run("mariadb", func(t *testing.T) { fn(t, testdb.MariaDB(t)) })
}

// eachMigrated runs fn on a database of every dialect migrated with
// Migrate (testdb.Open), whether or not testdb.Each runs on it yet.
func eachMigrated(t *testing.T, fn func(t *testing.T, db *gorm.DB)) {
	t.Helper()
	for _, d := range []string{"sqlite", "postgres", "mariadb"} {
		t.Run(d, func(t *testing.T) { fn(t, testdb.Open(t, d)) })
	}
}

var (
	ownTables     = []string{"gormlock_leases", "gormlock_operations"}
	exampleTables = []string{"accounts", "documents", "jobs"}
)

func requireTables(t *testing.T, db *gorm.DB, tables []string, want bool) {
	t.Helper()
	for _, table := range tables {
		require.Equal(t, want, db.Migrator().HasTable(table), "table %s exists", table)
	}
}

func examplesVersion(t *testing.T, db *gorm.DB) int64 {
	t.Helper()
	p, err := exampledb.Provider(db)
	require.NoError(t, err)
	v, err := p.GetDBVersion(context.Background())
	require.NoError(t, err)
	return v
}

func count(t *testing.T, db *gorm.DB, query string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, db.Raw(query).Scan(&n).Error)
	return n
}

func TestMigrate(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		require.NoError(t, exampledb.Migrate(ctx, db))
		requireTables(t, db, exampleTables, true)
		requireTables(t, db, ownTables, true)
		assert.Equal(t, int64(2), examplesVersion(t, db))
		v, err := migrations.Version(ctx, db)
		require.NoError(t, err)
		assert.Equal(t, int64(2), v)
		assert.False(t, db.Migrator().HasTable("goose_db_version"))

		// Again: nothing to do, the data survives.
		require.NoError(t, db.Exec(`INSERT INTO accounts (owner, balance, frozen, version, created_at, updated_at)
			VALUES ('ada', 5, FALSE, 1, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)`).Error)
		require.NoError(t, exampledb.Migrate(ctx, db))
		assert.Equal(t, int64(1), count(t, db, `SELECT count(*) FROM accounts`))

		require.NoError(t, exampledb.Down(ctx, db))
		requireTables(t, db, exampleTables, false)
		requireTables(t, db, ownTables, false)
	})
}

// The examples' migrations create the example tables and nothing of
// gormlock's; gormlock's create nothing of the examples'.
func TestTheTwoSetsAreSeparate(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		p, err := exampledb.Provider(db)
		require.NoError(t, err)
		_, err = p.Up(ctx)
		require.NoError(t, err)
		requireTables(t, db, exampleTables, true)
		requireTables(t, db, ownTables, false)

		require.NoError(t, migrations.Up(ctx, db))
		requireTables(t, db, ownTables, true)
		require.NoError(t, migrations.Down(ctx, db))
		requireTables(t, db, ownTables, false)
		requireTables(t, db, exampleTables, true)
		assert.Equal(t, int64(2), examplesVersion(t, db))
	})
}

// A database migrated by the gormlock whose own migrations created the
// example tables (in goose_db_version): Migrate takes what exists as
// applied and keeps the data.
func TestMigrateAdoptsADatabaseOfThePreviousVersion(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		sqlDB, err := db.DB()
		require.NoError(t, err)
		if db.Dialector.Name() == "mysql" {
			t.Skip("no gormlock that created the example tables with its own migrations ran on MySQL or MariaDB")
		}
		dialect := map[string]goose.Dialect{"sqlite": goose.DialectSQLite3, "postgres": goose.DialectPostgres}[db.Dialector.Name()]
		legacy, err := goose.NewProvider(dialect, sqlDB,
			os.DirFS(filepath.Join("..", "..", "migrations", "testdata", "legacy", db.Dialector.Name())))
		require.NoError(t, err)
		_, err = legacy.Up(ctx)
		require.NoError(t, err)
		require.NoError(t, db.Exec(`INSERT INTO accounts (owner, balance, frozen, version, created_at, updated_at)
			VALUES ('ada', 5, FALSE, 1, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)`).Error)

		require.NoError(t, exampledb.Migrate(ctx, db))
		assert.Equal(t, int64(2), examplesVersion(t, db))
		assert.Equal(t, int64(1), count(t, db, `SELECT count(*) FROM accounts`))
		require.NoError(t, exampledb.Migrate(ctx, db))
	})
}

func TestMigrateRefusesHalfTheTablesOfAMigration(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *gorm.DB) {
		require.NoError(t, db.Exec(`CREATE TABLE documents (id VARCHAR(64) PRIMARY KEY)`).Error)
		err := exampledb.Migrate(context.Background(), db)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "accounts, documents")
		assert.False(t, db.Migrator().HasTable("accounts"))
	})
}

func TestOpenMigratesATemporaryFile(t *testing.T) {
	db, closeDB, err := exampledb.Open(context.Background(), "", "exampledb-test")
	require.NoError(t, err)
	requireTables(t, db, exampleTables, true)
	requireTables(t, db, ownTables, true)
	var file string
	require.NoError(t, db.Raw(`SELECT file FROM pragma_database_list WHERE name = 'main'`).Scan(&file).Error)
	require.NoError(t, closeDB())
	_, err = os.Stat(filepath.Dir(file))
	assert.True(t, os.IsNotExist(err), "the temporary directory is removed")
}

func TestProviderRefusesNilDB(t *testing.T) {
	_, err := exampledb.Provider(nil)
	assert.ErrorIs(t, err, locking.ErrInvalidArgument)
}

// A constraint violation's code per dialect, as locking.Code reports it
// (SQLite's extended result codes SQLITE_CONSTRAINT_NOTNULL and
// SQLITE_CONSTRAINT_CHECK; SQLSTATE; MySQL's error numbers, a CHECK being
// 4025 on MariaDB and 3819 on MySQL), so this file needs no driver's types.
var (
	notNull = map[string][]string{"sqlite": {"SQLITE_1299"}, "postgres": {"23502"}, "mysql": {"1048"}}
	check   = map[string][]string{"sqlite": {"SQLITE_275"}, "postgres": {"23514"}, "mysql": {"4025", "3819"}}
)

func TestVersionColumnIsNotNullAndPositive(t *testing.T) {
	eachMigrated(t, func(t *testing.T, db *gorm.DB) {
		insert := func(version any) error {
			return db.Exec(`INSERT INTO accounts (owner, balance, frozen, version, created_at, updated_at)
				VALUES ('ada', 0, FALSE, ?, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)`, version).Error
		}
		insertDoc := func(id string, version any) error {
			return db.Exec(`INSERT INTO documents (id, title, version, created_at, updated_at)
				VALUES (?, 'readme', ?, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)`, id, version).Error
		}
		insertJob := func(version any) error {
			return db.Exec(`INSERT INTO jobs (queue, payload, status, version, created_at, updated_at)
				VALUES ('q', 'p', 'pending', ?, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)`, version).Error
		}

		require.NoError(t, insert(1))
		require.NoError(t, insertDoc("a", 1))
		require.NoError(t, insertJob(1))

		dialect := db.Dialector.Name()
		for name, err := range map[string]error{
			"accounts null":  insert(nil),
			"documents null": insertDoc("b", nil),
			"jobs null":      insertJob(nil),
		} {
			require.Error(t, err, name)
			assert.Contains(t, notNull[dialect], locking.Code(err), "%s: %v", name, err)
		}
		for name, err := range map[string]error{
			"accounts zero":      insert(0),
			"accounts negative":  insert(-1),
			"documents zero":     insertDoc("c", 0),
			"documents negative": insertDoc("d", -4),
			"jobs zero":          insertJob(0),
		} {
			require.Error(t, err, name)
			assert.Contains(t, check[dialect], locking.Code(err), "%s: %v", name, err)
		}
		assert.Equal(t, int64(1), count(t, db, `SELECT count(*) FROM accounts`))
		assert.Equal(t, int64(1), count(t, db, `SELECT count(*) FROM documents`))
		assert.Equal(t, int64(1), count(t, db, `SELECT count(*) FROM jobs`))
	})
}

func TestSchemaMatchesModels(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		accounts, err := repository.New[models.Account](db, repository.WithLeases())
		require.NoError(t, err)
		require.NoError(t, accounts.VerifySchema(ctx))
		documents, err := repository.New[models.Document](db, repository.WithLeases())
		require.NoError(t, err)
		require.NoError(t, documents.VerifySchema(ctx))
		jobs, err := repository.New[models.Job](db)
		require.NoError(t, err)
		require.NoError(t, jobs.VerifySchema(ctx))
		require.NoError(t, repository.VerifyOperationSchema(ctx, db))

		for _, model := range []any{&models.Account{}, &models.Document{}, &models.Job{}} {
			cols, err := db.Migrator().ColumnTypes(model)
			require.NoError(t, err)
			byName := map[string]gorm.ColumnType{}
			for _, c := range cols {
				byName[c.Name()] = c
			}
			version, ok := byName["version"]
			require.True(t, ok, "%T has a version column", model)
			nullable, known := version.Nullable()
			require.True(t, known, "%T: the driver reports nullability", model)
			assert.False(t, nullable, "%T: version must be NOT NULL", model)

			id, ok := byName["id"]
			require.True(t, ok)
			pk, known := id.PrimaryKey()
			require.True(t, known)
			assert.True(t, pk, "%T: id is the primary key", model)
		}
	})
}
