package opendb_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
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
	"github.com/gormlock/gormlock/migrations"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/repository"
)

// gormDSNParams are the parameters GORM's documentation puts in every MySQL
// DSN.
const gormDSNParams = "charset=utf8mb4&parseTime=True&loc=Local"

// The session time zone DSN gives each loc: the offset while the zone keeps
// one, the name when it changes it.
func TestMySQLDSNSessionZoneFollowsLoc(t *testing.T) {
	const base = "root@tcp(127.0.0.1:3306)/test?"
	for _, tt := range []struct{ name, params, zone, loc string }{
		{"no loc", "parseTime=true", "'+00:00'", "UTC"},
		{"UTC", "loc=UTC", "'+00:00'", "UTC"},
		{"a zone without daylight saving time", "loc=Asia%2FShanghai", "'+08:00'", "Asia/Shanghai"},
		{"half an hour", "loc=Asia%2FKolkata", "'+05:30'", "Asia/Kolkata"},
		{"west of UTC", "loc=Etc%2FGMT%2B5", "'-05:00'", "Etc/GMT+5"},
		{"daylight saving time", "loc=Europe%2FBerlin", "'Europe/Berlin'", "Europe/Berlin"},
		{"the southern hemisphere", "loc=America%2FSantiago", "'America/Santiago'", "America/Santiago"},
		{"time_zone as it would be set", "loc=Asia%2FShanghai&time_zone=%27%2B08%3A00%27", "'+08:00'", "Asia/Shanghai"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := mysqlopen.DSN(base + tt.params)
			require.NoError(t, err)
			cfg, err := drivermysql.ParseDSN(got)
			require.NoError(t, err)
			assert.Equal(t, tt.zone, cfg.Params["time_zone"])
			assert.Equal(t, tt.loc, cfg.Loc.String(), "loc is kept")
			again, err := mysqlopen.DSN(got)
			require.NoError(t, err)
			assert.Equal(t, got, again)
		})
	}

	// A time_zone that disagrees with loc is refused, naming both.
	_, err := mysqlopen.DSN(base + "loc=Asia%2FShanghai&time_zone=%27%2B00%3A00%27")
	require.ErrorIs(t, err, locking.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "time_zone='+00:00'")
	assert.Contains(t, err.Error(), "loc=Asia/Shanghai: time_zone '+08:00'")
}

// zoneChildEnv marks a test process that inZone started.
const zoneChildEnv = "GORMLOCK_TEST_ZONE_CHILD"

// inZone reports whether the test runs in a process whose time zone is tz.
// Where it does not, it runs the test again in a child process with TZ=tz
// (and env), where Go's time.Local is tz from the start, and fails when
// the child fails or does not run the test.
func inZone(t *testing.T, tz string, env ...string) bool {
	t.Helper()
	if os.Getenv(zoneChildEnv) == tz {
		return true
	}
	testdb.MariaDBDSN(t) // skip (fail under CI) here when no server is configured
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(append(os.Environ(), "TZ="+tz, zoneChildEnv+"="+tz), env...)
	out, err := cmd.CombinedOutput()
	if err == nil && strings.Contains(string(out), "--- SKIP: "+t.Name()) {
		t.Skipf("skipped with TZ=%s:\n%s", tz, out)
	}
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("%s with TZ=%s: %v\n%s", t.Name(), tz, err, out)
	}
	t.Logf("%s passed with TZ=%s", t.Name(), tz)
	return false
}

// zoned is a record with the times an application stores: GORM's own
// (CreatedAt, UpdatedAt), a DATETIME it sets and a TIMESTAMP column.
type zoned struct {
	models.Model
	At    time.Time  `gorm:"column:at;type:datetime(6);not null"`
	Stamp *time.Time `gorm:"column:stamp;type:timestamp(6) NULL"`
	Note  string     `gorm:"column:note;not null"`
}

func (zoned) TableName() string { return "zoned" }

// checkZoneGuarantees checks what gormlock promises whatever the session's
// time zone and the DSN's loc, on db (a fresh database): times round-trip
// to the microsecond, versions are the database clock in UTC microseconds,
// and a lease expires its TTL after it was granted.
func checkZoneGuarantees(t *testing.T, db *gorm.DB) {
	ctx := testdb.Ctx(t)
	require.NoError(t, migrations.Up(ctx, db))
	require.NoError(t, db.AutoMigrate(&zoned{}))
	repo, err := repository.New[zoned](db, repository.WithLeaseTTL(2*time.Second, 10*time.Second))
	require.NoError(t, err)

	// Times round-trip: the same instant, in the DSN's loc.
	at := time.Date(2026, 3, 29, 1, 30, 0, 123456000, time.UTC) // just after Europe's clocks jump
	stamp := stampAt
	rec := &zoned{At: at.In(time.FixedZone("UTC-7", -7*3600)), Stamp: &stamp, Note: "first"}
	before := time.Now()
	require.NoError(t, repo.Create(ctx, rec))
	got, err := repo.Get(ctx, rec.ID)
	require.NoError(t, err)
	assert.True(t, at.Equal(got.At), "DATETIME: wrote %v, read %v", at, got.At)
	require.NotNil(t, got.Stamp)
	assert.True(t, stamp.Equal(*got.Stamp), "TIMESTAMP: wrote %v, read %v", stamp, *got.Stamp)
	assert.True(t, rec.CreatedAt.Equal(got.CreatedAt), "CreatedAt: wrote %v, read %v", rec.CreatedAt, got.CreatedAt)
	assert.WithinDuration(t, before, got.CreatedAt, nearNow)

	// Versions are the database clock in microseconds since the epoch, in
	// UTC, whatever the zones.
	assert.InDelta(t, before.UnixMicro(), got.Version, float64(nearNow.Microseconds()), "Create's version")
	got.Note = "second"
	before = time.Now()
	require.NoError(t, repo.Update(ctx, got))
	assert.InDelta(t, before.UnixMicro(), got.Version, float64(nearNow.Microseconds()), "Update's version")

	// A lease expires its TTL after its grant, by a clock that agrees with
	// the process's.
	before = time.Now()
	_, lease, err := repo.Leases().Acquire(ctx, rec.ID, "first", repository.TTL(2*time.Second))
	require.NoError(t, err)
	assert.Equal(t, 2*time.Second, lease.ExpiresAt.Sub(lease.AcquiredAt))
	assert.WithinDuration(t, before, lease.AcquiredAt, nearNow)
	_, _, err = repo.Leases().Acquire(ctx, rec.ID, "second")
	if time.Now().Before(lease.ExpiresAt.Add(-500 * time.Millisecond)) { // not when the machine stalled past the expiry
		require.ErrorIs(t, err, locking.ErrLeased, "a lease is held until it expires")
	}
	time.Sleep(time.Until(lease.ExpiresAt) + 100*time.Millisecond)
	_, next, err := repo.Leases().Acquire(ctx, rec.ID, "second")
	require.NoError(t, err, "a lease has expired once its TTL has passed")
	assert.Greater(t, next.Fence, lease.Fence)
}

// stampAt is the TIMESTAMP checkZoneGuarantees stores.
var stampAt = time.Date(2026, 7, 4, 12, 0, 0, 654321000, time.UTC)

// sessionNow reads the session's NOW(6) through the driver, as a time in
// the DSN's loc.
func sessionNow(t *testing.T, db *gorm.DB) time.Time {
	t.Helper()
	var now time.Time
	require.NoError(t, db.Raw(`SELECT NOW(6)`).Row().Scan(&now))
	return now
}

// storedInstant reads back, as the server holds it, the instant of the
// TIMESTAMP column of the one zoned record.
func storedInstant(t *testing.T, db *gorm.DB) time.Time {
	t.Helper()
	var micros int64
	require.NoError(t, db.Raw(`SELECT CAST(UNIX_TIMESTAMP(stamp) * 1000000 AS SIGNED) FROM zoned`).Row().Scan(&micros))
	return time.UnixMicro(micros)
}

// GORM's documented DSN with the process in UTC+8 and the server in UTC,
// through mysql.Open: the session follows loc, so the server's clock and
// the TIMESTAMP it stores agree with the times the driver sends.
func TestMySQLLocLocalThroughOpen(t *testing.T) {
	if !inZone(t, "Asia/Shanghai") {
		return
	}
	_, offset := time.Now().Zone()
	require.Equal(t, 8*3600, offset, "the process runs in UTC+8")
	db, err := mysqlopen.Open(testdb.MariaDBDatabase(t) + "&" + gormDSNParams)
	require.NoError(t, err)
	t.Cleanup(func() { _ = fixtures.Close(db) })
	var zone string
	require.NoError(t, db.Raw(`SELECT @@session.time_zone`).Row().Scan(&zone))
	assert.Equal(t, "+08:00", zone)

	checkZoneGuarantees(t, db)
	assert.WithinDuration(t, time.Now(), sessionNow(t, db), nearNow, "NOW() agrees with the process's clock")
	assert.Equal(t, stampAt, storedInstant(t, db).UTC(), "the server holds the instant the driver sent")
}

// The same DSN through gorm.io/driver/mysql directly: the session stays in
// the server's zone (UTC), hours from the process's, and gormlock's times,
// versions and leases are right all the same. The negative control: the
// session's NOW() and the TIMESTAMP it stores are 8 hours off, the error a
// clock read through the session's zone would make.
func TestMySQLLocLocalThroughGormDriver(t *testing.T) {
	if !inZone(t, "Asia/Shanghai") {
		return
	}
	dsn := testdb.MariaDBDatabase(t) + "&" + gormDSNParams
	db, err := gorm.Open(mysql.Open(dsn), &gorm.Config{Logger: logger.Discard})
	require.NoError(t, err)
	t.Cleanup(func() { _ = fixtures.Close(db) })
	var zone string
	require.NoError(t, db.Raw(`SELECT @@session.time_zone`).Row().Scan(&zone))
	require.Equal(t, "SYSTEM", zone, "the server's own session zone")
	var system string
	require.NoError(t, db.Raw(`SELECT @@system_time_zone`).Row().Scan(&system))
	require.Equal(t, "UTC", system, "the test needs a server running in UTC")

	checkZoneGuarantees(t, db)
	assert.InDelta(t, -8*time.Hour, time.Until(sessionNow(t, db)), float64(nearNow), "the session's NOW() read in loc is 8 hours early")
	assert.Equal(t, 8*time.Hour, storedInstant(t, db).Sub(stampAt), "the server holds an instant 8 hours late")

	// The application moves to mysql.Open with the same DSN: its DATETIME
	// values keep their meaning; the TIMESTAMP the UTC session stored 8
	// hours late reads 8 hours late, until converted once from the old
	// session's zone (as docs/deploying.md says).
	var before zoned
	require.NoError(t, db.First(&before).Error)
	adopted, err := mysqlopen.Open(dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = fixtures.Close(adopted) })
	var after zoned
	require.NoError(t, adopted.First(&after).Error)
	assert.True(t, before.At.Equal(after.At), "DATETIME: %v before, %v after", before.At, after.At)
	assert.True(t, before.CreatedAt.Equal(after.CreatedAt), "CreatedAt: %v before, %v after", before.CreatedAt, after.CreatedAt)
	assert.Equal(t, 8*time.Hour, after.Stamp.Sub(stampAt), "TIMESTAMP: stored 8 hours late")
	require.NoError(t, adopted.Exec(`UPDATE zoned SET stamp = CONVERT_TZ(stamp, '+08:00', '+00:00')`).Error)
	require.NoError(t, adopted.First(&after).Error)
	assert.True(t, stampAt.Equal(*after.Stamp), "TIMESTAMP converted: %v", *after.Stamp)
	assert.Equal(t, stampAt, storedInstant(t, adopted).UTC())
}

// A zone with daylight saving time, with the process, loc and the server
// each in a zone of its own: the session follows loc by name.
func TestMySQLLocWithDaylightSavingTime(t *testing.T) {
	if !inZone(t, "America/New_York") {
		return
	}
	zoneTables(t, testdb.MariaDB(t))
	for _, tt := range []struct{ name, params, zone string }{
		{"loc=Local", gormDSNParams, "America/New_York"},
		{"a named loc", "loc=Europe%2FBerlin", "Europe/Berlin"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			db, err := mysqlopen.Open(testdb.MariaDBDatabase(t) + "&" + tt.params)
			require.NoError(t, err)
			t.Cleanup(func() { _ = fixtures.Close(db) })
			var zone string
			require.NoError(t, db.Raw(`SELECT @@session.time_zone`).Row().Scan(&zone))
			assert.Equal(t, tt.zone, zone)
			checkZoneGuarantees(t, db)
			assert.WithinDuration(t, time.Now(), sessionNow(t, db), nearNow)
			assert.Equal(t, stampAt, storedInstant(t, db).UTC())
		})
	}

	// What no session zone helps: a DATETIME holds a wall time, and the
	// hour the clocks go back has each wall time twice. New York's went
	// back from 02:00 to 01:00 on 2026-11-01: 05:30 and 06:30 UTC are both
	// 01:30 there, and read back as one instant.
	db, err := mysqlopen.Open(testdb.MariaDBDatabase(t) + "&" + gormDSNParams)
	require.NoError(t, err)
	t.Cleanup(func() { _ = fixtures.Close(db) })
	require.NoError(t, db.Exec(`CREATE TABLE walls (id INT PRIMARY KEY, at DATETIME(6) NOT NULL)`).Error)
	first, second := time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC), time.Date(2026, 11, 1, 6, 30, 0, 0, time.UTC)
	require.NoError(t, db.Exec(`INSERT INTO walls VALUES (1, ?), (2, ?)`, first, second).Error)
	var read []time.Time
	require.NoError(t, db.Raw(`SELECT at FROM walls ORDER BY id`).Scan(&read).Error)
	require.Len(t, read, 2)
	assert.True(t, read[0].Equal(read[1]), "both read as %v", read[0])
}

// A zone the server does not know by name is refused with what to do, and
// so is a server whose rules for the zone are not Go's. Go finds the
// zones under ZONEINFO: "Gormlock/Berlin" is Europe/Berlin's rules under a
// name no server knows, "Gormlock/Moved" Europe/Berlin's rules under the
// name America/New_York (which the server knows with other rules).
func TestMySQLLocRefusedByTheServer(t *testing.T) {
	dir := t.TempDir()
	if os.Getenv(zoneChildEnv) != "" {
		dir = os.Getenv("ZONEINFO")
	} else {
		berlin, err := os.ReadFile("/usr/share/zoneinfo/Europe/Berlin")
		if err != nil {
			t.Skipf("no zoneinfo file to copy: %v", err)
		}
		for _, name := range []string{"Gormlock/Berlin", "America/New_York"} {
			require.NoError(t, os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), berlin, 0o644))
		}
	}
	if !inZone(t, "UTC", "ZONEINFO="+dir) {
		return
	}
	dsn := testdb.MariaDBDatabase(t)

	_, err := mysqlopen.Open(dsn + "&loc=Gormlock%2FBerlin")
	require.ErrorIs(t, err, locking.ErrNotSupported)
	assert.Contains(t, err.Error(), "does not know the time zone 'Gormlock/Berlin'")
	assert.Contains(t, err.Error(), "time zone tables")
	var merr *drivermysql.MySQLError
	require.ErrorAs(t, err, &merr, "the server's error is kept")
	assert.EqualValues(t, 1298, merr.Number)

	check, err := mysqlopen.Open(dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = fixtures.Close(check) })
	zoneTables(t, check)
	_, err = mysqlopen.Open(dsn + "&loc=America%2FNew_York")
	require.ErrorIs(t, err, locking.ErrNotSupported)
	assert.Contains(t, err.Error(), "time zone tables disagree with Go's")
}
