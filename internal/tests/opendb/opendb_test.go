package opendb_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	pgopen "github.com/gormlock/gormlock/opendb/postgres"

	sqliteopen "github.com/gormlock/gormlock/opendb/sqlite"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
)

func openSQLite(t *testing.T, path string) *gorm.DB {
	t.Helper()
	db, err := sqliteopen.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = fixtures.Close(db) })
	return db
}

func TestSQLiteDSN(t *testing.T) {
	dsn, err := sqliteopen.DSN("/var/lib/app/data.db")
	require.NoError(t, err)
	assert.Equal(t, "file:/var/lib/app/data.db?_busy_timeout=10000&_foreign_keys=on&_journal_mode=WAL&_synchronous=NORMAL&_txlock=immediate", dsn)
	assert.Equal(t, 10*time.Second, sqliteopen.BusyTimeout)
}

func TestSQLiteDSNRejectsUnusablePaths(t *testing.T) {
	dir := t.TempDir()
	for _, path := range []string{
		"",
		":memory:",
		"file::memory:?cache=shared",
		"file:test.db?mode=memory&cache=shared",
		filepath.Join(dir, "data.db?_journal_mode=DELETE"),
		filepath.Join(dir, "what?.db"),
		filepath.Join(dir, "data.db#frag"),
	} {
		t.Run(path, func(t *testing.T) {
			dsn, err := sqliteopen.DSN(path)
			require.ErrorIs(t, err, locking.ErrInvalidArgument)
			assert.Equal(t, "", dsn)

			db, err := sqliteopen.Open(path)
			require.ErrorIs(t, err, locking.ErrInvalidArgument)
			assert.Nil(t, db)
		})
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "a refused path creates no file")
}

// pragmas reads the settings the DSN promises from one connection.
func pragmas(t *testing.T, ctx context.Context, conn *sql.Conn) (journal string, busy, fk, sync int) {
	t.Helper()
	require.NoError(t, conn.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&journal))
	require.NoError(t, conn.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&busy))
	require.NoError(t, conn.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk))
	require.NoError(t, conn.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync))
	return journal, busy, fk, sync
}

func TestSQLiteSettingsOnEveryConnection(t *testing.T) {
	ctx := testdb.Ctx(t)
	db := openSQLite(t, filepath.Join(t.TempDir(), "settings.db"))
	sqlDB, err := db.DB()
	require.NoError(t, err)

	// Hold three connections at once, so each is a distinct pooled connection.
	conns := make([]*sql.Conn, 3)
	for i := range conns {
		conns[i], err = sqlDB.Conn(ctx)
		require.NoError(t, err)
		defer conns[i].Close()
	}
	for i, conn := range conns {
		journal, busy, fk, sync := pragmas(t, ctx, conn)
		assert.Equal(t, "wal", journal, "connection %d", i)
		assert.Equal(t, 10000, busy, "connection %d", i)
		assert.Equal(t, 1, fk, "connection %d: foreign_keys", i)
		assert.Equal(t, 1, sync, "connection %d: synchronous=NORMAL", i)
	}
}

func TestSQLiteSettingsNegativeControl(t *testing.T) {
	// The same checks on a plain go-sqlite3 connection see none of the
	// settings, so TestSQLiteSettingsOnEveryConnection tests the openers.
	ctx := testdb.Ctx(t)
	plain := testdb.RawSQLite(t, filepath.Join(t.TempDir(), "plain.db"), "_busy_timeout=0")
	conn, err := plain.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	journal, busy, fk, _ := pragmas(t, ctx, conn) // go-sqlite3 itself defaults to synchronous=NORMAL
	assert.Equal(t, "delete", journal)
	assert.Equal(t, 0, busy)
	assert.Equal(t, 0, fk)
}

func TestSQLiteTransactionsTakeTheWriteLockUpFront(t *testing.T) {
	for _, tt := range []struct {
		name      string
		open      func(t *testing.T, path string) *gorm.DB
		wantBusy  bool
		condition string
	}{
		{"opendb", openSQLite, true, "BEGIN IMMEDIATE holds the write lock from the start"},
		{"deferred (negative control)", func(t *testing.T, path string) *gorm.DB {
			db := openSQLite(t, path) // sets WAL on the file
			require.NoError(t, fixtures.Close(db))
			plain, err := gorm.Open(sqlite.Open("file:"+path+"?_txlock=deferred"), &gorm.Config{Logger: logger.Discard})
			require.NoError(t, err)
			t.Cleanup(func() { _ = fixtures.Close(plain) })
			return plain
		}, false, "a deferred transaction that only read holds no write lock"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testdb.Ctx(t)
			path := filepath.Join(t.TempDir(), "tx.db")
			db := tt.open(t, path).WithContext(ctx)
			require.NoError(t, db.Exec(`CREATE TABLE items (id INTEGER PRIMARY KEY)`).Error)
			other := testdb.RawSQLite(t, path, "_busy_timeout=0")

			tx := db.Begin()
			require.NoError(t, tx.Error)
			defer tx.Rollback()
			var n int64
			require.NoError(t, tx.Raw(`SELECT count(*) FROM items`).Scan(&n).Error) // a read only

			_, err := other.ExecContext(ctx, `INSERT INTO items (id) VALUES (1)`)
			if tt.wantBusy {
				require.ErrorIs(t, locking.Classify(err), locking.ErrLocked, tt.condition)
				assert.Equal(t, "SQLITE_BUSY", locking.Code(locking.Classify(err)))
			} else {
				require.NoError(t, err, tt.condition)
			}
		})
	}
}

func TestOpenSQLite(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct{ name, path string }{
		{"plain path", filepath.Join(dir, "plain.db")},
		{"name with host=", filepath.Join(dir, "host=odd.db")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			db, err := sqliteopen.Open(tt.path)
			require.NoError(t, err)
			t.Cleanup(func() { _ = fixtures.Close(db) })
			assert.Equal(t, "sqlite", db.Dialector.Name())

			var journal string
			require.NoError(t, db.Raw("PRAGMA journal_mode").Scan(&journal).Error)
			assert.Equal(t, "wal", journal)
			var busy int
			require.NoError(t, db.Raw("PRAGMA busy_timeout").Scan(&busy).Error)
			assert.Equal(t, 10000, busy)

			require.NoError(t, db.Exec(`CREATE TABLE t (x INTEGER)`).Error)
			_, err = os.Stat(tt.path)
			require.NoError(t, err, "the database is the file at the given path")
		})
	}
}

func TestOpenPassesOptions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "opts.db")
	db, err := sqliteopen.Open(path, &gorm.Config{Logger: logger.Discard, SkipDefaultTransaction: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = fixtures.Close(db) })
	assert.True(t, db.SkipDefaultTransaction)

	def := openSQLite(t, filepath.Join(t.TempDir(), "default.db"))
	assert.False(t, def.SkipDefaultTransaction)
	assert.Equal(t, logger.Discard, def.Logger, "without options GORM's logger is silenced")
}

func TestOpenPostgres(t *testing.T) {
	dsn := testdb.PostgresDSN(t)
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	kv := []string{"host=" + u.Hostname()}
	if p := u.Port(); p != "" {
		kv = append(kv, "port="+p)
	}
	if name := u.User.Username(); name != "" {
		kv = append(kv, "user="+name)
	}
	if pw, ok := u.User.Password(); ok {
		kv = append(kv, "password="+pw)
	}
	kv = append(kv, "dbname="+strings.TrimPrefix(u.Path, "/"))
	for k, vs := range u.Query() {
		kv = append(kv, k+"="+vs[0])
	}

	for name, d := range map[string]string{
		"postgres URL":   dsn,
		"postgresql URL": "postgresql://" + strings.TrimPrefix(strings.TrimPrefix(dsn, "postgres://"), "postgresql://"),
		"key=value":      strings.Join(kv, " "),
	} {
		t.Run(name, func(t *testing.T) {
			db, err := pgopen.Open(d)
			require.NoError(t, err)
			t.Cleanup(func() { _ = fixtures.Close(db) })
			assert.Equal(t, "postgres", db.Dialector.Name())
			var one int
			require.NoError(t, db.Raw("SELECT 1").Scan(&one).Error)
			assert.Equal(t, 1, one)
		})
	}
}

// On a direct connection Open's default is pgx's cached prepared
// statements (cache_statement), the fastest mode: the DSN names none, the
// pool's connections run in that mode, and a statement run twice is
// prepared once on the server (pg_prepared_statements lists it).
// Negative control: the same DSN naming exec prepares nothing.
func TestPostgresDirectConnectionUsesTheStatementCache(t *testing.T) {
	dsn := testdb.PostgresDSN(t)
	require.NotContains(t, dsn, "default_query_exec_mode")
	ctx := testdb.Ctx(t)
	full, err := pgopen.DSN(ctx, dsn)
	require.NoError(t, err)
	assert.Contains(t, full, "default_query_exec_mode=cache_statement")
	mode, err := pgopen.Detect(ctx, dsn)
	require.NoError(t, err)
	assert.Equal(t, pgopen.DirectExecMode, mode)

	prepared := func(t *testing.T, dsn string) (pgx.QueryExecMode, int) {
		db, err := pgopen.Open(dsn)
		require.NoError(t, err)
		t.Cleanup(func() { _ = fixtures.Close(db) })
		sqlDB, err := db.DB()
		require.NoError(t, err)
		conn, err := sqlDB.Conn(ctx)
		require.NoError(t, err)
		defer conn.Close()
		var m pgx.QueryExecMode
		require.NoError(t, conn.Raw(func(dc any) error {
			m = dc.(*stdlib.Conn).Conn().Config().DefaultQueryExecMode
			return nil
		}))
		for range 2 {
			var n int
			require.NoError(t, conn.QueryRowContext(ctx, "SELECT $1::int + 1", 41).Scan(&n))
			require.Equal(t, 42, n)
		}
		var k int
		require.NoError(t, conn.QueryRowContext(ctx, "SELECT count(*) FROM pg_prepared_statements WHERE statement = 'SELECT $1::int + 1'").Scan(&k))
		return m, k
	}
	m, k := prepared(t, dsn)
	assert.Equal(t, pgx.QueryExecModeCacheStatement, m)
	assert.Equal(t, 1, k, "prepared once, run twice")
	m, k = prepared(t, dsn+"&default_query_exec_mode=exec")
	assert.Equal(t, pgx.QueryExecModeExec, m)
	assert.Zero(t, k, "negative control: exec prepares nothing by name")
}

func TestPostgresRejectsEmptyDSN(t *testing.T) {
	for _, dsn := range []string{"", "   "} {
		db, err := pgopen.Open(dsn)
		require.ErrorIs(t, err, locking.ErrInvalidArgument)
		assert.Nil(t, db)
	}
}

func TestPostgresChecksTheServerIsReachable(t *testing.T) {
	// Nothing listens on port 1; Open must fail while connecting, not hand
	// back a pool that fails later.
	for _, dsn := range []string{
		"postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=5",
		"host=127.0.0.1 port=1 user=postgres dbname=test sslmode=disable connect_timeout=5",
	} {
		db, err := pgopen.Open(dsn)
		require.Error(t, err)
		assert.Nil(t, db)
		assert.Contains(t, err.Error(), "postgres: open")
		assert.NotErrorIs(t, err, locking.ErrInvalidArgument)
	}
}

func TestClose(t *testing.T) {
	db := openSQLite(t, filepath.Join(t.TempDir(), "close.db"))
	require.NoError(t, db.Exec(`CREATE TABLE t (x INTEGER)`).Error)
	require.NoError(t, fixtures.Close(db))
	err := db.Exec(`INSERT INTO t (x) VALUES (1)`).Error
	require.Error(t, err)
	assert.Contains(t, err.Error(), "sql: database is closed")
}

// The concurrent write workload: writers goroutines released together, each
// doing ops operations in turn: a single INSERT, a single UPDATE, and a
// short transaction that reads the counter, then writes it back plus one
// and records an event (a lost update if two such transactions interleave).
const (
	writers = 8
	ops     = 200
)

func setupWorkload(t *testing.T, db *gorm.DB) {
	t.Helper()
	require.NoError(t, db.Exec(`CREATE TABLE counters (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)`).Error)
	require.NoError(t, db.Exec(`INSERT INTO counters (id, n) VALUES (1, 0)`).Error)
	require.NoError(t, db.Exec(`CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT,
		writer INTEGER NOT NULL, seq INTEGER NOT NULL, UNIQUE (writer, seq))`).Error)
}

// runWorkload runs the workload and returns every error met; a writer carries
// on after an error so that all of them are counted.
func runWorkload(t *testing.T, db *gorm.DB) []error {
	t.Helper()
	var (
		mu   sync.Mutex
		errs []error
	)
	record := func(err error) {
		if err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
	}
	start := make(chan struct{})
	g, ctx := errgroup.WithContext(testdb.Ctx(t))
	for w := range writers {
		g.Go(func() error {
			<-start
			db := db.WithContext(ctx)
			for i := range ops {
				switch i % 3 {
				case 0:
					record(db.Exec(`INSERT INTO events (writer, seq) VALUES (?, ?)`, w, i).Error)
				case 1:
					record(db.Exec(`UPDATE counters SET n = n + 1 WHERE id = 1`).Error)
				case 2:
					record(db.Transaction(func(tx *gorm.DB) error {
						var n int64
						if err := tx.Raw(`SELECT n FROM counters WHERE id = 1`).Scan(&n).Error; err != nil {
							return err
						}
						if err := tx.Exec(`UPDATE counters SET n = ? WHERE id = 1`, n+1).Error; err != nil {
							return err
						}
						return tx.Exec(`INSERT INTO events (writer, seq) VALUES (?, ?)`, w, i).Error
					}))
				}
			}
			return nil
		})
	}
	close(start)
	require.NoError(t, g.Wait())
	return errs
}

func TestConcurrentWritersGetNoLockErrors(t *testing.T) {
	// "8 concurrent writers produce zero 'database is locked' errors".
	db := openSQLite(t, filepath.Join(t.TempDir(), "writers.db"))
	setupWorkload(t, db)

	errs := runWorkload(t, db)
	require.Empty(t, errs, "sqlite.Open must serialise writers without errors; got %d, first: %v", len(errs), firstErr(errs))

	var perKind [3]int64
	for i := range ops {
		perKind[i%3]++
	}
	wantEvents := writers * (perKind[0] + perKind[2])
	wantCounter := writers * (perKind[1] + perKind[2])
	var events, distinct, counter int64
	require.NoError(t, db.Raw(`SELECT count(*) FROM events`).Scan(&events).Error)
	require.NoError(t, db.Raw(`SELECT count(DISTINCT writer * 1000 + seq) FROM events`).Scan(&distinct).Error)
	require.NoError(t, db.Raw(`SELECT n FROM counters WHERE id = 1`).Scan(&counter).Error)
	assert.Equal(t, int64(1064), wantEvents)
	assert.Equal(t, wantEvents, events)
	assert.Equal(t, wantEvents, distinct)
	assert.Equal(t, wantCounter, counter, "no increment may be lost")
}

func TestConcurrentWritersNegativeControl(t *testing.T) {
	// The same workload on a connection without the settings (rollback
	// journal, deferred transactions, no busy timeout) fails with
	// SQLITE_BUSY: the test above can fail.
	const maxRounds = 10
	for round := 1; round <= maxRounds; round++ {
		path := filepath.Join(t.TempDir(), fmt.Sprintf("plain-%d.db", round))
		db, err := gorm.Open(sqlite.Open("file:"+path+"?_busy_timeout=0"), &gorm.Config{Logger: logger.Discard})
		require.NoError(t, err)
		setupWorkload(t, db)
		var journal string
		require.NoError(t, db.Raw("PRAGMA journal_mode").Scan(&journal).Error)
		require.Equal(t, "delete", journal)

		errs := runWorkload(t, db)
		require.NoError(t, fixtures.Close(db))
		locked := 0
		for _, err := range errs {
			if errors.Is(locking.Classify(err), locking.ErrLocked) {
				locked++
			}
		}
		t.Logf("round %d: %d errors, %d classified ErrLocked", round, len(errs), locked)
		if locked > 0 {
			return
		}
	}
	t.Fatalf("no ErrLocked in %d rounds without the settings: the workload does not contend", maxRounds)
}

func firstErr(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return errs[0]
}

// SQLite decodes %XX in URI file names; the file opened must be the one named.
func TestSQLiteOpensTheFileNamedEvenWithPercent(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a%41b.db", "x%2Fy.db", "100% sure.db"} {
		path := filepath.Join(dir, name)
		db := openSQLite(t, path)
		require.NoError(t, db.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY)").Error, name)
		_, err := os.Stat(path)
		require.NoError(t, err, "the file %q exists under its own name", name)
	}
	_, err := os.Stat(filepath.Join(dir, "aAb.db"))
	require.True(t, os.IsNotExist(err), "no decoded twin was created")
}
