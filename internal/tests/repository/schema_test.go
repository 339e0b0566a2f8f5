package repository_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/migrations"
	"github.com/gormlock/gormlock/repository"
)

// schemaEachEmpty runs fn on an empty (unmigrated) database of every
// dialect.
func schemaEachEmpty(t *testing.T, fn func(t *testing.T, db *gorm.DB)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) { fn(t, testdb.SQLite(t)) })
	t.Run("postgres", func(t *testing.T) { fn(t, testdb.Postgres(t)) })
	t.Run("mariadb", func(t *testing.T) { fn(t, testdb.MariaDB(t)) })
}

// mysqlKeyText gives the key columns of the hand-made tables a length on
// MariaDB, which indexes no TEXT column whole (error 1170).
var mysqlKeyText = strings.NewReplacer("id TEXT", "id VARCHAR(255)", "resource TEXT", "resource VARCHAR(255)",
	"record_key TEXT", "record_key VARCHAR(255)", "op_key TEXT", "op_key VARCHAR(255)")

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

	// The lease table as gormlock uses it, without the migration's
	// indexes and CHECK, and its broken twins.
	goodLeases = `CREATE TABLE gormlock_leases (resource TEXT NOT NULL, record_key TEXT NOT NULL,
		owner TEXT NOT NULL DEFAULT '', token_hash TEXT, fence BIGINT NOT NULL,
		acquired_ms BIGINT NOT NULL, expires_ms BIGINT NOT NULL, PRIMARY KEY (resource, record_key))`
	noFenceLeases = `CREATE TABLE gormlock_leases (resource TEXT NOT NULL, record_key TEXT NOT NULL,
		owner TEXT NOT NULL DEFAULT '', token_hash TEXT,
		acquired_ms BIGINT NOT NULL, expires_ms BIGINT NOT NULL, PRIMARY KEY (resource, record_key))`
	shortKeyLeases = `CREATE TABLE gormlock_leases (resource TEXT NOT NULL, record_key TEXT NOT NULL,
		owner TEXT NOT NULL DEFAULT '', token_hash TEXT, fence BIGINT NOT NULL,
		acquired_ms BIGINT NOT NULL, expires_ms BIGINT NOT NULL, PRIMARY KEY (record_key))`
	manyProblemsLeases = `CREATE TABLE gormlock_leases (resource TEXT NOT NULL, record_key TEXT NOT NULL,
		owner TEXT NOT NULL DEFAULT '', token_hash TEXT NOT NULL, fence BIGINT NOT NULL)`

	goodOperations = `CREATE TABLE gormlock_operations (op_key TEXT PRIMARY KEY, resource TEXT NOT NULL,
		record_key TEXT NOT NULL, kind TEXT NOT NULL, version BIGINT NOT NULL,
		fingerprint TEXT NOT NULL DEFAULT '', created_ms BIGINT NOT NULL, expires_ms BIGINT NOT NULL)`
	noKeyOperations = `CREATE TABLE gormlock_operations (op_key TEXT NOT NULL, resource TEXT NOT NULL,
		record_key TEXT NOT NULL, kind TEXT NOT NULL, version BIGINT NOT NULL,
		created_ms BIGINT NOT NULL, expires_ms BIGINT NOT NULL)`
)

func verifySchemaOf[T any](t *testing.T, db *gorm.DB, opts ...repository.Option) error {
	t.Helper()
	r, err := repository.New[T](db, opts...)
	require.NoError(t, err)
	return r.VerifySchema(context.Background())
}

// notNullAdvice is what VerifySchema says to make the version column of
// table NOT NULL on dialect.
func notNullAdvice(dialect, table string) string {
	return map[string]string{
		"sqlite":   "SQLite cannot add NOT NULL to a column in place: create the table again with `version` BIGINT NOT NULL and copy the rows, giving those without a version one (CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER))",
		"postgres": `give rows without a version one, then forbid NULL: UPDATE "` + table + `" SET "version" = (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT WHERE "version" IS NULL OR "version" = 0; ALTER TABLE "` + table + `" ALTER COLUMN "version" SET NOT NULL`,
		"mysql":    "give rows without a version one, then forbid NULL: UPDATE `" + table + "` SET `version` = (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', SYSDATE(6)) - TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), CURRENT_TIMESTAMP(6))) WHERE `version` IS NULL OR `version` = 0; ALTER TABLE `" + table + "` MODIFY `version` BIGINT NOT NULL",
	}[dialect]
}

func requireSchemaError(t *testing.T, err error, table string, problems ...string) {
	t.Helper()
	require.ErrorIs(t, err, locking.ErrSchemaMismatch)
	var se *repository.SchemaError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, table, se.Table)
	assert.Equal(t, problems, se.Problems)
	for _, p := range problems {
		assert.Contains(t, err.Error(), p)
	}
}

func execAll(t *testing.T, db *gorm.DB, ddl ...string) {
	t.Helper()
	for _, s := range ddl {
		if db.Dialector.Name() == "mysql" {
			s = mysqlKeyText.Replace(s)
		}
		require.NoError(t, db.Exec(s).Error)
	}
}

func TestVerifySchemaAcceptsHandMadeTables(t *testing.T) {
	schemaEachEmpty(t, func(t *testing.T, db *gorm.DB) {
		execAll(t, db, goodAccounts, goodDocuments, goodLeases, goodOperations)
		assert.NoError(t, verifySchemaOf[fixtures.Account](t, db))
		assert.NoError(t, verifySchemaOf[fixtures.Document](t, db))
		assert.NoError(t, verifySchemaOf[fixtures.Account](t, db, repository.WithLeases()))
		assert.NoError(t, repository.VerifyOperationSchema(context.Background(), db))
	})
}

func TestVerifySchemaDetectsMismatch(t *testing.T) {
	t.Run("nullable version", func(t *testing.T) {
		schemaEachEmpty(t, func(t *testing.T, db *gorm.DB) {
			execAll(t, db, nullableVersionAccounts)
			advice := notNullAdvice(db.Dialector.Name(), "accounts")
			requireSchemaError(t, verifySchemaOf[fixtures.Account](t, db), "accounts",
				"version column version is nullable; it must be NOT NULL: "+advice)
			// The advice works: run it (SQLite: rebuild the table), and
			// the table passes.
			switch db.Dialector.Name() {
			case "sqlite":
				execAll(t, db, "DROP TABLE accounts", goodAccounts)
			default:
				stmts := strings.Split(strings.TrimPrefix(advice, "give rows without a version one, then forbid NULL: "), "; ")
				execAll(t, db, stmts...)
			}
			require.NoError(t, verifySchemaOf[fixtures.Account](t, db))
		})
	})
	t.Run("missing column", func(t *testing.T) {
		schemaEachEmpty(t, func(t *testing.T, db *gorm.DB) {
			execAll(t, db, noTitleDocuments)
			requireSchemaError(t, verifySchemaOf[fixtures.Document](t, db), "documents",
				"column title (field Title) is missing")
		})
	})
	t.Run("id not the primary key", func(t *testing.T) {
		schemaEachEmpty(t, func(t *testing.T, db *gorm.DB) {
			if db.Dialector.Name() == "mysql" {
				// InnoDB makes the first UNIQUE NOT NULL index of a table
				// without a primary key its primary key, and says so
				// (COLUMN_KEY PRI): the guard is as safe as with one.
				execAll(t, db, noPrimaryKeyDocuments)
				require.NoError(t, verifySchemaOf[fixtures.Document](t, db))
				execAll(t, db, "DROP TABLE documents", strings.Replace(noPrimaryKeyDocuments, "NOT NULL UNIQUE", "UNIQUE", 1))
			} else {
				execAll(t, db, noPrimaryKeyDocuments)
			}
			requireSchemaError(t, verifySchemaOf[fixtures.Document](t, db), "documents",
				"column id is not (part of) the primary key")
		})
	})
	t.Run("every problem listed", func(t *testing.T) {
		schemaEachEmpty(t, func(t *testing.T, db *gorm.DB) {
			execAll(t, db, manyProblemsDocuments)
			requireSchemaError(t, verifySchemaOf[fixtures.Document](t, db), "documents",
				"column id is not (part of) the primary key",
				"version column version is nullable; it must be NOT NULL: "+notNullAdvice(db.Dialector.Name(), "documents"),
				"column attrs (field Attrs) is missing",
				"column updated_at (field UpdatedAt) is missing")
		})
	})
	t.Run("missing table", func(t *testing.T) {
		schemaEachEmpty(t, func(t *testing.T, db *gorm.DB) {
			requireSchemaError(t, verifySchemaOf[fixtures.Account](t, db), "accounts", "table does not exist")
			requireSchemaError(t, verifySchemaOf[fixtures.Document](t, db), "documents", "table does not exist")
		})
	})
	t.Run("after Down", func(t *testing.T) {
		schemaEachEmpty(t, func(t *testing.T, db *gorm.DB) {
			ctx := context.Background()
			require.NoError(t, fixtures.Migrate(ctx, db))
			require.NoError(t, fixtures.Down(ctx, db))
			requireSchemaError(t, verifySchemaOf[fixtures.Account](t, db), "accounts", "table does not exist")
		})
	})
}

// migrateExamples creates the example tables only, as an application
// creates its own: no table of gormlock's.
func migrateExamples(t *testing.T, db *gorm.DB) {
	t.Helper()
	p, err := fixtures.Provider(db)
	require.NoError(t, err)
	_, err = p.Up(context.Background())
	require.NoError(t, err)
}

func TestVerifySchemaChecksTheLeaseTableWithLeases(t *testing.T) {
	schemaEachEmpty(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		migrateExamples(t, db)

		// Without leases the lease table is not needed (the control).
		require.NoError(t, verifySchemaOf[fixtures.Account](t, db))
		err := verifySchemaOf[fixtures.Account](t, db, repository.WithLeases())
		requireSchemaError(t, err, repository.LeaseTable, "table does not exist")
		assert.Contains(t, err.Error(), "gormlock_leases")

		// What VerifySchema prevents: every guarded write fails.
		accounts, err := repository.New[fixtures.Account](db, repository.WithLeases())
		require.NoError(t, err)
		a := &fixtures.Account{Owner: "ann", Balance: 1}
		require.NoError(t, accounts.Create(ctx, a))
		a.Balance = 2
		require.Error(t, accounts.Update(ctx, a))

		require.NoError(t, migrations.Up(ctx, db))
		require.NoError(t, verifySchemaOf[fixtures.Account](t, db, repository.WithLeases()))
		require.NoError(t, verifySchemaOf[fixtures.Document](t, db, repository.WithLeaseTTL(1, 2)))
	})
}

func TestVerifySchemaDetectsLeaseTableMismatch(t *testing.T) {
	for _, tc := range []struct {
		name, ddl string
		problems  []string
	}{
		{"missing column", noFenceLeases, []string{"column fence is missing"}},
		{"short primary key", shortKeyLeases, []string{"the primary key must be (resource, record_key), not (record_key)"}},
		{"every problem listed", manyProblemsLeases, []string{
			"column token_hash is NOT NULL; gormlock writes NULL into it",
			"column acquired_ms is missing",
			"column expires_ms is missing",
			"the primary key must be (resource, record_key); the table has none",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			schemaEachEmpty(t, func(t *testing.T, db *gorm.DB) {
				migrateExamples(t, db)
				execAll(t, db, tc.ddl)
				require.NoError(t, verifySchemaOf[fixtures.Account](t, db), "the control: no leases, no check")
				requireSchemaError(t, verifySchemaOf[fixtures.Account](t, db, repository.WithLeases()),
					repository.LeaseTable, tc.problems...)
			})
		})
	}
}

func TestVerifySchemaReportsBothTables(t *testing.T) {
	schemaEachEmpty(t, func(t *testing.T, db *gorm.DB) {
		execAll(t, db, noTitleDocuments)
		err := verifySchemaOf[fixtures.Document](t, db, repository.WithLeases())
		require.ErrorIs(t, err, locking.ErrSchemaMismatch)
		requireSchemaError(t, err, "documents", "column title (field Title) is missing")
		var tables []string
		for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
			var se *repository.SchemaError
			require.ErrorAs(t, e, &se)
			tables = append(tables, se.Table)
		}
		assert.Equal(t, []string{"documents", "gormlock_leases"}, tables)
		assert.Contains(t, err.Error(), "gormlock_leases: table does not exist")
	})
}

func TestVerifySchemaDoesNotMistakeAFailureForAMismatch(t *testing.T) {
	db := testdb.SQLite(t)
	migrateExamples(t, db)
	r, err := repository.New[fixtures.Account](db, repository.WithLeases())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = r.VerifySchema(ctx)
	require.ErrorIs(t, err, context.Canceled)
	assert.False(t, errors.Is(err, locking.ErrSchemaMismatch))

	err = repository.VerifyOperationSchema(ctx, db)
	require.ErrorIs(t, err, context.Canceled)
	assert.False(t, errors.Is(err, locking.ErrSchemaMismatch))
}

func TestVerifyOperationSchema(t *testing.T) {
	schemaEachEmpty(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		requireSchemaError(t, repository.VerifyOperationSchema(ctx, db), repository.OperationTable, "table does not exist")
		require.NoError(t, migrations.Up(ctx, db))
		require.NoError(t, repository.VerifyOperationSchema(ctx, db))
		require.NoError(t, repository.RunInTx(ctx, db, func(ctx context.Context) error {
			return repository.VerifyOperationSchema(ctx, db)
		}), "inside a transaction")
	})
	t.Run("mismatch", func(t *testing.T) {
		schemaEachEmpty(t, func(t *testing.T, db *gorm.DB) {
			execAll(t, db, noKeyOperations)
			requireSchemaError(t, repository.VerifyOperationSchema(context.Background(), db), repository.OperationTable,
				"column fingerprint is missing", "the primary key must be (op_key); the table has none")
		})
	})
	t.Run("nil db", func(t *testing.T) {
		assert.ErrorIs(t, repository.VerifyOperationSchema(context.Background(), nil), locking.ErrInvalidArgument)
	})
}
