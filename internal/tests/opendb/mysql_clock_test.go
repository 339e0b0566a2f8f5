package opendb_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/dialect"
	"github.com/gormlock/gormlock/internal/tests/testdb"
)

// nearNow bounds the difference between a database clock reading and the
// process's: the server runs on this machine, so what is left is the time
// a loaded machine takes between the two readings.
const nearNow = 10 * time.Second

// zoneTables skips the test (fails it under CI=true) when the server has no
// time zone tables, which a session needs to follow a zone with daylight
// saving time by name.
func zoneTables(t *testing.T, db *gorm.DB) {
	t.Helper()
	var n int64
	require.NoError(t, db.Raw(`SELECT COUNT(*) FROM mysql.time_zone_name WHERE name = 'Europe/Berlin'`).Row().Scan(&n))
	if n == 0 {
		msg := "the MariaDB server has no time zone tables; load them: mariadb-tzinfo-to-sql /usr/share/zoneinfo | mariadb -u root mysql"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
}

// gormlock's clock reads the server's time as UTC microseconds in every
// session zone, also in the hour a daylight saving change repeats, where
// UNIX_TIMESTAMP of the session's wall time (the negative control) reads
// one of the two instants an hour early. SET timestamp fixes NOW(), not
// SYSDATE(), so the clock is read here with NOW() in SYSDATE's place.
func TestMySQLClockIgnoresTheSessionZone(t *testing.T) {
	db := testdb.MariaDB(t)
	clock := strings.ReplaceAll(dialect.MySQLClockMicros, "SYSDATE(6)", "NOW(6)")
	require.NotEqual(t, dialect.MySQLClockMicros, clock)

	// Every session zone reads the process's clock.
	millis := lookupCaps(t).NowMillis
	for _, zone := range []string{"'+00:00'", "'+08:00'", "'-09:30'", "'SYSTEM'"} {
		t.Run(zone, func(t *testing.T) {
			var micros, ms int64
			before := time.Now()
			require.NoError(t, db.Connection(func(tx *gorm.DB) error {
				require.NoError(t, tx.Exec(`SET time_zone = `+zone).Error)
				defer tx.Exec(`SET time_zone = '+00:00'`)
				return tx.Raw(`SELECT `+dialect.MySQLClockMicros+`, `+millis).Row().Scan(&micros, &ms)
			}))
			assert.InDelta(t, before.UnixMicro(), micros, float64(nearNow.Microseconds()))
			assert.InDelta(t, micros/1000, ms, 1000)
		})
	}

	zoneTables(t, db)
	// Europe/Berlin's clocks went back from 03:00 to 02:00 on 2026-10-25:
	// 00:30 and 01:30 UTC are both 02:30 there.
	var naive []int64
	for _, utc := range []time.Time{
		time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC),
		time.Date(2026, 10, 25, 1, 30, 0, 0, time.UTC),
	} {
		var micros, unix int64
		var wall string
		require.NoError(t, db.Connection(func(tx *gorm.DB) error {
			require.NoError(t, tx.Exec(`SET time_zone = 'Europe/Berlin'`).Error)
			defer tx.Exec(`SET time_zone = '+00:00'`)
			require.NoError(t, tx.Exec(`SET timestamp = ?`, utc.Unix()).Error)
			defer tx.Exec(`SET timestamp = DEFAULT`)
			return tx.Raw(`SELECT `+clock+`, CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED), CAST(NOW() AS CHAR)`).Row().Scan(&micros, &unix, &wall)
		}))
		assert.Equal(t, "2026-10-25 02:30:00", wall)
		assert.Equal(t, utc.UnixMicro(), micros, "gormlock's clock at %v", utc)
		naive = append(naive, unix)
	}
	assert.Equal(t, naive[0], naive[1], "the negative control: UNIX_TIMESTAMP of the wall time reads both instants as one")
}

// lookupCaps returns MariaDB's capabilities.
func lookupCaps(t *testing.T) dialect.Caps {
	t.Helper()
	c, ok := dialect.Lookup(dialect.MariaDB)
	require.True(t, ok)
	return c
}
