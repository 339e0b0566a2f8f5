package locking_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
)

// sqlitePath returns the file of db's main database.
func sqlitePath(t *testing.T, db *gorm.DB) string {
	t.Helper()
	var rows []struct {
		Seq  int
		Name string
		File string
	}
	require.NoError(t, db.Raw("PRAGMA database_list").Scan(&rows).Error)
	for _, r := range rows {
		if r.Name == "main" && r.File != "" {
			return r.File
		}
	}
	t.Fatalf("no main database file in %+v", rows)
	return ""
}

// requireClassified classifies raw and checks the result matches exactly
// kind, carries code, and still reaches the driver error.
func requireClassified(t *testing.T, raw error, kind error, code string) *locking.DatabaseError {
	t.Helper()
	require.Error(t, raw)
	err := locking.Classify(raw)
	assertMatchesOnly(t, err, kind)
	var de *locking.DatabaseError
	require.ErrorAs(t, err, &de)
	assert.Same(t, kind, de.Kind)
	assert.Equal(t, code, de.Code)
	assert.Equal(t, raw, de.Err)
	assert.Equal(t, code, locking.Code(err))
	assert.True(t, locking.Classify(err) == err, "classifying twice must return the same error")
	return de
}

func TestClassifySQLiteConstraintViolations(t *testing.T) {
	eachSQLiteDriver(t, func(t *testing.T, d sqliteDriver) {
		db := d.open(t)
		require.NoError(t, db.Exec(`CREATE TABLE items (id INTEGER PRIMARY KEY, code TEXT NOT NULL UNIQUE)`).Error)
		require.NoError(t, db.Exec(`CREATE TABLE tags (name TEXT NOT NULL PRIMARY KEY)`).Error)
		require.NoError(t, db.Exec(`INSERT INTO items (id, code) VALUES (1, 'a')`).Error)
		require.NoError(t, db.Exec(`INSERT INTO tags (name) VALUES ('go')`).Error)

		tests := []struct {
			name string
			sql  string
			ext  int
			code string
		}{
			{"integer primary key", `INSERT INTO items (id, code) VALUES (1, 'b')`, codeConstraintPrimaryKey, "SQLITE_CONSTRAINT_PRIMARYKEY"},
			{"text primary key", `INSERT INTO tags (name) VALUES ('go')`, codeConstraintPrimaryKey, "SQLITE_CONSTRAINT_PRIMARYKEY"},
			{"unique column", `INSERT INTO items (id, code) VALUES (2, 'a')`, codeConstraintUnique, "SQLITE_CONSTRAINT_UNIQUE"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				raw := db.Exec(tt.sql).Error
				ext, ok := d.code(raw)
				require.True(t, ok, "the driver's own error: %v", raw)
				require.Equal(t, tt.ext, ext)

				requireClassified(t, raw, locking.ErrAlreadyExists, tt.code)
				err := locking.Classify(raw)
				ext, ok = d.code(err)
				require.True(t, ok, "the driver error stays reachable")
				assert.Equal(t, tt.ext, ext)
				assert.False(t, locking.IsRetryable(err))

				// A statement outside a transaction that SQLite refused
				// was not applied: a definite outcome.
				werr := locking.ClassifyWrite(raw)
				assertMatchesOnly(t, werr, locking.ErrAlreadyExists)
			})
		}

		var n int64
		require.NoError(t, db.Raw(`SELECT count(*) FROM items`).Scan(&n).Error)
		assert.Equal(t, int64(1), n, "the refused inserts must not have written")
	})
}

func TestClassifySQLiteBusy(t *testing.T) {
	eachSQLiteDriver(t, func(t *testing.T, d sqliteDriver) {
		ctx := testdb.Ctx(t)
		db := d.open(t)
		require.NoError(t, db.Exec(`CREATE TABLE items (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)`).Error)
		path := sqlitePath(t, db)
		holder := d.raw(t, path, "immediate")
		other := d.raw(t, path, "immediate")

		tx, err := holder.BeginTx(ctx, nil) // BEGIN IMMEDIATE takes the write lock now
		require.NoError(t, err)
		t.Cleanup(func() { _ = tx.Rollback() })

		_, raw := other.ExecContext(ctx, `INSERT INTO items (id, n) VALUES (1, 1)`)
		ext, ok := d.code(raw)
		require.True(t, ok, "the driver's own error: %v", raw)
		require.Equal(t, codeBusy, ext)
		requireClassified(t, raw, locking.ErrLocked, "SQLITE_BUSY")
		assert.True(t, locking.IsSQLiteBusy(raw))
		assert.True(t, locking.IsSQLiteBusy(locking.Classify(raw)))
		assert.False(t, locking.IsRetryable(locking.Classify(raw)))
		assertMatchesOnly(t, locking.ClassifyWrite(raw), locking.ErrLocked)

		_, raw = other.BeginTx(ctx, nil)
		requireClassified(t, raw, locking.ErrLocked, "SQLITE_BUSY")

		// Once the holder lets go, the same write succeeds: the failure was the lock.
		require.NoError(t, tx.Rollback())
		_, err = other.ExecContext(ctx, `INSERT INTO items (id, n) VALUES (1, 1)`)
		require.NoError(t, err)
	})
}

func TestClassifySQLiteBusySnapshot(t *testing.T) {
	eachSQLiteDriver(t, func(t *testing.T, d sqliteDriver) {
		ctx := testdb.Ctx(t)
		db := d.open(t) // opendb leaves the file in WAL mode
		require.NoError(t, db.Exec(`CREATE TABLE items (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)`).Error)
		require.NoError(t, db.Exec(`INSERT INTO items (id, n) VALUES (1, 0)`).Error)
		deferred := d.raw(t, sqlitePath(t, db), "deferred")

		tx, err := deferred.BeginTx(ctx, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = tx.Rollback() })
		var n int64
		require.NoError(t, tx.QueryRowContext(ctx, `SELECT n FROM items WHERE id = 1`).Scan(&n)) // read snapshot taken
		require.NoError(t, db.Exec(`UPDATE items SET n = n + 1 WHERE id = 1`).Error)             // another connection commits

		_, raw := tx.ExecContext(ctx, `UPDATE items SET n = ? WHERE id = 1`, n+10)
		ext, ok := d.code(raw)
		require.True(t, ok, "the driver's own error: %v", raw)
		require.Equal(t, codeBusySnapshot, ext)
		requireClassified(t, raw, locking.ErrSerialization, "SQLITE_BUSY_SNAPSHOT")
		assert.True(t, locking.IsRetryable(locking.Classify(raw)), "re-running the transaction from a fresh snapshot can succeed")
		assert.False(t, locking.IsSQLiteBusy(raw), "waiting cannot get past a stale snapshot")
	})
}

func TestClassifyPostgresUniqueViolation(t *testing.T) {
	db := testdb.Postgres(t)
	require.NoError(t, db.Exec(`CREATE TABLE items (id BIGINT PRIMARY KEY, code TEXT NOT NULL UNIQUE)`).Error)
	require.NoError(t, db.Exec(`INSERT INTO items (id, code) VALUES (1, 'a')`).Error)

	tests := []struct {
		name       string
		sql        string
		constraint string
	}{
		{"primary key", `INSERT INTO items (id, code) VALUES (1, 'b')`, "items_pkey"},
		{"unique column", `INSERT INTO items (id, code) VALUES (2, 'a')`, "items_code_key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := db.Exec(tt.sql).Error
			requireClassified(t, raw, locking.ErrAlreadyExists, "23505")
			err := locking.Classify(raw)

			var pgErr *pgconn.PgError
			require.ErrorAs(t, err, &pgErr)
			assert.Equal(t, "23505", pgErr.Code)
			assert.Equal(t, tt.constraint, pgErr.ConstraintName)
			assert.False(t, locking.IsRetryable(err))
		})
	}
}

func TestClassifyPostgresLockNotAvailable(t *testing.T) {
	ctx := testdb.Ctx(t)
	db := testdb.Postgres(t).WithContext(ctx)
	require.NoError(t, db.Exec(`CREATE TABLE items (id BIGINT PRIMARY KEY, n BIGINT NOT NULL)`).Error)
	require.NoError(t, db.Exec(`INSERT INTO items (id, n) VALUES (1, 0)`).Error)

	holder := db.Begin()
	require.NoError(t, holder.Error)
	t.Cleanup(func() { holder.Rollback() })
	var ids []int64
	require.NoError(t, holder.Raw(`SELECT id FROM items WHERE id = 1 FOR UPDATE`).Scan(&ids).Error)
	require.Equal(t, []int64{1}, ids)

	t.Run("NOWAIT", func(t *testing.T) {
		tx := db.Begin()
		require.NoError(t, tx.Error)
		defer tx.Rollback()
		var got []int64
		raw := tx.Raw(`SELECT id FROM items WHERE id = 1 FOR UPDATE NOWAIT`).Scan(&got).Error
		requireClassified(t, raw, locking.ErrLocked, "55P03")
		var pgErr *pgconn.PgError
		require.ErrorAs(t, locking.Classify(raw), &pgErr)
		assert.Equal(t, "55P03", pgErr.Code)
		assert.False(t, locking.IsRetryable(locking.Classify(raw)))
	})

	t.Run("lock_timeout", func(t *testing.T) {
		tx := db.Begin()
		require.NoError(t, tx.Error)
		defer tx.Rollback()
		require.NoError(t, tx.Exec(`SET LOCAL lock_timeout = '50ms'`).Error)
		raw := tx.Exec(`UPDATE items SET n = n + 1 WHERE id = 1`).Error
		requireClassified(t, raw, locking.ErrLocked, "55P03")
	})
}

func TestClassifyPostgresDeadlock(t *testing.T) {
	ctx := testdb.Ctx(t)
	db := testdb.Postgres(t).WithContext(ctx)
	require.NoError(t, db.Exec(`CREATE TABLE items (id BIGINT PRIMARY KEY, n BIGINT NOT NULL)`).Error)
	require.NoError(t, db.Exec(`INSERT INTO items (id, n) VALUES (1, 0), (2, 0)`).Error)

	// Each transaction locks its first row, waits until the other holds its
	// own, then asks for the other's row: a deadlock the server must break.
	order := [2][2]int{{1, 2}, {2, 1}}
	var errs [2]error
	var holding sync.WaitGroup
	holding.Add(2)
	start := make(chan struct{})
	var g errgroup.Group
	for i := range order {
		g.Go(func() error {
			<-start
			tx := db.Begin()
			if tx.Error != nil {
				holding.Done()
				return tx.Error
			}
			defer tx.Rollback()
			err := tx.Exec(`UPDATE items SET n = n + 1 WHERE id = ?`, order[i][0]).Error
			holding.Done()
			if err != nil {
				return err
			}
			holding.Wait()
			if errs[i] = tx.Exec(`UPDATE items SET n = n + 1 WHERE id = ?`, order[i][1]).Error; errs[i] != nil {
				return nil
			}
			errs[i] = tx.Commit().Error
			return nil
		})
	}
	close(start)
	require.NoError(t, g.Wait())

	var failed []error
	for _, err := range errs {
		if err != nil {
			failed = append(failed, err)
		}
	}
	require.Len(t, failed, 1, "exactly one transaction must be chosen as the deadlock victim: %v", errs)
	requireClassified(t, failed[0], locking.ErrDeadlock, "40P01")
	var pgErr *pgconn.PgError
	require.ErrorAs(t, locking.Classify(failed[0]), &pgErr)
	assert.Equal(t, "40P01", pgErr.Code)
	assert.True(t, locking.IsRetryable(locking.Classify(failed[0])))

	var sum int64
	require.NoError(t, db.Raw(`SELECT sum(n) FROM items`).Scan(&sum).Error)
	assert.Equal(t, int64(2), sum, "only the surviving transaction's two updates are committed")
}

func TestClassifyPostgresSerializationFailure(t *testing.T) {
	ctx := testdb.Ctx(t)
	db := testdb.Postgres(t).WithContext(ctx)
	require.NoError(t, db.Exec(`CREATE TABLE items (id BIGINT PRIMARY KEY, n BIGINT NOT NULL)`).Error)
	require.NoError(t, db.Exec(`INSERT INTO items (id, n) VALUES (1, 0)`).Error)

	for _, level := range []sql.IsolationLevel{sql.LevelRepeatableRead, sql.LevelSerializable} {
		t.Run(level.String(), func(t *testing.T) {
			tx1 := db.Begin(&sql.TxOptions{Isolation: level})
			require.NoError(t, tx1.Error)
			defer tx1.Rollback()
			tx2 := db.Begin(&sql.TxOptions{Isolation: level})
			require.NoError(t, tx2.Error)
			defer tx2.Rollback()

			var n1, n2 int64
			require.NoError(t, tx1.Raw(`SELECT n FROM items WHERE id = 1`).Scan(&n1).Error)
			require.NoError(t, tx2.Raw(`SELECT n FROM items WHERE id = 1`).Scan(&n2).Error)
			require.NoError(t, tx2.Exec(`UPDATE items SET n = ? WHERE id = 1`, n2+1).Error)
			require.NoError(t, tx2.Commit().Error)

			raw := tx1.Exec(`UPDATE items SET n = ? WHERE id = 1`, n1+10).Error
			requireClassified(t, raw, locking.ErrSerialization, "40001")
			var pgErr *pgconn.PgError
			require.ErrorAs(t, locking.Classify(raw), &pgErr)
			assert.Equal(t, "40001", pgErr.Code)
			assert.True(t, locking.IsRetryable(locking.Classify(raw)))
		})
	}

	var n int64
	require.NoError(t, db.Raw(`SELECT n FROM items WHERE id = 1`).Scan(&n).Error)
	assert.Equal(t, int64(2), n, "only the two winning transactions' increments are committed")
}

func TestClassifyNil(t *testing.T) {
	assert.NoError(t, locking.Classify(nil))
	assert.NoError(t, locking.ClassifyCommit(nil))
	assert.Equal(t, "", locking.Code(nil))
}

func TestClassifyPassesUnrelatedErrorsThrough(t *testing.T) {
	plain := errors.New("boom")
	stale := &locking.StaleDataError{Table: "accounts", ID: 1, Expected: 1, Actual: 2}
	classified := fmt.Errorf("wrapped: %w", &locking.DatabaseError{Kind: locking.ErrLocked, Code: "SQLITE_BUSY", Err: plain})
	tests := map[string]error{
		"plain":             plain,
		"wrapped plain":     fmt.Errorf("op: %w", plain),
		"context canceled":  context.Canceled,
		"stale data":        stale,
		"already a DB kind": classified,
	}
	for name, err := range tests {
		t.Run(name, func(t *testing.T) {
			assert.True(t, locking.Classify(err) == err, "Classify(%v) must return its argument", err)
		})
	}
	assert.Equal(t, "", locking.Code(plain))
}

func TestClassifyPassesUnrecognisedDriverErrorsThrough(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		eachSQLiteDriver(t, func(t *testing.T, d sqliteDriver) {
			db := d.open(t)
			raw := db.Exec(`INSERT INTO nosuch VALUES (1)`).Error
			require.Error(t, raw)
			err := locking.Classify(raw)
			assert.True(t, err == raw, "Classify must return the driver error unchanged, got %v", err)
			assertMatchesOnly(t, err)
			assert.Equal(t, "SQLITE_1", locking.Code(err), "the code is still read from the driver error")
		})
	})
	t.Run("postgres", func(t *testing.T) {
		db := testdb.Postgres(t)
		raw := db.Exec(`INSERT INTO nosuch VALUES (1)`).Error
		require.Error(t, raw)
		err := locking.Classify(raw)
		assert.True(t, err == raw, "Classify must return the driver error unchanged, got %v", err)
		assertMatchesOnly(t, err)
		assert.Equal(t, "42P01", locking.Code(err))
	})
}

// Integrity violations other than unique keys are ErrConstraintViolation,
// naming the constraint (or the column of NOT NULL) where the database
// does; a statement that is not valid SQL is ErrInvalidArgument. Both are
// definite: nothing was applied.
func TestClassifyIntegrityAndBadSQL(t *testing.T) {
	const schema = `CREATE TABLE parents (id BIGINT PRIMARY KEY);
CREATE TABLE children (
	id BIGINT PRIMARY KEY,
	parent_id BIGINT NOT NULL CONSTRAINT child_parent REFERENCES parents (id),
	n BIGINT NOT NULL CONSTRAINT n_positive CHECK (n > 0),
	code TEXT CONSTRAINT children_code UNIQUE);
INSERT INTO parents (id) VALUES (1);
INSERT INTO children (id, parent_id, n, code) VALUES (1, 1, 1, 'a')`
	type want struct {
		sql                string
		kind               error
		code               string
		constraint, column string
	}
	check := func(t *testing.T, db *gorm.DB, cases map[string]want) {
		for _, stmt := range strings.Split(schema, ";\n") {
			require.NoError(t, db.Exec(stmt).Error)
		}
		for name, tt := range cases {
			t.Run(name, func(t *testing.T) {
				raw := db.Exec(tt.sql).Error
				de := requireClassified(t, raw, tt.kind, tt.code)
				assert.Equal(t, tt.constraint, de.Constraint)
				assert.Equal(t, tt.column, de.Column)
				assertMatchesOnly(t, locking.ClassifyWrite(raw), tt.kind)
				assertMatchesOnly(t, locking.ClassifyCommit(raw), tt.kind)
				assert.False(t, locking.IsRetryable(locking.Classify(raw)))
			})
		}
		var n int64
		require.NoError(t, db.Raw(`SELECT count(*) FROM children`).Scan(&n).Error)
		assert.Equal(t, int64(1), n, "the refused statements wrote nothing")
		require.NoError(t, db.Raw(`SELECT count(*) FROM parents`).Scan(&n).Error)
		assert.Equal(t, int64(1), n, "the refused statements wrote nothing")
	}
	t.Run("sqlite", func(t *testing.T) {
		eachSQLiteDriver(t, func(t *testing.T, d sqliteDriver) {
			db := d.open(t)
			require.NoError(t, db.Exec(`PRAGMA foreign_keys = ON`).Error)
			check(t, db, map[string]want{
				"foreign key, missing parent":    {`INSERT INTO children (id, parent_id, n) VALUES (2, 99, 1)`, locking.ErrConstraintViolation, "SQLITE_CONSTRAINT_FOREIGNKEY", "", ""},
				"foreign key, parent referenced": {`DELETE FROM parents WHERE id = 1`, locking.ErrConstraintViolation, "SQLITE_CONSTRAINT_FOREIGNKEY", "", ""},
				"check":                          {`INSERT INTO children (id, parent_id, n) VALUES (2, 1, 0)`, locking.ErrConstraintViolation, "SQLITE_CONSTRAINT_CHECK", "n_positive", ""},
				"not null":                       {`INSERT INTO children (id, parent_id, n) VALUES (2, 1, NULL)`, locking.ErrConstraintViolation, "SQLITE_CONSTRAINT_NOTNULL", "", "children.n"},
				"unique":                         {`INSERT INTO children (id, parent_id, n, code) VALUES (2, 1, 1, 'a')`, locking.ErrAlreadyExists, "SQLITE_CONSTRAINT_UNIQUE", "children.code", ""},
				"syntax error":                   {`INSERT INTO children VALUES (`, locking.ErrInvalidArgument, "SQLITE_ERROR", "", ""},
				"unknown column":                 {`UPDATE children SET n = 2 WHERE nosuch = 1`, locking.ErrInvalidArgument, "SQLITE_ERROR", "", ""},
				"unknown function":               {`UPDATE children SET n = nosuch(1)`, locking.ErrInvalidArgument, "SQLITE_ERROR", "", ""},
			})
		})
	})
	t.Run("postgres", func(t *testing.T) {
		db := testdb.Postgres(t)
		check(t, db, map[string]want{
			"foreign key, missing parent":    {`INSERT INTO children (id, parent_id, n) VALUES (2, 99, 1)`, locking.ErrConstraintViolation, "23503", "child_parent", ""},
			"foreign key, parent referenced": {`DELETE FROM parents WHERE id = 1`, locking.ErrConstraintViolation, "23503", "child_parent", ""},
			"check":                          {`INSERT INTO children (id, parent_id, n) VALUES (2, 1, 0)`, locking.ErrConstraintViolation, "23514", "n_positive", ""},
			"not null":                       {`INSERT INTO children (id, parent_id, n) VALUES (2, 1, NULL)`, locking.ErrConstraintViolation, "23502", "", "n"},
			"unique":                         {`INSERT INTO children (id, parent_id, n, code) VALUES (2, 1, 1, 'a')`, locking.ErrAlreadyExists, "23505", "children_code", ""},
			"syntax error":                   {`INSERT INTO children VALUES (`, locking.ErrInvalidArgument, "42601", "", ""},
			"unknown column":                 {`UPDATE children SET n = 2 WHERE nosuch = 1`, locking.ErrInvalidArgument, "42703", "", ""},
			"unknown function":               {`UPDATE children SET n = nosuch(1)`, locking.ErrInvalidArgument, "42883", "", ""},
			"type mismatch":                  {`UPDATE children SET n = 2 WHERE code = 1`, locking.ErrInvalidArgument, "42883", "", ""},
		})
	})
}

func TestIsRetryable(t *testing.T) {
	stale := &locking.StaleDataError{Table: "accounts", ID: 1, Expected: 1, Actual: 2}
	deadlock := &locking.DatabaseError{Kind: locking.ErrDeadlock, Code: "40P01", Err: &pgconn.PgError{Code: "40P01"}}
	serialization := &locking.DatabaseError{Kind: locking.ErrSerialization, Code: "40001", Err: &pgconn.PgError{Code: "40001"}}
	locked := &locking.DatabaseError{Kind: locking.ErrLocked, Code: "55P03", Err: &pgconn.PgError{Code: "55P03"}}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"stale data", stale, true},
		{"wrapped stale data", fmt.Errorf("update: %w", stale), true},
		{"bare ErrStaleData", locking.ErrStaleData, true},
		{"deadlock", deadlock, true},
		{"serialization failure", fmt.Errorf("tx: %w", serialization), true},
		{"locked", locked, false},
		{"bare ErrLocked", locking.ErrLocked, false},
		{"lock timeout", locking.ErrLockTimeout, false},
		{"commit unknown over an io error", locking.ClassifyCommit(io.ErrUnexpectedEOF), false},
		{"commit unknown over a deadlock", fmt.Errorf("%w: %w", locking.ErrCommitUnknown, deadlock), false},
		{"commit unknown over stale data", fmt.Errorf("%w: %w", locking.ErrCommitUnknown, stale), false},
		{"not found", &locking.NotFoundError{Table: "accounts", ID: 1}, false},
		{"already exists", locking.ErrAlreadyExists, false},
		{"invalid argument", locking.Invalid("x"), false},
		{"plain", errors.New("boom"), false},
		{"context canceled", context.Canceled, false},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, locking.IsRetryable(tt.err))
		})
	}
}

func TestClassifyCommitServerErrorIsNotUnknown(t *testing.T) {
	t.Run("sqlite deferred foreign key", func(t *testing.T) {
		eachSQLiteDriver(t, func(t *testing.T, d sqliteDriver) {
			ctx := testdb.Ctx(t)
			db := d.open(t)
			require.NoError(t, db.Exec(`CREATE TABLE parents (id INTEGER PRIMARY KEY)`).Error)
			require.NoError(t, db.Exec(`CREATE TABLE children (id INTEGER PRIMARY KEY,
				parent_id INTEGER NOT NULL REFERENCES parents (id) DEFERRABLE INITIALLY DEFERRED)`).Error)
			sqlDB, err := db.DB()
			require.NoError(t, err)
			conn, err := sqlDB.Conn(ctx)
			require.NoError(t, err)
			defer conn.Close()

			tx, err := conn.BeginTx(ctx, nil)
			require.NoError(t, err)
			_, err = tx.ExecContext(ctx, `INSERT INTO children (id, parent_id) VALUES (1, 99)`)
			require.NoError(t, err, "a deferred foreign key is only checked at COMMIT")
			raw := tx.Commit()
			require.Error(t, raw)

			err = locking.ClassifyCommit(raw)
			assertMatchesOnly(t, err, locking.ErrConstraintViolation)
			ext, ok := d.code(err)
			require.True(t, ok, "the driver's own error: %v", err)
			assert.Equal(t, codeConstraintForeignKey, ext)
			assert.Equal(t, "SQLITE_CONSTRAINT_FOREIGNKEY", locking.Code(err))

			// SQLite leaves a transaction open when its COMMIT fails.
			// go-sqlite3 rolls it back itself; the pure-Go driver does
			// not, so the connection goes back to the pool inside the
			// transaction (gormlock's own transactions roll back a
			// failed COMMIT themselves).
			_, rerr := conn.ExecContext(ctx, "ROLLBACK")
			if d.name == "glebarez" {
				require.NoError(t, rerr, "the failed COMMIT left the transaction open")
			} else {
				require.Error(t, rerr, "the driver rolled the transaction back")
			}

			var n int64
			require.NoError(t, db.Raw(`SELECT count(*) FROM children`).Scan(&n).Error)
			assert.Equal(t, int64(0), n, "the transaction did not commit, as ClassifyCommit says")
		})
	})

	t.Run("postgres deferred unique constraint", func(t *testing.T) {
		ctx := testdb.Ctx(t)
		db := testdb.Postgres(t).WithContext(ctx)
		require.NoError(t, db.Exec(`CREATE TABLE items (id BIGINT NOT NULL,
			CONSTRAINT items_id_key UNIQUE (id) DEFERRABLE INITIALLY DEFERRED)`).Error)

		tx := db.Begin()
		require.NoError(t, tx.Error)
		defer tx.Rollback()
		require.NoError(t, tx.Exec(`INSERT INTO items (id) VALUES (1)`).Error)
		require.NoError(t, tx.Exec(`INSERT INTO items (id) VALUES (1)`).Error, "a deferred unique constraint is only checked at COMMIT")
		raw := tx.Commit().Error
		require.Error(t, raw)

		err := locking.ClassifyCommit(raw)
		assertMatchesOnly(t, err, locking.ErrAlreadyExists)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr)
		assert.Equal(t, "23505", pgErr.Code)
		assert.Equal(t, "23505", locking.Code(err))

		var n int64
		require.NoError(t, db.Raw(`SELECT count(*) FROM items`).Scan(&n).Error)
		assert.Equal(t, int64(0), n, "the transaction did not commit, as ClassifyCommit says")
	})
}

func TestClassifyCommitTxDoneIsNotUnknown(t *testing.T) {
	eachSQLiteDriver(t, func(t *testing.T, d sqliteDriver) {
		ctx := testdb.Ctx(t)
		db := d.open(t)
		sqlDB, err := db.DB()
		require.NoError(t, err)
		tx, err := sqlDB.BeginTx(ctx, nil)
		require.NoError(t, err)
		require.NoError(t, tx.Commit())
		raw := tx.Commit()
		require.ErrorIs(t, raw, sql.ErrTxDone)

		err = locking.ClassifyCommit(raw)
		assert.True(t, err == raw, "sql.ErrTxDone is returned as is, got %v", err)
		assertMatchesOnly(t, err)
		assert.False(t, locking.IsRetryable(err))
	})
}

// A broken connection cannot be produced on demand at the exact moment of a
// COMMIT, so these causes are the errors database/sql and pgx return for one.
func TestClassifyCommitBrokenConnectionIsUnknown(t *testing.T) {
	tests := map[string]error{
		"driver.ErrBadConn":           driver.ErrBadConn,
		"io.ErrUnexpectedEOF":         io.ErrUnexpectedEOF,
		"wrapped io.ErrUnexpectedEOF": fmt.Errorf("failed to receive message: %w", io.ErrUnexpectedEOF),
		"io.EOF":                      io.EOF,
	}
	for name, cause := range tests {
		t.Run(name, func(t *testing.T) {
			err := locking.ClassifyCommit(cause)
			assertMatchesOnly(t, err, locking.ErrCommitUnknown)
			assert.ErrorIs(t, err, cause, "the cause must be kept")
			assert.False(t, locking.IsRetryable(err))
			assert.Equal(t, fmt.Sprintf("%v: %v", locking.ErrCommitUnknown, cause), err.Error())
		})
	}
}

// PostgreSQL's data exceptions (class 22) are bad input: ErrInvalidArgument.
func TestClassifyPostgresDataException(t *testing.T) {
	db := testdb.Postgres(t)
	for name, tt := range map[string]struct {
		sql  string
		arg  any
		code string
	}{
		"NUL byte in text":    {`SELECT $1::text`, "a\x00b", "22021"},
		"integer overflow":    {`SELECT $1::int * 2147483647`, int64(3), "22003"},
		"invalid text to int": {`SELECT $1::text::int`, "x", "22P02"},
	} {
		t.Run(name, func(t *testing.T) {
			var out any
			raw := db.Raw(tt.sql, tt.arg).Scan(&out).Error
			requireClassified(t, raw, locking.ErrInvalidArgument, tt.code)
			assert.False(t, locking.IsRetryable(locking.Classify(raw)))
		})
	}
}

// GORM's translated errors (gorm.Config{TranslateError: true}) say that the
// database refused the statement for a constraint: they classify as the
// constraint's kind, and a write or COMMIT that returned one did not apply
// (it is not an unknown outcome). Before, a foreign key or CHECK violation
// kept no kind of gormlock's, and a write or COMMIT returning one was
// reported unknown.
func TestClassifyGORMTranslatedErrors(t *testing.T) {
	for _, c := range []struct {
		err  error
		kind error
	}{
		{gorm.ErrDuplicatedKey, locking.ErrAlreadyExists},
		{gorm.ErrForeignKeyViolated, locking.ErrConstraintViolation},
		{gorm.ErrCheckConstraintViolated, locking.ErrConstraintViolation},
	} {
		t.Run(c.err.Error(), func(t *testing.T) {
			wrapped := fmt.Errorf("children: Create: %w", c.err)
			got := locking.Classify(wrapped)
			require.ErrorIs(t, got, c.kind)
			require.ErrorIs(t, got, c.err, "GORM's error stays reachable")
			var de *locking.DatabaseError
			require.ErrorAs(t, got, &de)
			require.Equal(t, "gorm."+map[error]string{
				gorm.ErrDuplicatedKey:           "ErrDuplicatedKey",
				gorm.ErrForeignKeyViolated:      "ErrForeignKeyViolated",
				gorm.ErrCheckConstraintViolated: "ErrCheckConstraintViolated",
			}[c.err], de.Code)
			for name, classify := range map[string]func(error) error{"ClassifyWrite": locking.ClassifyWrite, "ClassifyCommit": locking.ClassifyCommit} {
				got := classify(wrapped)
				require.NotErrorIs(t, got, locking.ErrCommitUnknown, "%s: the database refused it", name)
				require.ErrorIs(t, got, c.kind, name)
			}
		})
	}
}
