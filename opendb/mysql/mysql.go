// Package mysql opens a MySQL or MariaDB database for gormlock through
// gorm.io/driver/mysql and go-sql-driver/mysql (pure Go: it builds with
// CGO_ENABLED=0), with the settings gormlock's guarantees rest on.
//
//	db, err := mysql.Open("app:secret@tcp(127.0.0.1:3306)/app")
//
// Those settings are connection settings that go-sql-driver/mysql and GORM's
// MySQL dialector leave off by default: [DSN] adds them to a DSN, for an
// application that opens the database itself, and [Open] opens a database
// with them and checks that the server applied them.
package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	drivermysql "github.com/go-sql-driver/mysql"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/opener"
	"github.com/gormlock/gormlock/locking"
)

// DatetimePrecision is the fractional-second precision Open gives the
// GORM dialector (gorm.io/driver/mysql's DefaultDatetimePrecision): 6, so
// that GORM's clock (NowFunc) and the DATETIME columns its migrator
// creates keep microseconds. The dialector's own default, 3, rounds every
// time to milliseconds.
const DatetimePrecision = 6

// Collation is the connection collation DSN sets when the DSN
// names none: utf8mb4's collation that MySQL 5.7 and 8 and every MariaDB
// know. It decides how string literals and parameters compare with each
// other; a comparison with a column uses the column's collation.
const Collation = "utf8mb4_general_ci"

// DSN returns dsn, a MySQL or MariaDB data source name, with the
// settings gormlock relies on, in go-sql-driver/mysql's form
// (user:password@tcp(host:port)/dbname?param=value), for sql.Open("mysql",
// ...) or gorm.io/driver/mysql. dsn is in that form too, optionally after
// "mysql://" or "mariadb://" (as golang-migrate writes it), or a URL
// (mysql://user:password@host:3306/dbname?param=value). It is edited with
// the driver's own ParseDSN and FormatDSN; every other setting of dsn is
// kept. The settings:
//
//   - clientFoundRows=true: an UPDATE reports the rows it matched, not only
//     those whose values it changed. Without it, a guarded UPDATE that
//     matches the record but writes the values it already has reports 0
//     rows, which gormlock would take for a stale version. A dsn that sets
//     clientFoundRows=false is refused.
//   - parseTime=true: DATETIME and TIMESTAMP values are read as time.Time,
//     which GORM's models need. A dsn that sets parseTime=false is refused.
//   - loc is kept: the driver writes times in loc and reads DATETIME and
//     TIMESTAMP values as times in loc. Without it they are UTC (loc=UTC);
//     GORM's documentation writes loc=Local, the process's time zone.
//   - charset=utf8mb4, with the dsn's utf8mb4 collation or Collation:
//     every Unicode character, 4-byte ones (emoji) included, reaches the
//     server unchanged; utf8 (utf8mb3) would reject or mangle them. A dsn
//     that sets another charset, or a collation of another charset, is
//     refused.
//   - time_zone, a session variable set on every connection, to loc's
//     zone: NOW(), CURRENT_TIMESTAMP defaults and TIMESTAMP columns agree
//     with the times the driver sends (the server's own default is usually
//     SYSTEM, the host's zone). It is loc's offset ('+00:00' for UTC,
//     '+08:00' for Asia/Shanghai) when loc keeps one offset from now on,
//     and otherwise loc's name ('Europe/Berlin'; for loc=Local the name TZ
//     or /etc/localtime gives), which the server knows only when its time
//     zone tables are loaded (mariadb-tzinfo-to-sql, mysql_tzinfo_to_sql).
//     A dsn that sets time_zone to another value is refused. gormlock's
//     versions and lease expiry do not depend on the session's zone.
//   - sql_mode with STRICT_ALL_TABLES added to the server's modes, unless dsn
//     sets sql_mode itself: a value too long for its column (a record key, a
//     lease owner) is refused with error 1406 instead of being cut short with
//     a warning, which would make two keys one. Open checks that the
//     session ends up in a strict mode.
//
// Open such a DSN with gorm.io/driver/mysql and DefaultDatetimePrecision
// DatetimePrecision, as Open does (gormmysqldriver is gorm.io/driver/mysql):
//
//	precision := mysql.DatetimePrecision
//	db, err := gorm.Open(gormmysqldriver.New(gormmysqldriver.Config{DSN: dsn, DefaultDatetimePrecision: &precision}), &gorm.Config{})
//
// An empty or malformed dsn, and one refused above, give an error matching
// locking.ErrInvalidArgument that names the setting and never repeats the
// password.
func DSN(dsn string) (string, error) {
	cfg, err := settings(dsn)
	if err != nil {
		return "", err
	}
	return cfg.FormatDSN(), nil
}

// settings returns the driver's Config of dsn with the settings DSN adds.
func settings(dsn string) (*drivermysql.Config, error) {
	cfg, explicit, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	if v, ok := explicit["clientFoundRows"]; ok && !cfg.ClientFoundRows {
		return nil, locking.Invalid("mysql: DSN sets clientFoundRows=%s: gormlock needs clientFoundRows=true, or a guarded UPDATE that writes a record's current values reports 0 rows and reads as a stale version; remove the parameter", v)
	}
	if v, ok := explicit["parseTime"]; ok && !cfg.ParseTime {
		return nil, locking.Invalid("mysql: DSN sets parseTime=%s: gormlock needs parseTime=true to read DATETIME columns into time.Time; remove the parameter", v)
	}
	if v, ok := explicit["charset"]; ok && !strings.EqualFold(v, "utf8mb4") {
		return nil, locking.Invalid("mysql: DSN sets charset=%s: gormlock needs utf8mb4, the character set that holds every Unicode character; remove the parameter", v)
	}
	collation := Collation
	if cfg.Collation != "" {
		if !strings.HasPrefix(strings.ToLower(cfg.Collation), "utf8mb4_") {
			return nil, locking.Invalid("mysql: DSN sets collation=%s: gormlock needs a utf8mb4 collation; remove the parameter or name one such as %s", cfg.Collation, Collation)
		}
		collation = cfg.Collation
	}
	zone, err := sessionZone(cfg.Loc, time.Now())
	if err != nil {
		return nil, err
	}
	if v, ok := cfg.Params["time_zone"]; ok && v != zone {
		return nil, locking.Invalid("mysql: DSN sets time_zone=%s: gormlock sets the session's time zone to loc's (loc=%s: time_zone %s), so that NOW() and TIMESTAMP columns agree with the times the driver sends; remove the parameter", v, cfg.Loc, zone)
	}
	cfg.ClientFoundRows = true
	cfg.ParseTime = true
	if err := cfg.Apply(drivermysql.Charset("utf8mb4", collation)); err != nil {
		return nil, locking.Invalid("mysql: DSN: %v", err)
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = zone
	if _, ok := cfg.Params["sql_mode"]; !ok {
		cfg.Params["sql_mode"] = "CONCAT(@@sql_mode, ',STRICT_ALL_TABLES')"
	}
	return cfg, nil
}

// parseDSN parses dsn (see DSN for its forms) with the driver's
// ParseDSN, and returns the parameters it sets explicitly as written, so
// that a refusal can tell "false" from "not given". A dsn ParseDSN refuses,
// or panics on (it does on the parameter "strict", which the driver
// removed), is an error matching locking.ErrInvalidArgument.
func parseDSN(dsn string) (*drivermysql.Config, map[string]string, error) {
	if strings.TrimSpace(dsn) == "" {
		return nil, nil, locking.Invalid("mysql: DSN is empty")
	}
	rest, prefixed := trimMySQLScheme(dsn)
	if prefixed && !isDriverDSN(rest) {
		return parseMySQLURL(dsn)
	}
	explicit := driverDSNParams(rest)
	if _, ok := explicit["strict"]; ok {
		return nil, nil, locking.Invalid("mysql: DSN sets strict, a parameter go-sql-driver/mysql no longer has (it panics on it); remove it: Open turns the server's strict sql_mode on")
	}
	cfg, err := safeParseDSN(rest)
	if err != nil {
		return nil, nil, err
	}
	return cfg, explicit, nil
}

// safeParseDSN is the driver's ParseDSN, with its errors (and any panic)
// turned into errors matching locking.ErrInvalidArgument.
func safeParseDSN(dsn string) (cfg *drivermysql.Config, err error) {
	defer func() {
		if r := recover(); r != nil {
			cfg, err = nil, locking.Invalid("mysql: DSN is not one go-sql-driver/mysql accepts: %v", r)
		}
	}()
	cfg, err = drivermysql.ParseDSN(dsn)
	if err != nil {
		return nil, locking.Invalid("mysql: DSN is not one go-sql-driver/mysql accepts (user:password@tcp(host:port)/dbname?param=value): %v", err)
	}
	return cfg, nil
}

// parseMySQLURL parses a URL form of a MySQL DSN,
// mysql://user:password@host:port/dbname?param=value, into the driver's
// Config: the query holds the driver's parameters.
func parseMySQLURL(dsn string) (*drivermysql.Config, map[string]string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		// url.Parse's error repeats the URL, password included.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return nil, nil, locking.Invalid("mysql: URL is malformed: %v", err)
	}
	if u.Fragment != "" || u.Opaque != "" {
		return nil, nil, locking.Invalid("mysql: URL must be mysql://user:password@host:port/dbname?param=value")
	}
	dbname := strings.TrimPrefix(u.Path, "/")
	if strings.Contains(dbname, "/") {
		return nil, nil, locking.Invalid("mysql: URL's database name %q contains '/'", dbname)
	}
	explicit := map[string]string{}
	for k, vs := range u.Query() {
		if len(vs) > 0 {
			explicit[k] = vs[len(vs)-1]
		}
	}
	if _, ok := explicit["strict"]; ok {
		return nil, nil, locking.Invalid("mysql: DSN sets strict, a parameter go-sql-driver/mysql no longer has (it panics on it); remove it: Open turns the server's strict sql_mode on")
	}
	// The parameters and the database name go through the driver's own
	// parser; the user and the address are set on its Config.
	cfg, err := safeParseDSN("/" + url.PathEscape(dbname) + "?" + u.RawQuery)
	if err != nil {
		return nil, nil, err
	}
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	if u.Host != "" {
		host := u.Host
		if u.Port() == "" {
			host = net.JoinHostPort(u.Hostname(), "3306")
		}
		cfg.Net, cfg.Addr = "tcp", host
	}
	// Round-trip through the driver, so that what depends on the address
	// (the TLS server name) is derived from the URL's host.
	cfg, err = safeParseDSN(cfg.FormatDSN())
	if err != nil {
		return nil, nil, err
	}
	return cfg, explicit, nil
}

// trimMySQLScheme removes a mysql:// or mariadb:// prefix from dsn, and
// reports whether there was one.
func trimMySQLScheme(dsn string) (string, bool) {
	for _, scheme := range []string{"mysql://", "mariadb://"} {
		if len(dsn) >= len(scheme) && strings.EqualFold(dsn[:len(scheme)], scheme) {
			return dsn[len(scheme):], true
		}
	}
	return dsn, false
}

// isDriverDSN reports whether dsn is in go-sql-driver/mysql's form with a
// network and address, [user[:password]@]net(address)/dbname[?params], and
// not a file path or a URL: the part before the database name ends in
// "tcp(...)", "tcp4(...)", "tcp6(...)" or "unix(...)". The driver's other
// forms ("/dbname", "user@/dbname") read as file paths and are not
// recognised; write them with the address, or after mysql://.
func isDriverDSN(dsn string) bool {
	slash := strings.LastIndexByte(dsn, '/')
	if slash < 0 {
		return false
	}
	head := dsn[:slash]
	if at := strings.LastIndexByte(head, '@'); at >= 0 {
		head = head[at+1:]
	}
	open := strings.IndexByte(head, '(')
	if open < 0 || !strings.HasSuffix(head, ")") {
		return false
	}
	return slices.Contains([]string{"tcp", "tcp4", "tcp6", "unix"}, head[:open])
}

// driverDSNParams returns the parameters of a DSN in the driver's form as
// written (values unescaped when they can be): what follows the first '?'
// after the last '/', as ParseDSN reads it.
func driverDSNParams(dsn string) map[string]string {
	out := map[string]string{}
	slash := strings.LastIndexByte(dsn, '/')
	if slash < 0 {
		return out
	}
	_, query, ok := strings.Cut(dsn[slash+1:], "?")
	if !ok {
		return out
	}
	for _, kv := range strings.Split(query, "&") {
		k, v, found := strings.Cut(kv, "=")
		if !found {
			continue
		}
		if u, err := url.QueryUnescape(v); err == nil {
			v = u
		}
		out[k] = v
	}
	return out
}

// Open opens a MySQL or MariaDB database through gorm.io/driver/mysql (and
// go-sql-driver/mysql, in Go: it builds with CGO_ENABLED=0), with the
// settings DSN adds to dsn and the dialector's DefaultDatetimePrecision
// set to DatetimePrecision. opts are passed to gorm.Open; without any,
// GORM's logger is silenced.
//
// It connects once, to check the server is reachable and that the session
// runs in utf8mb4, in a strict sql_mode and in loc's time zone; a dsn whose
// own sql_mode is not strict gives an error matching
// locking.ErrInvalidArgument, a server that does not know loc's zone by
// name (its time zone tables are not loaded) or converts times otherwise
// than Go does in loc one matching locking.ErrNotSupported, and the pool
// is closed.
func Open(dsn string, opts ...gorm.Option) (*gorm.DB, error) {
	cfg, err := settings(dsn)
	if err != nil {
		return nil, err
	}
	zone := cfg.Params["time_zone"]
	precision := DatetimePrecision
	db, err := gorm.Open(gormmysql.New(gormmysql.Config{DSN: cfg.FormatDSN(), DefaultDatetimePrecision: &precision}), opener.Defaults(opts)...)
	if err != nil {
		return nil, fmt.Errorf("mysql: open: %w", unknownZone(err, zone))
	}
	if err := checkMySQLSettings(db, cfg.Loc, zone); err != nil {
		_ = opener.Close(db)
		return nil, fmt.Errorf("mysql: open: %w", unknownZone(err, zone))
	}
	return db, nil
}

// errUnknownTimeZone is the server's error for a time zone it does not
// know: ER_UNKNOWN_TIME_ZONE.
const errUnknownTimeZone = 1298

// unknownZone returns err, and when it is the server's refusal of zone an
// error matching locking.ErrNotSupported that says how to load the
// server's time zone tables, wrapping err.
func unknownZone(err error, zone string) error {
	var merr *drivermysql.MySQLError
	if !errors.As(err, &merr) || merr.Number != errUnknownTimeZone {
		return err
	}
	return fmt.Errorf("%w: the server does not know the time zone %s, loc's (the zone changes its offset, so the session follows it by name); load the server's time zone tables (mariadb-tzinfo-to-sql /usr/share/zoneinfo | mariadb -u root mysql, or MySQL's mysql_tzinfo_to_sql), or use loc=UTC: %w",
		locking.ErrNotSupported, zone, err)
}

// checkMySQLSettings reads back, on one connection of db, the session
// settings DSN asks for, and checks that the server converts times to the
// session's zone (zone, quoted) as Go does to loc, now and over the coming
// year: a server's time zone tables can be older than Go's.
func checkMySQLSettings(db *gorm.DB, loc *time.Location, zone string) error {
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	ctx := context.Background()
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var session, mode, charset string
	if err := conn.QueryRowContext(ctx, `SELECT @@session.time_zone, @@session.sql_mode, @@session.character_set_connection`).
		Scan(&session, &mode, &charset); err != nil {
		return fmt.Errorf("reading the session's settings: %w", err)
	}
	strict := false
	for _, m := range strings.Split(mode, ",") {
		if m == "STRICT_ALL_TABLES" || m == "STRICT_TRANS_TABLES" {
			strict = true
		}
	}
	if !strict {
		return locking.Invalid("the DSN's sql_mode leaves the session without a strict mode (sql_mode=%q): values too long for their column would be cut short instead of refused; add STRICT_ALL_TABLES to it, or remove sql_mode from the DSN", mode)
	}
	if want := strings.Trim(zone, "'"); session != want || charset != "utf8mb4" {
		return fmt.Errorf("%w: the server did not apply the DSN's settings (time_zone=%s character_set_connection=%s; want %s, utf8mb4)",
			locking.ErrNotSupported, session, charset, want)
	}
	return checkZoneAgrees(ctx, conn, loc)
}

// checkZoneAgrees compares, at four instants a season apart from now, the
// server's conversion of a UTC time to the session's zone with Go's to
// loc.
func checkZoneAgrees(ctx context.Context, conn *sql.Conn, loc *time.Location) error {
	const layout = "2006-01-02 15:04:05"
	now := time.Now().UTC().Truncate(time.Second)
	instants := make([]any, 4)
	for i := range instants {
		instants[i] = now.AddDate(0, 3*i, 0).Format(layout)
	}
	got := make([]string, len(instants))
	dest := make([]any, len(got))
	for i := range got {
		dest[i] = &got[i]
	}
	conv := "CAST(CONVERT_TZ(?, '+00:00', @@session.time_zone) AS CHAR)"
	if err := conn.QueryRowContext(ctx, "SELECT "+strings.Repeat(conv+", ", len(instants)-1)+conv, instants...).Scan(dest...); err != nil {
		return fmt.Errorf("converting times to the session's time zone: %w", err)
	}
	for i, utc := range instants {
		t, _ := time.Parse(layout, utc.(string))
		if want := t.In(loc).Format(layout); got[i] != want {
			return fmt.Errorf("%w: the server's time zone tables disagree with Go's for loc=%s: %s UTC is %s there, %s in Go; update the server's time zone tables",
				locking.ErrNotSupported, loc, utc, got[i], want)
		}
	}
	return nil
}
