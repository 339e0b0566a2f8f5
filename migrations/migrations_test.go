package migrations_test

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/mattn/go-sqlite3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

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
}

func requireVersion(t *testing.T, db *gorm.DB, want int64) {
	t.Helper()
	v, err := migrations.Version(context.Background(), db)
	require.NoError(t, err)
	require.Equal(t, want, v)
}

// latest is the newest migration version.
const latest = 4

func requireTables(t *testing.T, db *gorm.DB, want bool) {
	t.Helper()
	for _, table := range []string{"accounts", "documents", "jobs", "gormlock_leases", "gormlock_operations"} {
		require.Equal(t, want, db.Migrator().HasTable(table), "table %s exists", table)
	}
}

func count(t *testing.T, db *gorm.DB, query string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, db.Raw(query).Scan(&n).Error)
	return n
}

func TestUpDownUp(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		requireTables(t, db, false)
		requireVersion(t, db, 0)

		require.NoError(t, migrations.Up(ctx, db))
		requireTables(t, db, true)
		requireVersion(t, db, latest)

		// A second Up applies nothing: the data survives and goose records nothing new.
		require.NoError(t, db.Exec(`INSERT INTO accounts (owner, balance, frozen, version, created_at, updated_at)
			VALUES ('ada', 5, FALSE, 1, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)`).Error)
		records := count(t, db, `SELECT count(*) FROM goose_db_version`)
		require.NoError(t, migrations.Up(ctx, db))
		requireVersion(t, db, latest)
		assert.Equal(t, int64(1), count(t, db, `SELECT count(*) FROM accounts`))
		assert.Equal(t, records, count(t, db, `SELECT count(*) FROM goose_db_version`))

		require.NoError(t, migrations.Down(ctx, db))
		requireTables(t, db, false)
		requireVersion(t, db, 0)

		// Down with nothing applied is a no-op too.
		require.NoError(t, migrations.Down(ctx, db))
		requireVersion(t, db, 0)

		require.NoError(t, migrations.Up(ctx, db))
		requireTables(t, db, true)
		requireVersion(t, db, latest)
		assert.Equal(t, int64(0), count(t, db, `SELECT count(*) FROM accounts`))
	})
}

func TestVersionColumnIsNotNullAndPositive(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *gorm.DB) {
		require.NoError(t, migrations.Up(context.Background(), db))
		insert := func(version any) error {
			return db.Exec(`INSERT INTO accounts (owner, balance, frozen, version, created_at, updated_at)
				VALUES ('ada', 0, FALSE, ?, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)`, version).Error
		}
		insertDoc := func(id string, version any) error {
			return db.Exec(`INSERT INTO documents (id, title, version, created_at, updated_at)
				VALUES (?, 'readme', ?, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)`, id, version).Error
		}

		require.NoError(t, insert(1))
		require.NoError(t, insertDoc("a", 1))

		for name, err := range map[string]error{
			"accounts null":  insert(nil),
			"documents null": insertDoc("b", nil),
		} {
			requireConstraint(t, db, err, sqlite3.ErrConstraintNotNull, "23502", name)
		}
		for name, err := range map[string]error{
			"accounts zero":      insert(0),
			"accounts negative":  insert(-1),
			"documents zero":     insertDoc("c", 0),
			"documents negative": insertDoc("d", -4),
		} {
			requireConstraint(t, db, err, sqlite3.ErrConstraintCheck, "23514", name)
		}
		assert.Equal(t, int64(1), count(t, db, `SELECT count(*) FROM accounts`))
		assert.Equal(t, int64(1), count(t, db, `SELECT count(*) FROM documents`))
	})
}

// requireConstraint checks err is the given constraint violation of db's dialect.
func requireConstraint(t *testing.T, db *gorm.DB, err error, sqliteCode sqlite3.ErrNoExtended, sqlState, msg string) {
	t.Helper()
	require.Error(t, err, msg)
	switch db.Dialector.Name() {
	case "sqlite":
		var se sqlite3.Error
		require.ErrorAs(t, err, &se, msg)
		assert.Equal(t, sqliteCode, se.ExtendedCode, msg)
	case "postgres":
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, msg)
		assert.Equal(t, sqlState, pgErr.Code, msg)
	}
}

func TestSchemaMatchesModels(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		require.NoError(t, migrations.Up(ctx, db))

		accounts, err := repository.New[models.Account](db)
		require.NoError(t, err)
		require.NoError(t, accounts.VerifySchema(ctx))
		documents, err := repository.New[models.Document](db)
		require.NoError(t, err)
		require.NoError(t, documents.VerifySchema(ctx))

		for _, model := range []any{&models.Account{}, &models.Document{}} {
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

// Hand-made tables. Each mismatching one has a matching twin, so a test
// fails when VerifySchema rejects a good table as well as when it accepts a
// bad one.
const (
	goodAccounts = `CREATE TABLE accounts (id BIGINT PRIMARY KEY, owner TEXT NOT NULL,
		balance BIGINT NOT NULL, frozen BOOLEAN NOT NULL, version BIGINT NOT NULL,
		created_at TIMESTAMP NOT NULL, updated_at TIMESTAMP NOT NULL)`
	nullableVersionAccounts = `CREATE TABLE accounts (id BIGINT PRIMARY KEY, owner TEXT NOT NULL,
		balance BIGINT NOT NULL, frozen BOOLEAN NOT NULL, version BIGINT,
		created_at TIMESTAMP NOT NULL, updated_at TIMESTAMP NOT NULL)`
	goodDocuments = `CREATE TABLE documents (id TEXT PRIMARY KEY, title TEXT NOT NULL,
		attrs TEXT NOT NULL, version BIGINT NOT NULL,
		created_at TIMESTAMP NOT NULL, updated_at TIMESTAMP NOT NULL)`
	noTitleDocuments = `CREATE TABLE documents (id TEXT PRIMARY KEY,
		attrs TEXT NOT NULL, version BIGINT NOT NULL,
		created_at TIMESTAMP NOT NULL, updated_at TIMESTAMP NOT NULL)`
	noPrimaryKeyDocuments = `CREATE TABLE documents (id TEXT NOT NULL UNIQUE, title TEXT NOT NULL,
		attrs TEXT NOT NULL, version BIGINT NOT NULL,
		created_at TIMESTAMP NOT NULL, updated_at TIMESTAMP NOT NULL)`
	manyProblemsDocuments = `CREATE TABLE documents (id TEXT NOT NULL, title TEXT NOT NULL,
		version BIGINT, created_at TIMESTAMP NOT NULL)`
)

func verify[T any](t *testing.T, db *gorm.DB) error {
	t.Helper()
	r, err := repository.New[T](db)
	require.NoError(t, err)
	return r.VerifySchema(context.Background())
}

func requireSchemaError(t *testing.T, err error, table string, problems ...string) {
	t.Helper()
	require.ErrorIs(t, err, repository.ErrSchemaMismatch)
	var se *repository.SchemaError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, table, se.Table)
	assert.Equal(t, problems, se.Problems)
	for _, p := range problems {
		assert.Contains(t, err.Error(), p)
	}
}

func TestVerifySchemaAcceptsHandMadeTables(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *gorm.DB) {
		require.NoError(t, db.Exec(goodAccounts).Error)
		require.NoError(t, db.Exec(goodDocuments).Error)
		assert.NoError(t, verify[models.Account](t, db))
		assert.NoError(t, verify[models.Document](t, db))
	})
}

func TestVerifySchemaDetectsMismatch(t *testing.T) {
	t.Run("nullable version", func(t *testing.T) {
		eachEmpty(t, func(t *testing.T, db *gorm.DB) {
			require.NoError(t, db.Exec(nullableVersionAccounts).Error)
			requireSchemaError(t, verify[models.Account](t, db), "accounts",
				"version column version is nullable; it must be NOT NULL")
		})
	})
	t.Run("missing column", func(t *testing.T) {
		eachEmpty(t, func(t *testing.T, db *gorm.DB) {
			require.NoError(t, db.Exec(noTitleDocuments).Error)
			requireSchemaError(t, verify[models.Document](t, db), "documents",
				"column title (field Title) is missing")
		})
	})
	t.Run("id not the primary key", func(t *testing.T) {
		eachEmpty(t, func(t *testing.T, db *gorm.DB) {
			require.NoError(t, db.Exec(noPrimaryKeyDocuments).Error)
			requireSchemaError(t, verify[models.Document](t, db), "documents",
				"column id is not the primary key")
		})
	})
	t.Run("every problem listed", func(t *testing.T) {
		eachEmpty(t, func(t *testing.T, db *gorm.DB) {
			require.NoError(t, db.Exec(manyProblemsDocuments).Error)
			requireSchemaError(t, verify[models.Document](t, db), "documents",
				"column id is not the primary key",
				"version column version is nullable; it must be NOT NULL",
				"column attrs (field Attrs) is missing",
				"column updated_at (field UpdatedAt) is missing")
		})
	})
	t.Run("missing table", func(t *testing.T) {
		eachEmpty(t, func(t *testing.T, db *gorm.DB) {
			requireSchemaError(t, verify[models.Account](t, db), "accounts", "table does not exist")
			requireSchemaError(t, verify[models.Document](t, db), "documents", "table does not exist")
		})
	})
	t.Run("after Down", func(t *testing.T) {
		eachEmpty(t, func(t *testing.T, db *gorm.DB) {
			ctx := context.Background()
			require.NoError(t, migrations.Up(ctx, db))
			require.NoError(t, migrations.Down(ctx, db))
			requireSchemaError(t, verify[models.Account](t, db), "accounts", "table does not exist")
		})
	})
}

func TestFS(t *testing.T) {
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			fsys, err := migrations.FS(dialect)
			require.NoError(t, err)
			entries, err := fs.ReadDir(fsys, ".")
			require.NoError(t, err)
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			assert.Equal(t, []string{"00001_example_models.sql", "00002_jobs.sql", "00003_leases.sql", "00004_operations.sql"}, names)
			for _, name := range names {
				body, err := fs.ReadFile(fsys, name)
				require.NoError(t, err)
				assert.Contains(t, string(body), "-- +goose Up", name)
				assert.Contains(t, string(body), "-- +goose Down", name)
			}
		})
	}

	for _, dialect := range []string{"mysql", "", "sqlite3", "postgresql"} {
		t.Run("unsupported "+dialect, func(t *testing.T) {
			fsys, err := migrations.FS(dialect)
			require.ErrorIs(t, err, locking.ErrNotSupported)
			assert.Nil(t, fsys)
			assert.Contains(t, err.Error(), `"`+dialect+`"`)
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
	path := filepath.Join(t.TempDir(), "mysql-pretender.db")
	db, err := gorm.Open(renamed{Dialector: sqlite.Open("file:" + path), name: "mysql"},
		&gorm.Config{Logger: logger.Discard})
	require.NoError(t, err)
	t.Cleanup(func() {
		sqlDB, _ := db.DB()
		_ = sqlDB.Close()
	})
	ctx := context.Background()

	err = migrations.Up(ctx, db)
	require.ErrorIs(t, err, locking.ErrNotSupported)
	assert.Contains(t, err.Error(), `"mysql"`)
	assert.False(t, db.Migrator().HasTable("goose_db_version"), "nothing was run")
	assert.False(t, db.Migrator().HasTable("accounts"), "nothing was run")

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
	assert.False(t, db.Migrator().HasTable("accounts"))
	assert.False(t, errors.Is(err, locking.ErrInvalidArgument))
}
