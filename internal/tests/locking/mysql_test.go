package locking_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
)

// requireMySQLError checks that err carries the driver's *mysql.MySQLError
// with the given number and SQLSTATE, as the server sent it.
func requireMySQLError(t *testing.T, err error, number uint16, state string) {
	t.Helper()
	var me *mysql.MySQLError
	require.ErrorAs(t, err, &me, "the driver error stays reachable: %v", err)
	assert.Equal(t, number, me.Number, "%v", err)
	assert.Equal(t, state, string(me.SQLState[:]), "%v", err)
}

// isMariaDB reports whether db's server is MariaDB rather than MySQL.
func isMariaDB(t *testing.T, db *gorm.DB) bool {
	t.Helper()
	var version string
	require.NoError(t, db.Raw(`SELECT VERSION()`).Scan(&version).Error)
	return strings.Contains(version, "MariaDB")
}

// mariaItems creates items (id, n, code) with rows 1 and 2 in a fresh
// database.
func mariaItems(t *testing.T) *gorm.DB {
	t.Helper()
	db := testdb.MariaDB(t).WithContext(testdb.Ctx(t))
	require.NoError(t, db.Exec(`CREATE TABLE items (id BIGINT PRIMARY KEY, n BIGINT NOT NULL,
		code VARCHAR(10) NOT NULL UNIQUE) ENGINE=InnoDB`).Error)
	require.NoError(t, db.Exec(`INSERT INTO items (id, n, code) VALUES (1, 0, 'a'), (2, 0, 'b')`).Error)
	return db
}

func mariaSum(t *testing.T, db *gorm.DB) int64 {
	t.Helper()
	var sum int64
	require.NoError(t, db.Raw(`SELECT COALESCE(SUM(n), 0) FROM items`).Scan(&sum).Error)
	return sum
}

// mariaHold begins a transaction that locks row id of items until the test
// ends or release is called.
func mariaHold(t *testing.T, db *gorm.DB, id int) (release func()) {
	t.Helper()
	holder := db.Begin()
	require.NoError(t, holder.Error)
	var ids []int64
	require.NoError(t, holder.Raw(`SELECT id FROM items WHERE id = ? FOR UPDATE`, id).Scan(&ids).Error)
	require.Equal(t, []int64{int64(id)}, ids)
	var once sync.Once
	release = func() { once.Do(func() { holder.Rollback() }) }
	t.Cleanup(release)
	return release
}

func TestClassifyMariaDBDuplicateKey(t *testing.T) {
	db := mariaItems(t)
	for name, q := range map[string]string{
		"primary key":   `INSERT INTO items (id, n, code) VALUES (1, 0, 'c')`,
		"unique column": `INSERT INTO items (id, n, code) VALUES (3, 0, 'a')`,
	} {
		t.Run(name, func(t *testing.T) {
			raw := db.Exec(q).Error
			requireClassified(t, raw, locking.ErrAlreadyExists, "1062")
			requireMySQLError(t, locking.Classify(raw), 1062, "23000")
			assert.False(t, locking.IsRetryable(locking.Classify(raw)))
			// Refused by the server, outside a transaction: not applied.
			assertMatchesOnly(t, locking.ClassifyWrite(raw), locking.ErrAlreadyExists)
			assertMatchesOnly(t, locking.ClassifyCommit(raw), locking.ErrAlreadyExists)
		})
	}
	var n int64
	require.NoError(t, db.Raw(`SELECT count(*) FROM items`).Scan(&n).Error)
	assert.Equal(t, int64(2), n, "the refused inserts wrote nothing")
}

func TestClassifyMariaDBLockWaitTimeout(t *testing.T) {
	db := mariaItems(t)
	release := mariaHold(t, db, 1)

	t.Run("in a transaction", func(t *testing.T) {
		tx := db.Begin()
		require.NoError(t, tx.Error)
		defer tx.Rollback()
		require.NoError(t, tx.Exec(`UPDATE items SET n = n + 1 WHERE id = 2`).Error)
		start := time.Now()
		raw := tx.Exec(`SET STATEMENT innodb_lock_wait_timeout = 1 FOR UPDATE items SET n = n + 1 WHERE id = 1`).Error
		waited := time.Since(start)
		requireClassified(t, raw, locking.ErrLocked, "1205")
		requireMySQLError(t, raw, 1205, "HY000")
		assert.False(t, locking.IsRetryable(locking.Classify(raw)))
		assert.GreaterOrEqual(t, waited, 900*time.Millisecond, "the statement waited for the lock")

		// Only the statement was rolled back: the transaction is open
		// and keeps its first update.
		var n int64
		require.NoError(t, tx.Raw(`SELECT n FROM items WHERE id = 2`).Scan(&n).Error)
		assert.Equal(t, int64(1), n)
		require.NoError(t, tx.Commit().Error)
	})

	t.Run("autocommit", func(t *testing.T) {
		raw := db.Exec(`SET STATEMENT innodb_lock_wait_timeout = 1 FOR UPDATE items SET n = n + 10 WHERE id = 1`).Error
		assertMatchesOnly(t, locking.ClassifyWrite(raw), locking.ErrLocked)
		assert.Equal(t, "1205", locking.Code(locking.ClassifyWrite(raw)))
	})

	release()
	assert.Equal(t, int64(1), mariaSum(t, db), "only the committed transaction's first update is there")
}

func TestClassifyMariaDBNoWait(t *testing.T) {
	db := mariaItems(t)
	mariaHold(t, db, 1)
	// MariaDB answers NOWAIT with 1205, MySQL 8 with 3572; both are ErrLocked.
	number, code := uint16(3572), "3572"
	if isMariaDB(t, db) {
		number, code = 1205, "1205"
	}
	for name, q := range map[string]string{
		"FOR UPDATE NOWAIT": `SELECT id FROM items WHERE id = 1 FOR UPDATE NOWAIT`,
		"FOR SHARE NOWAIT":  `SELECT id FROM items WHERE id = 1 LOCK IN SHARE MODE NOWAIT`,
	} {
		t.Run(name, func(t *testing.T) {
			tx := db.Begin()
			require.NoError(t, tx.Error)
			defer tx.Rollback()
			start := time.Now()
			var ids []int64
			raw := tx.Raw(q).Scan(&ids).Error
			assert.Less(t, time.Since(start), 500*time.Millisecond, "NOWAIT does not wait")
			requireClassified(t, raw, locking.ErrLocked, code)
			var me *mysql.MySQLError
			require.ErrorAs(t, raw, &me)
			assert.Equal(t, number, me.Number)

			// The row another transaction does not hold is still lockable:
			// the error was the lock, and the transaction is open.
			require.NoError(t, tx.Raw(`SELECT id FROM items WHERE id = 2 FOR UPDATE NOWAIT`).Scan(&ids).Error)
			assert.Equal(t, []int64{2}, ids)
		})
	}
}

func TestClassifyMariaDBDeadlock(t *testing.T) {
	db := mariaItems(t)
	// Each transaction locks its first row, waits until the other holds its
	// own, then asks for the other's row: a deadlock the server must break.
	// The victim then runs one more statement on its connection.
	order := [2][2]int{{1, 2}, {2, 1}}
	var errs, after [2]error
	var holding sync.WaitGroup
	holding.Add(2)
	var g errgroup.Group
	for i := range order {
		g.Go(func() error {
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
				after[i] = tx.Exec(`INSERT INTO items (id, n, code) VALUES (?, 100, ?)`, 10+i, fmt.Sprint("v", i)).Error
				return nil
			}
			// Let the victim's last statement run before this commits.
			time.Sleep(200 * time.Millisecond)
			errs[i] = tx.Commit().Error
			return nil
		})
	}
	require.NoError(t, g.Wait())

	var failed []error
	victim := -1
	for i, err := range errs {
		if err != nil {
			failed = append(failed, err)
			victim = i
		}
	}
	require.Len(t, failed, 1, "exactly one transaction must be chosen as the deadlock victim: %v", errs)
	requireClassified(t, failed[0], locking.ErrDeadlock, "1213")
	requireMySQLError(t, failed[0], 1213, "40001")
	assert.True(t, locking.IsRetryable(locking.Classify(failed[0])))
	assertMatchesOnly(t, locking.ClassifyCommit(failed[0]), locking.ErrDeadlock)

	// InnoDB rolled the victim's whole transaction back and ended it: the
	// statement it ran next was not refused but committed by itself, and
	// the deferred Rollback did not undo it. Code that goes on after a
	// 1213 inside a transaction writes outside it.
	require.NoError(t, after[victim], "the statement after the deadlock ran")
	var rows []int64
	require.NoError(t, db.Raw(`SELECT id FROM items WHERE n = 100`).Scan(&rows).Error)
	assert.Equal(t, []int64{int64(10 + victim)}, rows, "the victim's statement after 1213 was committed by itself")
	assert.Equal(t, int64(102), mariaSum(t, db), "the survivor's two updates and the stray insert")
}

// max_statement_time ends a statement that waits too long, on the server:
// the statement is killed and rolled back. gormlock bounds a write's lock
// waits this way from its context's deadline.
func TestClassifyMariaDBStatementTimeout(t *testing.T) {
	db := mariaItems(t)
	if !isMariaDB(t, db) {
		t.Skip("max_statement_time is MariaDB's; MySQL 8's max_execution_time (3024) only bounds SELECT")
	}
	release := mariaHold(t, db, 1)

	t.Run("autocommit", func(t *testing.T) {
		start := time.Now()
		raw := db.Exec(`SET STATEMENT max_statement_time = 0.3 FOR UPDATE items SET n = n + 1 WHERE id = 1`).Error
		waited := time.Since(start)
		requireClassified(t, raw, locking.ErrLockTimeout, "1969")
		requireMySQLError(t, raw, 1969, "70100")
		assert.GreaterOrEqual(t, waited, 250*time.Millisecond)
		assert.Less(t, waited, 5*time.Second)
		assert.False(t, locking.IsRetryable(locking.Classify(raw)))
		// Killed before it committed: not applied.
		assertMatchesOnly(t, locking.ClassifyWrite(raw), locking.ErrLockTimeout)
		// A COMMIT killed this way may have been made: unknown.
		assertMatchesOnly(t, locking.ClassifyCommit(raw), locking.ErrCommitUnknown)
		assert.Equal(t, "1969", locking.Code(locking.ClassifyCommit(raw)))
	})

	t.Run("in a transaction", func(t *testing.T) {
		tx := db.Begin()
		require.NoError(t, tx.Error)
		defer tx.Rollback()
		require.NoError(t, tx.Exec(`UPDATE items SET n = n + 1 WHERE id = 2`).Error)
		raw := tx.Exec(`SET STATEMENT max_statement_time = 0.2 FOR UPDATE items SET n = n + 1 WHERE id = 1`).Error
		requireClassified(t, raw, locking.ErrLockTimeout, "1969")
		require.NoError(t, tx.Commit().Error, "the transaction stayed open")
	})

	release()
	var n1, n2 int64
	require.NoError(t, db.Raw(`SELECT n FROM items WHERE id = 1`).Scan(&n1).Error)
	require.NoError(t, db.Raw(`SELECT n FROM items WHERE id = 2`).Scan(&n2).Error)
	assert.Equal(t, int64(0), n1, "neither timed-out update was applied, even once the lock was free")
	assert.Equal(t, int64(1), n2)
}

// KILL QUERY interrupts a statement (1317): outside a transaction it was
// rolled back; at a COMMIT the outcome would be unknown.
func TestClassifyMariaDBKilledQuery(t *testing.T) {
	ctx := testdb.Ctx(t)
	db := mariaItems(t)
	release := mariaHold(t, db, 1)
	sqlDB, err := db.DB()
	require.NoError(t, err)
	conn, err := sqlDB.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	var id int64
	require.NoError(t, conn.QueryRowContext(ctx, `SELECT CONNECTION_ID()`).Scan(&id))

	done := make(chan error, 1)
	go func() {
		_, err := conn.ExecContext(ctx, `UPDATE items SET n = n + 1 WHERE id = ?`, 1)
		done <- err
	}()
	waitForLockWait(t, db, id)
	require.NoError(t, db.Exec(fmt.Sprintf(`KILL QUERY %d`, id)).Error)
	raw := <-done
	requireMySQLError(t, raw, 1317, "70100")
	err = locking.ClassifyWrite(raw)
	assert.True(t, err == raw, "a killed statement is returned as it is: %v", err)
	assertMatchesOnly(t, err)
	assert.Equal(t, "1317", locking.Code(err))
	assertMatchesOnly(t, locking.ClassifyCommit(raw), locking.ErrCommitUnknown)

	release()
	assert.Equal(t, int64(0), mariaSum(t, db), "the killed update was not applied")
}

// KILL CONNECTION while a write waits: the driver sees the connection
// break after the statement was sent, an unknown outcome.
func TestClassifyMariaDBKilledConnectionIsUnknown(t *testing.T) {
	ctx := testdb.Ctx(t)
	db := mariaItems(t)
	mariaHold(t, db, 1)
	sqlDB, err := db.DB()
	require.NoError(t, err)
	conn, err := sqlDB.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	var id int64
	require.NoError(t, conn.QueryRowContext(ctx, `SELECT CONNECTION_ID()`).Scan(&id))

	done := make(chan error, 1)
	go func() {
		_, err := conn.ExecContext(ctx, `UPDATE items SET n = n + 1 WHERE id = ?`, 1)
		done <- err
	}()
	waitForLockWait(t, db, id)
	require.NoError(t, db.Exec(fmt.Sprintf(`KILL CONNECTION %d`, id)).Error)
	raw := <-done
	require.Error(t, raw)
	assert.False(t, locking.NotSent(raw), "the statement was sent: %v", raw)
	err = locking.ClassifyWrite(raw)
	assertMatchesOnly(t, err, locking.ErrCommitUnknown)
	assert.ErrorIs(t, err, raw, "the cause is kept")
	assertMatchesOnly(t, locking.ClassifyCommit(raw), locking.ErrCommitUnknown)
}

// waitForLockWait waits until connection id waits for a row lock.
// information_schema.innodb_trx is a cache that InnoDB refreshes only when
// it was last read more than 0.1 s ago: polled more often, it never
// changes.
func waitForLockWait(t *testing.T, db *gorm.DB, id int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(150 * time.Millisecond)
		var n int64
		require.NoError(t, db.Raw(`SELECT count(*) FROM information_schema.innodb_trx
			WHERE trx_mysql_thread_id = ? AND trx_state = 'LOCK WAIT'`, id).Scan(&n).Error)
		if n > 0 {
			return
		}
	}
	t.Fatalf("connection %d never waited for the lock", id)
}

// MariaDB with innodb_snapshot_isolation=ON (its default from 11.6): a
// REPEATABLE READ transaction that writes a row changed since its snapshot
// gets 1020, which only a new transaction can get past.
func TestClassifyMariaDBSnapshotConflict(t *testing.T) {
	ctx := testdb.Ctx(t)
	db := mariaItems(t)
	sqlDB, err := db.DB()
	require.NoError(t, err)
	conn, err := sqlDB.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SET SESSION innodb_snapshot_isolation = ON`); err != nil {
		t.Skipf("the server has no innodb_snapshot_isolation (MariaDB 10.6.18, 10.11.8 and later have it): %v", err)
	}
	tx, err := conn.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
	require.NoError(t, err)
	defer tx.Rollback()
	var n int64
	require.NoError(t, tx.QueryRowContext(ctx, `SELECT n FROM items WHERE id = 1`).Scan(&n)) // the snapshot
	require.NoError(t, db.Exec(`UPDATE items SET n = n + 1 WHERE id = 1`).Error)             // another writer commits

	_, raw := tx.ExecContext(ctx, `UPDATE items SET n = ? WHERE id = 1 AND n = ?`, n+10, n)
	requireClassified(t, raw, locking.ErrSerialization, "1020")
	assert.True(t, locking.IsRetryable(locking.Classify(raw)))
	require.NoError(t, tx.Rollback())
	assert.Equal(t, int64(1), mariaSum(t, db), "only the other writer's update")
}

// Constraint violations and unacceptable values are classified as their
// PostgreSQL counterparts are: data exceptions (class 22, too long,
// incorrect values) and a statement that is not valid SQL are
// ErrInvalidArgument; NOT NULL, foreign key and CHECK violations are
// ErrConstraintViolation, naming the constraint (or column).
func TestClassifyMariaDBConstraintsAndValues(t *testing.T) {
	db := testdb.MariaDB(t)
	mariadb := isMariaDB(t, db)
	require.NoError(t, db.Exec(`CREATE TABLE parents (id BIGINT PRIMARY KEY) ENGINE=InnoDB`).Error)
	require.NoError(t, db.Exec(`CREATE TABLE children (
		id BIGINT PRIMARY KEY,
		parent_id BIGINT NOT NULL,
		n BIGINT NOT NULL,
		small INT NOT NULL DEFAULT 1,
		label VARCHAR(4) NOT NULL DEFAULT '',
		doc JSON NULL,
		CONSTRAINT n_positive CHECK (n > 0),
		CONSTRAINT child_parent FOREIGN KEY (parent_id) REFERENCES parents (id)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`).Error)
	require.NoError(t, db.Exec(`INSERT INTO parents (id) VALUES (1)`).Error)
	require.NoError(t, db.Exec(`INSERT INTO children (id, parent_id, n) VALUES (1, 1, 1)`).Error)

	checkNumber, checkState := uint16(3819), "HY000"
	if mariadb {
		checkNumber, checkState = 4025, "23000"
	}
	constraints := []struct {
		name               string
		sql                string
		args               []any
		number             uint16
		state              string
		constraint, column string
	}{
		{"NOT NULL", `INSERT INTO children (id, parent_id, n) VALUES (2, 1, ?)`, []any{nil}, 1048, "23000", "", "n"},
		{"NOT NULL without default", `INSERT INTO children (id, parent_id) VALUES (2, 1)`, nil, 1364, "HY000", "", "n"},
		{"CHECK", `INSERT INTO children (id, parent_id, n) VALUES (2, 1, ?)`, []any{0}, checkNumber, checkState, "n_positive", ""},
		{"foreign key, missing parent", `INSERT INTO children (id, parent_id, n) VALUES (2, ?, 1)`, []any{99}, 1452, "23000", "child_parent", ""},
		{"foreign key, parent referenced", `DELETE FROM parents WHERE id = ?`, []any{1}, 1451, "23000", "child_parent", ""},
	}
	if mariadb {
		// MariaDB's JSON is LONGTEXT with a json_valid CHECK (MySQL 8's
		// is a type of its own, which refuses bad JSON with 3140, class 22).
		constraints = append(constraints, struct {
			name               string
			sql                string
			args               []any
			number             uint16
			state              string
			constraint, column string
		}{"invalid JSON", `INSERT INTO children (id, parent_id, n, doc) VALUES (2, 1, 1, ?)`, []any{"{not json"}, 4025, "23000", "children.doc", ""})
	}
	for _, tt := range constraints {
		t.Run(tt.name, func(t *testing.T) {
			raw := db.Exec(tt.sql, tt.args...).Error
			require.Error(t, raw)
			requireMySQLError(t, raw, tt.number, tt.state)
			de := requireClassified(t, raw, locking.ErrConstraintViolation, fmt.Sprint(tt.number))
			assert.Equal(t, tt.constraint, de.Constraint)
			assert.Equal(t, tt.column, de.Column)
			assertMatchesOnly(t, locking.ClassifyWrite(raw), locking.ErrConstraintViolation)
			assertMatchesOnly(t, locking.ClassifyCommit(raw), locking.ErrConstraintViolation)
		})
	}

	raw := db.Exec(`INSERT INTO children VALUES (`).Error
	requireMySQLError(t, raw, 1064, "42000")
	requireClassified(t, raw, locking.ErrInvalidArgument, "1064")
	raw = db.Exec(`UPDATE children SET n = 2 WHERE nosuch = 1`).Error
	requireMySQLError(t, raw, 1054, "42S22")
	requireClassified(t, raw, locking.ErrInvalidArgument, "1054")

	invalid := []struct {
		name   string
		sql    string
		arg    any
		number uint16
		state  string
	}{
		{"too long for the column", `INSERT INTO children (id, parent_id, n, label) VALUES (3, 1, 1, ?)`, "12345", 1406, "22001"},
		{"not an integer", `INSERT INTO children (id, parent_id, n, small) VALUES (3, 1, 1, ?)`, "x", 1366, map[bool]string{true: "22007", false: "HY000"}[mariadb]},
		{"invalid UTF-8", `INSERT INTO children (id, parent_id, n, label) VALUES (3, 1, 1, ?)`, "a\xff", 1366, map[bool]string{true: "22007", false: "HY000"}[mariadb]},
		{"out of range", `INSERT INTO children (id, parent_id, n, small) VALUES (3, 1, 1, ?)`, int64(1) << 40, 1264, "22003"},
		{"BIGINT overflow", `UPDATE children SET n = n + ? WHERE id = 1`, int64(9223372036854775807), 1690, "22003"},
	}
	for _, tt := range invalid {
		t.Run(tt.name, func(t *testing.T) {
			raw := db.Exec(tt.sql, tt.arg).Error
			requireMySQLError(t, raw, tt.number, tt.state)
			requireClassified(t, raw, locking.ErrInvalidArgument, fmt.Sprint(tt.number))
			assertMatchesOnly(t, locking.ClassifyWrite(raw), locking.ErrInvalidArgument)
		})
	}

	var n int64
	require.NoError(t, db.Raw(`SELECT count(*) FROM children`).Scan(&n).Error)
	assert.Equal(t, int64(1), n, "the refused statements wrote nothing")
}

func TestClassifyMariaDBNotSupported(t *testing.T) {
	db := mariaItems(t)
	var ids []int64
	raw := db.Raw(`SELECT id FROM items WHERE id IN (SELECT id FROM items ORDER BY id LIMIT 1)`).Scan(&ids).Error
	requireClassified(t, raw, locking.ErrNotSupported, "1235")
	requireMySQLError(t, raw, 1235, "42000")
}

// mysqlErr is the driver's error as the server sends it.
func mysqlErr(number uint16, state string) *mysql.MySQLError {
	e := &mysql.MySQLError{Number: number, Message: "synthetic"}
	copy(e.SQLState[:], state)
	return e
}

// Every error number gormlock classifies, as the driver reports it:
// Classify's kind and code, and whether ClassifyWrite and ClassifyCommit
// take it as a definite outcome.
func TestClassifyMySQLErrorNumbers(t *testing.T) {
	const (
		definite = iota
		unknown
	)
	tests := []struct {
		number        uint16
		state         string
		kind          error // nil: passed through unchanged
		write, commit int
	}{
		{1062, "23000", locking.ErrAlreadyExists, definite, definite},
		{1586, "23000", locking.ErrAlreadyExists, definite, definite},
		{1205, "HY000", locking.ErrLocked, definite, definite},
		{3572, "HY000", locking.ErrLocked, definite, definite},
		{1213, "40001", locking.ErrDeadlock, definite, definite},
		{1020, "HY000", locking.ErrSerialization, definite, definite},
		{1969, "70100", locking.ErrLockTimeout, definite, unknown},
		{3024, "HY000", locking.ErrLockTimeout, definite, unknown},
		{1235, "42000", locking.ErrNotSupported, definite, definite},
		{1406, "22001", locking.ErrInvalidArgument, definite, definite},
		{1366, "HY000", locking.ErrInvalidArgument, definite, definite},
		{1366, "22007", locking.ErrInvalidArgument, definite, definite},
		{1264, "22003", locking.ErrInvalidArgument, definite, definite},
		{1292, "22007", locking.ErrInvalidArgument, definite, definite},
		{1690, "22003", locking.ErrInvalidArgument, definite, definite},
		{3140, "22032", locking.ErrInvalidArgument, definite, definite},
		{1048, "23000", locking.ErrConstraintViolation, definite, definite},
		{1364, "HY000", locking.ErrConstraintViolation, definite, definite},
		{1216, "23000", locking.ErrConstraintViolation, definite, definite},
		{1217, "23000", locking.ErrConstraintViolation, definite, definite},
		{1451, "23000", locking.ErrConstraintViolation, definite, definite},
		{1452, "23000", locking.ErrConstraintViolation, definite, definite},
		{4025, "23000", locking.ErrConstraintViolation, definite, definite},
		{3819, "HY000", locking.ErrConstraintViolation, definite, definite},
		{1064, "42000", locking.ErrInvalidArgument, definite, definite},
		{1054, "42S22", locking.ErrInvalidArgument, definite, definite},
		{1052, "23000", locking.ErrInvalidArgument, definite, definite},
		{1149, "42000", locking.ErrInvalidArgument, definite, definite},
		{1305, "42000", locking.ErrInvalidArgument, definite, definite},
		{1146, "42S02", nil, definite, definite}, // no such table
		{1792, "25006", nil, definite, definite}, // read-only transaction
		{1317, "70100", nil, definite, unknown},  // KILL QUERY
		{1927, "70100", nil, unknown, unknown},   // KILL CONNECTION
		{1053, "08S01", nil, unknown, unknown},   // server shutdown
		{1180, "HY000", nil, unknown, unknown},   // error during commit
		{1047, "08S01", nil, unknown, unknown},   // e.g. a Galera node not ready
		{1040, "08004", nil, definite, definite}, // too many connections: nothing was sent
		{1043, "08S01", nil, definite, definite}, // bad handshake: nothing was sent
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d %s", tt.number, tt.state), func(t *testing.T) {
			raw := fmt.Errorf("exec: %w", mysqlErr(tt.number, tt.state))
			code := fmt.Sprint(tt.number)
			err := locking.Classify(raw)
			if tt.kind == nil {
				assert.True(t, err == raw, "passed through unchanged, got %v", err)
				assertMatchesOnly(t, err)
			} else {
				requireClassified(t, raw, tt.kind, code)
			}
			assert.Equal(t, code, locking.Code(raw))
			assert.Equal(t, code, locking.Code(err))
			requireMySQLError(t, err, tt.number, tt.state)

			for name, got := range map[string]struct {
				err  error
				want int
			}{
				"ClassifyWrite":  {locking.ClassifyWrite(raw), tt.write},
				"ClassifyCommit": {locking.ClassifyCommit(raw), tt.commit},
			} {
				if got.want == unknown {
					assertMatchesOnly(t, got.err, locking.ErrCommitUnknown)
					assert.ErrorIs(t, got.err, raw, "%s keeps the cause", name)
				} else if tt.kind == nil {
					assert.True(t, got.err == raw, "%s: a definite outcome, passed through: %v", name, got.err)
				} else {
					assertMatchesOnly(t, got.err, tt.kind)
				}
				assert.Equal(t, code, locking.Code(got.err), name)
			}
		})
	}
}

// The driver's connection errors follow the rules of every driver: an
// error raised before anything was sent (driver.ErrBadConn, which
// go-sql-driver/mysql returns only when not a byte was written) is
// definite for a statement but never trusted for a COMMIT; a connection
// that broke after the statement was sent is an unknown outcome.
func TestClassifyMySQLConnectionErrors(t *testing.T) {
	tests := []struct {
		name  string
		err   error
		write bool // ClassifyWrite: definite
	}{
		{"driver.ErrBadConn", driver.ErrBadConn, true},
		{"mysql.ErrInvalidConn", mysql.ErrInvalidConn, false},
		{"mysql.ErrPktSync", mysql.ErrPktSync, false},
		{"mysql.ErrMalformPkt", mysql.ErrMalformPkt, false},
		{"io.ErrUnexpectedEOF", io.ErrUnexpectedEOF, false},
		{"net error", &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}, false},
		{"context deadline", context.DeadlineExceeded, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := fmt.Errorf("exec: %w", tt.err)
			assert.True(t, locking.Classify(raw) == raw)
			assert.Equal(t, "", locking.Code(raw))
			w := locking.ClassifyWrite(raw)
			if tt.write {
				assert.True(t, w == raw, "not sent: definite, got %v", w)
			} else {
				assertMatchesOnly(t, w, locking.ErrCommitUnknown)
				assert.ErrorIs(t, w, tt.err)
			}
			c := locking.ClassifyCommit(raw)
			assertMatchesOnly(t, c, locking.ErrCommitUnknown)
			assert.ErrorIs(t, c, tt.err)
		})
	}
}

// MySQLError looks like the driver's error but is not in its package.
type MySQLError struct {
	Number   uint16
	SQLState [5]byte
}

func (e *MySQLError) Error() string { return fmt.Sprintf("look-alike %d", e.Number) }

// A MySQLError of another package is not the driver's and is left alone;
// so is a nil one.
func TestClassifyIgnoresLookAlikeMySQLErrors(t *testing.T) {
	look := fmt.Errorf("x: %w", errors.Join(errors.New("a"), &MySQLError{Number: 1062}))
	assert.True(t, locking.Classify(look) == look)
	assert.Equal(t, "", locking.Code(look))

	var nilErr *mysql.MySQLError
	wrapped := fmt.Errorf("x: %w", error(nilErr))
	assert.True(t, locking.Classify(wrapped) == wrapped, "a nil *MySQLError carries no number")
	assert.Equal(t, "", locking.Code(wrapped))

	noState := &mysql.MySQLError{Number: 1213}
	requireClassified(t, noState, locking.ErrDeadlock, "1213")
}
