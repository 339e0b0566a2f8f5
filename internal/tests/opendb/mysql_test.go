package opendb_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	mysqlopen "github.com/gormlock/gormlock/opendb/mysql"

	drivermysql "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
)

// The settings MySQLDSN adds, in FormatDSN's order.
const mysqlSettings = "clientFoundRows=true&charset=utf8mb4&collation=utf8mb4_general_ci&parseTime=true"
const mysqlSession = "sql_mode=CONCAT%28%40%40sql_mode%2C+%27%2CSTRICT_ALL_TABLES%27%29&time_zone=%27%2B00%3A00%27"

func TestMySQLDSN(t *testing.T) {
	for _, tt := range []struct{ name, in, want string }{
		{"plain", "root@tcp(127.0.0.1:3306)/test",
			"root@tcp(127.0.0.1:3306)/test?" + mysqlSettings + "&" + mysqlSession},
		{"the usual parseTime", "root@tcp(127.0.0.1:3306)/test?parseTime=true",
			"root@tcp(127.0.0.1:3306)/test?" + mysqlSettings + "&" + mysqlSession},
		{"what it asks for already", "root@tcp(127.0.0.1:3306)/test?clientFoundRows=1&parseTime=1&loc=UTC&charset=utf8mb4&time_zone=%27%2B00%3A00%27",
			"root@tcp(127.0.0.1:3306)/test?" + mysqlSettings + "&" + mysqlSession},
		{"password and other settings kept", "app:s3cr%t@tcp(db.internal:3307)/shop?timeout=5s&readTimeout=30s&tls=skip-verify&interpolateParams=true",
			"app:s3cr%t@tcp(db.internal:3307)/shop?clientFoundRows=true&charset=utf8mb4&collation=utf8mb4_general_ci" +
				"&interpolateParams=true&parseTime=true&readTimeout=30s&timeout=5s&tls=skip-verify&" + mysqlSession},
		{"a utf8mb4 collation kept", "root@tcp(h:3306)/test?collation=utf8mb4_bin",
			"root@tcp(h:3306)/test?clientFoundRows=true&charset=utf8mb4&collation=utf8mb4_bin&parseTime=true&" + mysqlSession},
		{"its own sql_mode kept", "root@tcp(h:3306)/test?sql_mode=%27TRADITIONAL%27",
			"root@tcp(h:3306)/test?" + mysqlSettings + "&sql_mode=%27TRADITIONAL%27&time_zone=%27%2B00%3A00%27"},
		{"other session variables kept", "root@tcp(h:3306)/test?innodb_lock_wait_timeout=5",
			"root@tcp(h:3306)/test?" + mysqlSettings + "&innodb_lock_wait_timeout=5&" + mysqlSession},
		{"unix socket", "root@unix(/run/mysqld/mysqld.sock)/test",
			"root@unix(/run/mysqld/mysqld.sock)/test?" + mysqlSettings + "&" + mysqlSession},
		{"mysql:// and the driver's form", "mysql://root@tcp(127.0.0.1:3306)/test",
			"root@tcp(127.0.0.1:3306)/test?" + mysqlSettings + "&" + mysqlSession},
		{"mariadb:// and the driver's form", "mariadb://root@tcp(127.0.0.1:3306)/test",
			"root@tcp(127.0.0.1:3306)/test?" + mysqlSettings + "&" + mysqlSession},
		{"URL", "mysql://app:p%40ss%2Fw0rd@db.internal:3307/shop?timeout=5s",
			"app:p@ss/w0rd@tcp(db.internal:3307)/shop?" + mysqlSettings + "&timeout=5s&" + mysqlSession},
		{"URL without a port", "mysql://root@localhost/test",
			"root@tcp(localhost:3306)/test?" + mysqlSettings + "&" + mysqlSession},
		{"URL with IPv6", "mariadb://root@[::1]:3306/test",
			"root@tcp([::1]:3306)/test?" + mysqlSettings + "&" + mysqlSession},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := mysqlopen.DSN(tt.in)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)

			// The driver reads back what gormlock relies on.
			cfg, err := drivermysql.ParseDSN(got)
			require.NoError(t, err)
			assert.True(t, cfg.ClientFoundRows)
			assert.True(t, cfg.ParseTime)
			assert.Same(t, time.UTC, cfg.Loc)
			assert.Equal(t, "'+00:00'", cfg.Params["time_zone"])
			assert.Contains(t, cfg.Params, "sql_mode")

			again, err := mysqlopen.DSN(got)
			require.NoError(t, err)
			assert.Equal(t, got, again, "MySQLDSN of its own result changes nothing")
		})
	}
}

func TestMySQLDSNRefusesWhatBreaksGormlock(t *testing.T) {
	const base = "app:s3cret@tcp(127.0.0.1:3306)/test?"
	for _, tt := range []struct{ name, dsn, mentions string }{
		{"empty", "", "empty"},
		{"blank", "  ", "empty"},
		{"clientFoundRows=false", base + "clientFoundRows=false", "clientFoundRows=false"},
		{"clientFoundRows=0", base + "clientFoundRows=0", "reads as a stale version"},
		{"parseTime=false", base + "parseTime=false", "parseTime=false"},
		{"a time_zone loc does not have", base + "loc=Europe%2FBerlin&time_zone=%27%2B01%3A00%27", "loc=Europe/Berlin: time_zone 'Europe/Berlin'"},
		{"an unknown loc", base + "loc=Mars%2FOlympus", "go-sql-driver/mysql"},
		{"another charset", base + "charset=latin1", "charset=latin1"},
		{"utf8mb3", base + "charset=utf8", "charset=utf8:"},
		{"a collation of another charset", base + "collation=latin1_swedish_ci", "collation=latin1_swedish_ci"},
		{"another time zone", base + "time_zone=%27SYSTEM%27", "time_zone='SYSTEM'"},
		{"strict, which panics in the driver", base + "strict=true", "strict"},
		{"strict in a URL", "mysql://app:s3cret@h/test?strict=1", "strict"},
		{"no slash", "app:s3cret@tcp(127.0.0.1:3306)", "go-sql-driver/mysql"},
		{"unclosed address", "app:s3cret@tcp(127.0.0.1:3306/test", "go-sql-driver/mysql"},
		{"bad bool", base + "clientFoundRows=maybe", "invalid bool value"},
		{"bad timeout", base + "timeout=soon", "go-sql-driver/mysql"},
		{"bad URL", "mysql://app:s3cret@[::1/test", "malformed"},
		{"URL with a fragment", "mysql://app:s3cret@h/test#x", "mysql://user:password@host:port/dbname"},
		{"URL with clientFoundRows=false", "mysql://app:s3cret@h/test?clientFoundRows=false", "clientFoundRows=false"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got string
			var err error
			require.NotPanics(t, func() { got, err = mysqlopen.DSN(tt.dsn) })
			require.ErrorIs(t, err, locking.ErrInvalidArgument)
			assert.Empty(t, got)
			assert.Contains(t, err.Error(), tt.mentions)
			assert.NotContains(t, err.Error(), "s3cret", "an error never repeats the password")

			db, err := mysqlopen.Open(tt.dsn)
			require.ErrorIs(t, err, locking.ErrInvalidArgument)
			assert.Nil(t, db)
		})
	}
}

// Open accepts every form of a MySQL DSN, and connects once: nothing
// listens on port 1, so it fails there, not on the DSN.
func TestOpenAcceptsEveryDSNForm(t *testing.T) {
	for _, dsn := range []string{
		"root@tcp(127.0.0.1:1)/test?timeout=5s",
		"tcp(127.0.0.1:1)/test?timeout=5s",
		"root:pw@tcp4(127.0.0.1:1)/test?timeout=5s",
		"mysql://root@tcp(127.0.0.1:1)/test?timeout=5s",
		"MySQL://root@127.0.0.1:1/test?timeout=5s",
		"mariadb://root@127.0.0.1:1/test?timeout=5s",
	} {
		t.Run(dsn, func(t *testing.T) {
			db, err := mysqlopen.Open(dsn)
			require.Error(t, err)
			assert.Nil(t, db)
			assert.Contains(t, err.Error(), "mysql: open:")
			assert.Contains(t, err.Error(), "connection refused")
			assert.NotErrorIs(t, err, locking.ErrInvalidArgument)
		})
	}
}

// mysqlPair opens one fresh MariaDB database twice: with mysql.Open, and
// with gorm.io/driver/mysql and the configured DSN as it is (the negative
// control).
func mysqlPair(t *testing.T) (safe, plain *gorm.DB) {
	t.Helper()
	dsn := testdb.MariaDBDatabase(t)
	safe, err := mysqlopen.Open(dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = fixtures.Close(safe) })
	plain, err = gorm.Open(mysql.Open(dsn), &gorm.Config{Logger: logger.Discard})
	require.NoError(t, err)
	t.Cleanup(func() { _ = fixtures.Close(plain) })
	return safe, plain
}

// A guarded UPDATE that matches the record and writes the values it has
// reports its row: without clientFoundRows it reports 0, which gormlock
// would take for a stale version.
func TestMySQLIdenticalUpdateReportsItsRow(t *testing.T) {
	safe, plain := mysqlPair(t)
	require.NoError(t, safe.Exec(`CREATE TABLE items (id BIGINT PRIMARY KEY, version BIGINT NOT NULL, name VARCHAR(20) NOT NULL)`).Error)
	require.NoError(t, safe.Exec(`INSERT INTO items VALUES (1, 5, 'same')`).Error)
	for name, tt := range map[string]struct {
		db   *gorm.DB
		want int64
	}{"mysql.Open": {safe, 1}, "without clientFoundRows (negative control)": {plain, 0}} {
		t.Run(name, func(t *testing.T) {
			res := tt.db.Exec(`UPDATE items SET version = ?, name = ? WHERE id = ? AND version = ?`, 5, "same", 1, 5)
			require.NoError(t, res.Error)
			assert.Equal(t, tt.want, res.RowsAffected)
			res = tt.db.Table("items").Where("id = ? AND version = ?", 1, 5).Updates(map[string]any{"name": "same"})
			require.NoError(t, res.Error)
			assert.Equal(t, tt.want, res.RowsAffected, "GORM's Updates too")
			// A stale version still matches nothing.
			res = tt.db.Exec(`UPDATE items SET name = ? WHERE id = ? AND version = ?`, "same", 1, 4)
			require.NoError(t, res.Error)
			assert.Zero(t, res.RowsAffected)
		})
	}
}

func TestMySQLTimesKeepMicroseconds(t *testing.T) {
	safe, plain := mysqlPair(t)
	require.NoError(t, safe.Exec(`CREATE TABLE stamps (id BIGINT PRIMARY KEY, at DATETIME(6) NOT NULL)`).Error)
	at := time.Date(2026, 11, 23, 10, 11, 12, 123456789, time.FixedZone("UTC-5", -5*3600))
	require.NoError(t, safe.Exec(`INSERT INTO stamps VALUES (1, ?)`, at).Error)
	var got time.Time
	require.NoError(t, safe.Raw(`SELECT at FROM stamps WHERE id = 1`).Scan(&got).Error)
	assert.Equal(t, at.Truncate(time.Microsecond).UTC(), got, "the same instant, to the microsecond")
	assert.Same(t, time.UTC, got.Location())
	var text string
	require.NoError(t, safe.Raw(`SELECT CAST(at AS CHAR) FROM stamps WHERE id = 1`).Scan(&text).Error)
	assert.Equal(t, "2026-11-23 15:11:12.123456", text, "stored in UTC")

	// GORM's own times: the migrator's DATETIME and the clock.
	type Stamp struct {
		ID int64
		At time.Time
	}
	for name, tt := range map[string]struct {
		db        *gorm.DB
		precision int64
	}{"mysql.Open": {safe, 6}, "gorm.io/driver/mysql's default (negative control)": {plain, 3}} {
		t.Run(name, func(t *testing.T) {
			table := fmt.Sprintf("stamps_%d", tt.precision)
			db := tt.db.Table(table)
			require.NoError(t, db.AutoMigrate(&Stamp{}))
			var precision int64
			require.NoError(t, tt.db.Raw(`SELECT datetime_precision FROM information_schema.columns
				WHERE table_schema = DATABASE() AND table_name = ? AND column_name = 'at'`, table).Scan(&precision).Error)
			assert.Equal(t, tt.precision, precision)

			belowMillis := false
			for range 20 {
				now := tt.db.Config.NowFunc()
				assert.Zero(t, now.Nanosecond()%1000, "GORM's clock is rounded to the microsecond at least")
				if now.Nanosecond()%int(time.Millisecond) != 0 {
					belowMillis = true
				}
				time.Sleep(37 * time.Microsecond)
			}
			assert.Equal(t, tt.precision == 6, belowMillis, "GORM's clock keeps microseconds only with precision 6")
		})
	}
}

// sessionSettings reads the session variables mysql.Open sets.
func sessionSettings(t *testing.T, ctx context.Context, conn *sql.Conn) (zone, mode, charset, collation string) {
	t.Helper()
	require.NoError(t, conn.QueryRowContext(ctx, `SELECT @@session.time_zone, @@session.sql_mode,
		@@session.character_set_connection, @@session.collation_connection`).Scan(&zone, &mode, &charset, &collation))
	return zone, mode, charset, collation
}

func TestMySQLSessionSettingsOnEveryConnection(t *testing.T) {
	ctx := testdb.Ctx(t)
	safe, plain := mysqlPair(t)
	sqlDB, err := safe.DB()
	require.NoError(t, err)
	conns := make([]*sql.Conn, 3)
	for i := range conns {
		conns[i], err = sqlDB.Conn(ctx)
		require.NoError(t, err)
		defer conns[i].Close()
	}
	for i, conn := range conns {
		zone, mode, charset, collation := sessionSettings(t, ctx, conn)
		assert.Equal(t, "+00:00", zone, "connection %d", i)
		assert.Contains(t, strings.Split(mode, ","), "STRICT_ALL_TABLES", "connection %d", i)
		assert.Equal(t, "utf8mb4", charset, "connection %d", i)
		assert.Equal(t, mysqlopen.Collation, collation, "connection %d", i)
		// NOW() is UTC, so UNIX_TIMESTAMP agrees with the Go clock.
		var skew float64
		require.NoError(t, conn.QueryRowContext(ctx, `SELECT TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), NOW(6))`).Scan(&skew))
		assert.Zero(t, skew, "connection %d: NOW() is UTC", i)
		var unixMicros int64
		require.NoError(t, conn.QueryRowContext(ctx, `SELECT CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED)`).Scan(&unixMicros))
		assert.InDelta(t, time.Now().UnixMicro(), unixMicros, float64(5*time.Second/time.Microsecond), "connection %d", i)
	}

	// The negative control: the server's own session.
	plainDB, err := plain.DB()
	require.NoError(t, err)
	conn, err := plainDB.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	zone, _, _, _ := sessionSettings(t, ctx, conn)
	assert.NotEqual(t, "+00:00", zone, "the server's default session time zone (usually SYSTEM)")
}

// Text keeps every character, 4-byte ones included, and a value too long
// for its column is refused instead of cut short.
func TestMySQLTextIsUTF8MB4AndStrict(t *testing.T) {
	safe, _ := mysqlPair(t)
	require.NoError(t, safe.Exec(`CREATE TABLE notes (id BIGINT PRIMARY KEY, body VARCHAR(4) NOT NULL) DEFAULT CHARSET=utf8mb4`).Error)
	require.NoError(t, safe.Exec(`INSERT INTO notes VALUES (1, ?)`, "a🙂é").Error)
	var body string
	require.NoError(t, safe.Raw(`SELECT body FROM notes WHERE id = 1`).Scan(&body).Error)
	assert.Equal(t, "a🙂é", body)

	err := safe.Exec(`INSERT INTO notes VALUES (2, ?)`, "12345").Error
	require.ErrorIs(t, locking.Classify(err), locking.ErrInvalidArgument)
	assert.Equal(t, "1406", locking.Code(err))

	// The control: a session without a strict mode cuts the value short.
	require.NoError(t, safe.Transaction(func(tx *gorm.DB) error {
		var mode string
		require.NoError(t, tx.Raw(`SELECT @@session.sql_mode`).Scan(&mode).Error)
		require.NoError(t, tx.Exec(`SET SESSION sql_mode = ''`).Error)
		require.NoError(t, tx.Exec(`INSERT INTO notes VALUES (3, ?)`, "12345").Error)
		require.NoError(t, tx.Raw(`SELECT body FROM notes WHERE id = 3`).Scan(&body).Error)
		assert.Equal(t, "1234", body)
		return tx.Exec(`SET SESSION sql_mode = ?`, mode).Error
	}))
}

func TestMySQLChecksTheSessionIsStrict(t *testing.T) {
	dsn := testdb.MariaDBDatabase(t)
	cfg, err := drivermysql.ParseDSN(dsn)
	require.NoError(t, err)
	for mode, ok := range map[string]bool{"''": false, "'ANSI_QUOTES'": false, "'TRADITIONAL'": true, "'STRICT_TRANS_TABLES'": true} {
		t.Run(mode, func(t *testing.T) {
			c := cfg.Clone()
			if c.Params == nil {
				c.Params = map[string]string{}
			}
			c.Params["sql_mode"] = mode
			db, err := mysqlopen.Open(c.FormatDSN())
			if ok {
				require.NoError(t, err)
				require.NoError(t, fixtures.Close(db))
				return
			}
			require.ErrorIs(t, err, locking.ErrInvalidArgument)
			assert.Nil(t, db)
			assert.Contains(t, err.Error(), "sql_mode")
		})
	}
}

func TestOpenMySQL(t *testing.T) {
	dsn := testdb.MariaDBDatabase(t)
	cfg, err := drivermysql.ParseDSN(dsn)
	require.NoError(t, err)
	url := "mysql://" + cfg.User
	if cfg.Passwd != "" {
		url += ":" + cfg.Passwd
	}
	url += "@" + cfg.Addr + "/" + cfg.DBName
	for name, d := range map[string]string{"driver form": dsn, "mysql://": "mysql://" + dsn, "URL": url} {
		t.Run(name, func(t *testing.T) {
			db, err := fixtures.OpenDSN(d)
			require.NoError(t, err)
			t.Cleanup(func() { _ = fixtures.Close(db) })
			assert.Equal(t, "mysql", db.Dialector.Name())
			var current, zone string
			require.NoError(t, db.Raw(`SELECT DATABASE(), @@session.time_zone`).Row().Scan(&current, &zone))
			assert.Equal(t, cfg.DBName, current)
			assert.Equal(t, "+00:00", zone)
		})
	}
}
