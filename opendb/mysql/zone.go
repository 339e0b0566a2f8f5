package mysql

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/gormlock/gormlock/locking"
)

// The session time zone follows the DSN's loc, the zone go-sql-driver/mysql
// writes times in and reads them as: then NOW(), CURRENT_TIMESTAMP
// defaults and TIMESTAMP columns agree with the times the driver sends.
// gormlock's own clock (versions, lease expiry) does not depend on it: it
// reads the server's clock as microseconds since the Unix epoch, whatever
// the session's zone.

// zoneUntil is the last instant sessionZone looks at for a change of a
// zone's offset: past the end of every TIMESTAMP column (2038 on MySQL,
// 2106 on MariaDB).
var zoneUntil = time.Date(2107, 1, 1, 0, 0, 0, 0, time.UTC)

// zoneName matches the IANA time zone names the server's time zone tables
// hold (Europe/Berlin, America/Argentina/Buenos_Aires, Etc/GMT+5): nothing
// that needs quoting in SET time_zone = '...'.
var zoneName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_+\-]*(/[A-Za-z0-9_+\-]+)*$`)

// sessionZone returns the value DSN gives the session variable time_zone
// for loc, quoted: the offset ('+08:00') when loc keeps one offset from now
// on (UTC, Asia/Shanghai, a fixed zone), and otherwise the zone's name
// ('Europe/Berlin'), which the server knows only from its time zone tables.
// loc is time.Local for loc=Local; its name is the one TZ or /etc/localtime
// gives, checked against time.Local's rules.
func sessionZone(loc *time.Location, now time.Time) (string, error) {
	if offset, fixed := fixedOffset(loc, now); fixed {
		return "'" + formatOffset(offset) + "'", nil
	}
	name := loc.String()
	if loc == time.Local {
		name = localZoneName()
		if name == "" {
			return "", locking.Invalid("mysql: DSN sets loc=Local, and the process's time zone changes its offset (daylight saving time), so the server's sessions must follow it by name, but neither TZ nor /etc/localtime names it; set TZ=Area/City, or name the zone in loc (loc=Europe%%2FBerlin)")
		}
		named, err := time.LoadLocation(name)
		if err != nil || !sameRules(named, time.Local, now) {
			return "", locking.Invalid("mysql: DSN sets loc=Local, and the process's time zone is not the %q that TZ or /etc/localtime names; set TZ to its name, or name the zone in loc", name)
		}
	}
	if !zoneName.MatchString(name) {
		return "", locking.Invalid("mysql: DSN's loc=%s is not a time zone name the server can know (Area/City)", name)
	}
	return "'" + name + "'", nil
}

// fixedOffset returns loc's offset at now, in seconds east of UTC, and
// whether loc keeps it until zoneUntil.
func fixedOffset(loc *time.Location, now time.Time) (int, bool) {
	t := now.In(loc)
	_, offset := t.Zone()
	for t.Before(zoneUntil) {
		if _, next := t.Zone(); next != offset {
			return offset, false
		}
		t = nextZone(t, zoneUntil)
	}
	return offset, true
}

// nextZone returns the start of the zone that follows t's in t's location,
// or until when that is later or the zone goes on forever. Past the years
// a zoneinfo file lists, ZoneBounds can answer t itself at the end of a
// year: the day after t is taken then (no zone changes its offset for a
// day only).
func nextZone(t, until time.Time) time.Time {
	_, end := t.ZoneBounds()
	if !end.IsZero() && !end.After(t) {
		end = t.Add(24 * time.Hour)
	}
	if end.IsZero() || end.After(until) {
		return until
	}
	return end
}

// formatOffset writes an offset in seconds east of UTC as MySQL's
// time_zone takes it: +08:00, -03:30.
func formatOffset(seconds int) string {
	sign := '+'
	if seconds < 0 {
		sign, seconds = '-', -seconds
	}
	return fmt.Sprintf("%c%02d:%02d", sign, seconds/3600, seconds%3600/60)
}

// localZoneName returns the name of the process's time zone as Go finds
// it: TZ (without a leading ':', a file under a zoneinfo directory by its
// name there), or the zoneinfo file /etc/localtime links to, or the name in
// /etc/timezone; "" when none names it.
func localZoneName() string {
	fromPath := func(p string) string {
		if i := strings.LastIndex(p, "zoneinfo/"); i >= 0 {
			return p[i+len("zoneinfo/"):]
		}
		return ""
	}
	if tz, ok := os.LookupEnv("TZ"); ok {
		tz = strings.TrimPrefix(tz, ":")
		if filepath.IsAbs(tz) {
			return fromPath(tz)
		}
		return tz
	}
	if target, err := os.Readlink("/etc/localtime"); err == nil {
		if name := fromPath(target); name != "" {
			return name
		}
	}
	if b, err := os.ReadFile("/etc/timezone"); err == nil {
		return strings.TrimSpace(string(b))
	}
	return ""
}

// sameRules reports whether a and b give every instant from a year before
// now until twenty years after it the same offset: they agree at now and
// at every change of either.
func sameRules(a, b *time.Location, now time.Time) bool {
	t, until := now.AddDate(-1, 0, 0), now.AddDate(20, 0, 0)
	for t.Before(until) {
		_, oa := t.In(a).Zone()
		_, ob := t.In(b).Zone()
		if oa != ob {
			return false
		}
		next := nextZone(t.In(a), until)
		if eb := nextZone(t.In(b), until); eb.Before(next) {
			next = eb
		}
		t = next
	}
	return true
}
