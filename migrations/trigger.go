package migrations

import (
	"context"
	"fmt"
	"hash/fnv"
	"reflect"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"gorm.io/gorm"
	"gorm.io/gorm/schema"

	caps "github.com/gormlock/gormlock/internal/dialect"
	"github.com/gormlock/gormlock/locking"
)

// mysqlClockMicros is the clock a MySQL or MariaDB trigger gives versions
// from, in microseconds, whatever the writer's session time zone.
const mysqlClockMicros = caps.MySQLClockMicros

// triggerPrefix starts the name of every version trigger of UPDATEs (and,
// on PostgreSQL, of the function both triggers call), the table's name
// follows.
const triggerPrefix = "gormlock_version_"

// insertTriggerPrefix starts the name of every version trigger of INSERTs.
const insertTriggerPrefix = "gormlock_first_version_"

// deleteTriggerPrefix starts the name of every SQLite trigger that notes
// the versions of deleted rows in versionFloorsTable.
const deleteTriggerPrefix = "gormlock_deleted_version_"

// versionFloorsTable is SQLite's table of the largest version a deleted
// row of each table had, one row per table, in the table's schema.
const versionFloorsTable = "gormlock_version_floors"

// clockVersionFloor is the least version a trigger takes for a clock
// reading, 10^15 µs after the Unix epoch (2001-09-09): every version
// gormlock gives is above it, and a version below it is a column's
// default, a counter's, or none, which an INSERT replaces.
const clockVersionFloor = "1000000000000000"

// maxTriggerName is PostgreSQL's limit on a name, in bytes (MySQL's is 64
// characters).
const maxTriggerName = 63

// triggerFlavor is what VersionTrigger writes for one database.
type triggerFlavor struct {
	quote byte // the identifier quote
	// maxBytes and maxRunes bound an identifier's length where the
	// database would cut a longer one, or refuse it; 0 for no bound.
	maxBytes, maxRunes int
	// orReplace: CREATE OR REPLACE TRIGGER replaces a trigger of the same
	// name in one statement; without it a DROP TRIGGER IF EXISTS comes
	// first.
	orReplace bool
	// keys: the trigger finds its row by the key columns (SQLite).
	keys bool
}

// triggerFlavors maps the dialect names VersionTrigger takes to what it
// writes for them.
var triggerFlavors = map[string]triggerFlavor{
	"postgres": {quote: '"', maxBytes: 63, orReplace: true},
	"mysql":    {quote: '`', maxRunes: 64},
	"mariadb":  {quote: '`', maxRunes: 64, orReplace: true},
	"galera":   {quote: '`', maxRunes: 64, orReplace: true},
	"sqlite":   {quote: '"', keys: true},
}

// VersionTrigger returns the SQL of the version triggers of table, for
// writers that do not write the version themselves: raw SQL, other
// services, tools.
//
// The UPDATE trigger advances the version column on every UPDATE that
// leaves it unchanged, to max(previous + 1, the database's clock in
// microseconds), as gormlock's own writes do; a guarded writer holding a
// copy read before that UPDATE then gets locking.ErrStaleData instead of
// silently overwriting its change. An UPDATE that changes the version
// itself (every write of gormlock's, and of gormlock's GORM plugin) keeps
// the value it set. It fires for every row an UPDATE matches, also when the
// UPDATE changes nothing else.
//
// The INSERT trigger gives a row inserted without a version of its own a
// first version never used before: the database's clock in microseconds,
// in place of a NULL or of any version below 10^15, which no clock reading
// is: the column's default, 0, a counter's 1. A record created again after
// a delete, by an INSERT that leaves the version to its default, so never
// starts at a version a copy of the deleted record holds. An INSERT that
// writes a clock reading of its own (gormlock's Create and its GORM
// plugin's, a copy of a row with its version) keeps it; on SQLite, only
// when it is above the versions of the rows the table's DELETEs removed.
//
// dialect is gorm's Dialector.Name ("postgres", "mysql", "sqlite"), or
// "mariadb" (also "galera"), whose CREATE OR REPLACE TRIGGER replaces a
// trigger in one statement where MySQL's script drops it first. table is the
// table's name, optionally qualified by its schema ("app.tokens", split at the
// dot as GORM does); versionColumn is the version's column; keyColumns are
// the primary key's columns, which SQLite's triggers need to find the row
// they write (they are checked, and unused, elsewhere).
//
// The Script's Version is 0, as it is none of gormlock's numbered
// migrations (number it in your own sequence), its Name
// "version-trigger-" and the table. Up creates the triggers, replacing
// those of the same names, and Down drops them when they are there;
// UpStatements and DownStatements give their statements for db.Exec one at
// a time. The UPDATE trigger (on PostgreSQL also the function both call)
// is named "gormlock_version_" and the table's name, the INSERT trigger
// "gormlock_first_version_" and the table's name, in the table's schema; a
// name longer than 63 bytes (PostgreSQL's limit) is cut to 54 and ends in
// "_" and 8 hex digits of a hash of the table's name. Per dialect:
//
//   - PostgreSQL (14 or later): a PL/pgSQL function that, on UPDATE, sets
//     NEW.version to GREATEST(COALESCE(OLD.version, 0) + 1,
//     clock_timestamp() in µs), and on INSERT to clock_timestamp() in µs;
//     a BEFORE UPDATE FOR EACH ROW trigger that calls it WHEN NEW.version
//     IS NOT DISTINCT FROM OLD.version, and a BEFORE INSERT one WHEN
//     NEW.version IS NULL OR NEW.version < 10^15. The body is
//     dollar-quoted.
//   - MySQL and MariaDB: a BEFORE UPDATE FOR EACH ROW trigger of one SET
//     statement: NEW.version = IF(NEW.version <=> OLD.version,
//     GREATEST(COALESCE(OLD.version, 0) + 1, SYSDATE(6) in µs), NEW.version),
//     and a BEFORE INSERT one: NEW.version = IF(NEW.version IS NULL OR
//     NEW.version < 10^15, SYSDATE(6) in µs, NEW.version). They hold no
//     semicolon, so any client sends them whole, without DELIMITER.
//   - SQLite: its BEFORE triggers cannot change NEW, so an AFTER UPDATE FOR
//     EACH ROW trigger WHEN NEW.version IS OLD.version sets the version of
//     the row with NEW's key to MAX(COALESCE(OLD.version, 0) + 1, the clock
//     in µs). SQLite's clock has milliseconds only, so a key deleted and
//     inserted again within one could start where its earlier row was: an
//     AFTER DELETE FOR EACH ROW trigger notes the largest version a
//     deleted row of the table had, in the table gormlock_version_floors
//     (one row per table, created by Up if missing, left by Down), and an
//     AFTER INSERT one, WHEN NEW.version IS NULL OR NEW.version < 10^15 OR
//     NEW.version is not above that floor, sets the new row's version to
//     MAX(the clock in µs, the floor + 1). The UPDATE trigger's own UPDATE
//     changes the version, so its WHEN clause keeps it from firing again
//     with PRAGMA recursive_triggers on; the + 1 keeps versions growing
//     within one millisecond.
func VersionTrigger(dialect, table, versionColumn string, keyColumns ...string) (Script, error) {
	return versionTrigger(dialect, table, versionColumn, keyColumns, nil)
}

// unversionedColumns are the columns of a model whose fields are tagged
// gormlock:"unversioned" (see repository.UnversionedTag), and the columns
// that count as a change of the record (all others but the version and the
// update time).
type unversionedColumns struct {
	unversioned, versioned []string
}

// keepVersion returns the condition, in the flavor's SQL, under which an
// UPDATE changed only unversioned columns: one of them differs between OLD
// and NEW, and no versioned column does. "" when there are none.
func (u *unversionedColumns) keepVersion(dialect string, q func(string) string) string {
	if u == nil || len(u.unversioned) == 0 {
		return ""
	}
	same := func(c string) string {
		switch dialect {
		case "postgres":
			return "NEW." + q(c) + " IS NOT DISTINCT FROM OLD." + q(c)
		case "sqlite":
			return "NEW." + q(c) + " IS OLD." + q(c)
		}
		return "NEW." + q(c) + " <=> OLD." + q(c)
	}
	changed := make([]string, len(u.unversioned))
	for i, c := range u.unversioned {
		changed[i] = "NOT (" + same(c) + ")"
	}
	cond := "(" + strings.Join(changed, " OR ") + ")"
	for _, c := range u.versioned {
		cond += " AND " + same(c)
	}
	return "(" + cond + ")"
}

// versionTrigger is VersionTrigger; with u, an UPDATE that changes only the
// model's unversioned columns leaves the version alone.
func versionTrigger(dialect, table, versionColumn string, keyColumns []string, u *unversionedColumns) (Script, error) {
	fl, ok := triggerFlavors[dialect]
	if !ok {
		return Script{}, fmt.Errorf("migrations: version trigger: %w: no trigger for dialect %q", locking.ErrNotSupported, dialect)
	}
	schemaName, tableName, err := fl.splitTable(table)
	if err != nil {
		return Script{}, err
	}
	if err := fl.checkColumn("version column", versionColumn); err != nil {
		return Script{}, err
	}
	for _, k := range keyColumns {
		if err := fl.checkColumn("key column", k); err != nil {
			return Script{}, err
		}
		if k == versionColumn {
			return Script{}, locking.Invalid("migrations: version trigger: the version column %q cannot be a key column", k)
		}
	}
	if fl.keys && len(keyColumns) == 0 {
		return Script{}, locking.Invalid("migrations: version trigger: %s needs the key columns of %q, to find the row its trigger writes", dialect, table)
	}
	name, insName := triggerName(triggerPrefix, tableName), triggerName(insertTriggerPrefix, tableName)
	q := fl.ident
	qualified := func(n string) string { // in the table's schema
		if schemaName == "" {
			return q(n)
		}
		return q(schemaName) + "." + q(n)
	}
	qtable, qtrigger, qinsert, v := qualified(tableName), qualified(name), qualified(insName), q(versionColumn)
	keep := u.keepVersion(dialect, q)
	unless := "" // the UPDATE condition's exception for unversioned columns
	if keep != "" {
		unless = " AND NOT " + keep
	}
	qdelete := qualified(triggerName(deleteTriggerPrefix, tableName))
	head := "-- gormlock: an UPDATE of " + table + " that leaves " + versionColumn + " unchanged advances it,\n" +
		"-- and an INSERT that leaves it to its default gives it a first version.\n"
	stale := "NEW." + v + " IS NULL OR NEW." + v + " < " + clockVersionFloor

	var up, down string
	switch dialect {
	case "postgres":
		clock := "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT"
		body := "\nBEGIN\n" +
			"\tIF TG_OP = 'INSERT' THEN\n" +
			"\t\tIF " + stale + " THEN\n" +
			"\t\t\tNEW." + v + " := " + clock + ";\n" +
			"\t\tEND IF;\n" +
			"\tELSIF NEW." + v + " IS NOT DISTINCT FROM OLD." + v + " THEN\n" +
			"\t\tNEW." + v + " := GREATEST(COALESCE(OLD." + v + ", 0) + 1, " + clock + ");\n" +
			"\tEND IF;\n" +
			"\tRETURN NEW;\n" +
			"END\n"
		tag := "$gormlock$"
		for i := 1; strings.Contains(body, tag); i++ {
			tag = fmt.Sprintf("$gormlock%d$", i)
		}
		up = head +
			"CREATE OR REPLACE FUNCTION " + qtrigger + "() RETURNS trigger LANGUAGE plpgsql AS " + tag + body + tag + ";\n" +
			"CREATE OR REPLACE TRIGGER " + q(name) + " BEFORE UPDATE ON " + qtable + " FOR EACH ROW\n" +
			"\tWHEN (NEW." + v + " IS NOT DISTINCT FROM OLD." + v + unless + ")\n" +
			"\tEXECUTE FUNCTION " + qtrigger + "();\n" +
			"CREATE OR REPLACE TRIGGER " + q(insName) + " BEFORE INSERT ON " + qtable + " FOR EACH ROW\n" +
			"\tWHEN (" + stale + ")\n" +
			"\tEXECUTE FUNCTION " + qtrigger + "();\n"
		down = "DROP TRIGGER IF EXISTS " + q(insName) + " ON " + qtable + ";\n" +
			"DROP TRIGGER IF EXISTS " + q(name) + " ON " + qtable + ";\n" +
			"DROP FUNCTION IF EXISTS " + qtrigger + "();\n"
	case "sqlite":
		conds := make([]string, len(keyColumns))
		for i, k := range keyColumns {
			conds[i] = q(k) + " = NEW." + q(k)
		}
		// Qualified names are not allowed in a trigger's body, nor after
		// ON: both name tables of the trigger's own schema.
		//
		// SQLite's clock has milliseconds only: a key deleted and inserted
		// again within one would get the version its earlier row was
		// given. So a DELETE notes the version of the row it removes in
		// the floors table, and an INSERT's first version is above it.
		floors := q(versionFloorsTable)
		lit := "'" + strings.ReplaceAll(tableName, "'", "''") + "'"
		floor := "(SELECT " + q("version") + " FROM " + floors + " WHERE " + q("tbl") + " = " + lit + ")"
		up = head +
			"CREATE TABLE IF NOT EXISTS " + qualified(versionFloorsTable) + " (" + q("tbl") + " TEXT PRIMARY KEY, " + q("version") + " INTEGER NOT NULL);\n" +
			"DROP TRIGGER IF EXISTS " + qtrigger + ";\n" +
			"CREATE TRIGGER " + qtrigger + " AFTER UPDATE ON " + q(tableName) + " FOR EACH ROW\n" +
			"\tWHEN NEW." + v + " IS OLD." + v + unless + "\n" +
			"BEGIN\n" +
			"\tUPDATE " + q(tableName) + " SET " + v + " = MAX(COALESCE(OLD." + v + ", 0) + 1, CAST(ROUND((julianday('now') - 2440587.5) * 86400000) AS INTEGER) * 1000)\n" +
			"\t\tWHERE " + strings.Join(conds, " AND ") + ";\n" +
			"END;\n" +
			"DROP TRIGGER IF EXISTS " + qinsert + ";\n" +
			"CREATE TRIGGER " + qinsert + " AFTER INSERT ON " + q(tableName) + " FOR EACH ROW\n" +
			"\tWHEN " + stale + " OR NEW." + v + " <= " + floor + "\n" +
			"BEGIN\n" +
			"\tUPDATE " + q(tableName) + " SET " + v + " = MAX((CAST(strftime('%s', 'now') AS INTEGER) * 1000 + CAST(substr(strftime('%f', 'now'), 4) AS INTEGER)) * 1000,\n" +
			"\t\t\tCOALESCE(" + floor + ", 0) + 1)\n" +
			"\t\tWHERE " + strings.Join(conds, " AND ") + ";\n" +
			"END;\n" +
			"DROP TRIGGER IF EXISTS " + qdelete + ";\n" +
			"CREATE TRIGGER " + qdelete + " AFTER DELETE ON " + q(tableName) + " FOR EACH ROW\n" +
			"BEGIN\n" +
			"\tINSERT OR IGNORE INTO " + floors + " (" + q("tbl") + ", " + q("version") + ") VALUES (" + lit + ", 0);\n" +
			"\tUPDATE " + floors + " SET " + q("version") + " = MAX(" + q("version") + ", COALESCE(OLD." + v + ", 0)) WHERE " + q("tbl") + " = " + lit + ";\n" +
			"END;\n"
		down = "DROP TRIGGER IF EXISTS " + qdelete + ";\n" +
			"DROP TRIGGER IF EXISTS " + qinsert + ";\n" +
			"DROP TRIGGER IF EXISTS " + qtrigger + ";\n"
	default: // MySQL, MariaDB
		create, dropFirst := "CREATE TRIGGER ", ""
		if fl.orReplace {
			create = "CREATE OR REPLACE TRIGGER "
		} else {
			dropFirst = "DROP TRIGGER IF EXISTS "
		}
		up = head
		if dropFirst != "" {
			up += dropFirst + qtrigger + ";\n"
		}
		up += create + qtrigger + " BEFORE UPDATE ON " + qtable + " FOR EACH ROW\n" +
			"\tSET NEW." + v + " = IF(NEW." + v + " <=> OLD." + v + unless + ",\n" +
			"\t\tGREATEST(COALESCE(OLD." + v + ", 0) + 1, " + mysqlClockMicros + "),\n" +
			"\t\tNEW." + v + ");\n"
		if dropFirst != "" {
			up += dropFirst + qinsert + ";\n"
		}
		up += create + qinsert + " BEFORE INSERT ON " + qtable + " FOR EACH ROW\n" +
			"\tSET NEW." + v + " = IF(" + stale + ",\n" +
			"\t\t" + mysqlClockMicros + ",\n" +
			"\t\tNEW." + v + ");\n"
		down = "DROP TRIGGER IF EXISTS " + qinsert + ";\n" +
			"DROP TRIGGER IF EXISTS " + qtrigger + ";\n"
	}
	return Script{Name: "version-trigger-" + table, Up: up, Down: down}, nil
}

// triggerName is the name of table's version trigger whose name starts
// with prefix (and of the function, for triggerPrefix).
func triggerName(prefix, table string) string {
	name := prefix + table
	if len(name) <= maxTriggerName {
		return name
	}
	h := fnv.New32a()
	h.Write([]byte(table))
	cut := maxTriggerName - 9
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return fmt.Sprintf("%s_%08x", name[:cut], h.Sum32())
}

// ident quotes an identifier, doubling the quotes in it.
func (fl triggerFlavor) ident(name string) string {
	q := string(fl.quote)
	return q + strings.ReplaceAll(name, q, q+q) + q
}

// splitTable splits a table name into its schema ("" for none) and its
// own name, and checks both.
func (fl triggerFlavor) splitTable(table string) (schemaName, tableName string, err error) {
	parts := strings.Split(table, ".")
	if len(parts) > 2 {
		return "", "", locking.Invalid("migrations: version trigger: table %q has more than a schema and a name", table)
	}
	for _, p := range parts {
		if err := fl.checkName("table", table, p); err != nil {
			return "", "", err
		}
	}
	if len(parts) == 2 {
		return parts[0], parts[1], nil
	}
	return "", parts[0], nil
}

// checkColumn checks a column's name.
func (fl triggerFlavor) checkColumn(what, name string) error {
	if strings.Contains(name, ".") {
		return locking.Invalid("migrations: version trigger: %s %q holds a dot", what, name)
	}
	return fl.checkName(what, name, name)
}

// checkName checks one identifier, part of whole.
func (fl triggerFlavor) checkName(what, whole, part string) error {
	var why string
	switch {
	case part == "":
		why = "is empty or has an empty part"
	case !utf8.ValidString(part):
		why = "is not UTF-8"
	case strings.ContainsFunc(part, unicode.IsControl):
		why = "holds a control character"
	case strings.TrimSpace(part) != part:
		why = "starts or ends with a space"
	case fl.maxBytes > 0 && len(part) > fl.maxBytes:
		why = fmt.Sprintf("is longer than %d bytes", fl.maxBytes)
	case fl.maxRunes > 0 && utf8.RuneCountInString(part) > fl.maxRunes:
		why = fmt.Sprintf("is longer than %d characters", fl.maxRunes)
	default:
		return nil
	}
	return locking.Invalid("migrations: version trigger: %s %q %s", what, whole, why)
}

// CreateVersionTrigger creates the version trigger of VersionTrigger on
// model's table, replacing one of the same name. model is a value of, or a
// pointer to, the model's struct, parsed with GORM's schema parser: its
// table (TableName, or GORM's naming strategy), its version column (the
// int64 field tagged `gormlock:"version"`, or else the field named Version,
// as the repository package finds it) and its primary key's columns. On
// MySQL the server is asked whether it is MariaDB, for CREATE OR REPLACE
// TRIGGER.
//
// A model with fields tagged `gormlock:"unversioned"` (a stock, a view
// count: see repository.UnversionedTag) gets a trigger whose UPDATE
// condition also compares the columns: an UPDATE that changes unversioned
// columns only (the update time aside) leaves the version alone, as the
// repository's writes and the GORM plugin do; any other change advances it.
//
// On PostgreSQL the statements run in one transaction, which first takes a
// transaction-level advisory lock, so that processes creating the trigger at
// the same time take turns; on SQLite in one transaction. MySQL and MariaDB
// commit every CREATE TRIGGER by itself: on MariaDB the replacement is one
// statement, while MySQL's script drops the trigger and creates it again:
// an UPDATE between the two is not advanced, and of two processes creating
// the trigger at once one may fail with MySQL's error 1359 (trigger
// already exists); the trigger is there then.
//
// Creating the trigger needs the database's privileges for it: on
// PostgreSQL, TRIGGER on the table and CREATE on the schema (and owning a
// function it replaces); on MySQL and MariaDB, TRIGGER on the table (with
// binary logging on, also SUPER or log_bin_trust_function_creators).
//
// A nil db or model, a model that is not a struct, has no primary key or no
// int64 version field, or whose table or columns are missing (SQLite, which
// would otherwise accept a trigger that breaks every UPDATE of the table),
// is an error matching locking.ErrInvalidArgument. A dialect without
// triggers here is one matching locking.ErrNotSupported.
func CreateVersionTrigger(ctx context.Context, db *gorm.DB, model any) error {
	t, err := modelTrigger(ctx, db, model, "create")
	if err != nil {
		return err
	}
	if t.dialect == "sqlite" {
		if err := t.checkSQLiteColumns(ctx, db); err != nil {
			return err
		}
	}
	return t.run(ctx, db, t.script.UpStatements())
}

// DropVersionTrigger drops the version trigger of model's table (on
// PostgreSQL also its function), as CreateVersionTrigger created it; it
// does nothing when there is none. It runs as CreateVersionTrigger does, and
// refuses the same arguments.
func DropVersionTrigger(ctx context.Context, db *gorm.DB, model any) error {
	t, err := modelTrigger(ctx, db, model, "drop")
	if err != nil {
		return err
	}
	return t.run(ctx, db, t.script.DownStatements())
}

// trigger is one model's version trigger.
type trigger struct {
	op      string // "create" or "drop", for errors
	dialect string // a key of triggerFlavors
	table   string
	version string
	keys    []string
	script  Script
}

// modelTrigger parses model and writes its trigger's script.
func modelTrigger(ctx context.Context, db *gorm.DB, model any, op string) (*trigger, error) {
	if db == nil || db.Config == nil || db.Dialector == nil || db.Statement == nil {
		return nil, locking.Invalid("migrations: %s version trigger: db is nil or not opened with gorm.Open", op)
	}
	if model == nil {
		return nil, locking.Invalid("migrations: %s version trigger: model is nil", op)
	}
	stmt := &gorm.Statement{DB: db}
	if err := stmt.Parse(model); err != nil {
		return nil, fmt.Errorf("migrations: %s version trigger: %w: parse %T: %w", op, locking.ErrInvalidArgument, model, err)
	}
	s := stmt.Schema
	var version *schema.Field
	var keys []string
	var u unversionedColumns
	for _, name := range s.DBNames {
		f := s.FieldsByDBName[name]
		if f.PrimaryKey {
			keys = append(keys, f.DBName)
		}
		if tag, ok := f.Tag.Lookup("gormlock"); ok && tag == "unversioned" {
			u.unversioned = append(u.unversioned, f.DBName)
		} else if f.AutoUpdateTime == 0 && f.Name != "Version" && tag != "version" {
			u.versioned = append(u.versioned, f.DBName)
		}
		if tag, ok := f.Tag.Lookup("gormlock"); ok && tag == "version" {
			if version != nil && version.Tag.Get("gormlock") == "version" {
				return nil, locking.Invalid("migrations: %s version trigger: %s has two fields tagged gormlock:\"version\"", op, s.Name)
			}
			version = f
		} else if f.Name == "Version" && (version == nil || version.Tag.Get("gormlock") != "version") {
			version = f
		}
	}
	switch {
	case len(keys) == 0:
		return nil, locking.Invalid("migrations: %s version trigger: %s has no primary key", op, s.Name)
	case version == nil:
		return nil, locking.Invalid("migrations: %s version trigger: %s has no version field (one named Version, or tagged gormlock:\"version\")", op, s.Name)
	case version.FieldType.Kind() != reflect.Int64 && version.FieldType.Kind() != reflect.Int || version.FieldType.Bits() < 64:
		return nil, locking.Invalid("migrations: %s version trigger: %s.%s must be int64, not %v", op, s.Name, version.Name, version.FieldType)
	case version.PrimaryKey:
		return nil, locking.Invalid("migrations: %s version trigger: %s: the version field cannot be part of the primary key", op, s.Name)
	}

	dialect := db.Dialector.Name()
	if dialect == "mysql" {
		var v string
		if err := db.Session(&gorm.Session{NewDB: true, Context: ctx}).Raw("SELECT VERSION()").Scan(&v).Error; err != nil {
			return nil, fmt.Errorf("migrations: %s version trigger: ask the server its version: %w", op, locking.Classify(err))
		}
		if strings.Contains(strings.ToLower(v), "mariadb") {
			dialect = "mariadb"
		}
	}
	if len(u.unversioned) > 0 {
		u.versioned = slices.DeleteFunc(u.versioned, func(c string) bool { return c == version.DBName })
	}
	script, err := versionTrigger(dialect, s.Table, version.DBName, keys, &u)
	if err != nil {
		return nil, err
	}
	return &trigger{op: op, dialect: dialect, table: s.Table, version: version.DBName, keys: keys, script: script}, nil
}

// checkSQLiteColumns checks that the table has the version and key
// columns: SQLite creates a trigger naming a missing column, and every
// UPDATE of the table fails then.
func (t *trigger) checkSQLiteColumns(ctx context.Context, db *gorm.DB) error {
	schemaName, tableName, _ := strings.Cut(t.table, ".")
	if tableName == "" {
		schemaName, tableName = "main", t.table
	}
	var cols []string
	err := db.Session(&gorm.Session{NewDB: true, Context: ctx}).
		Raw("SELECT name FROM pragma_table_info(?, ?)", tableName, schemaName).Scan(&cols).Error
	if err != nil {
		return fmt.Errorf("migrations: %s version trigger: read the columns of %s: %w", t.op, t.table, locking.Classify(err))
	}
	if len(cols) == 0 {
		return locking.Invalid("migrations: %s version trigger: table %s does not exist", t.op, t.table)
	}
	for _, c := range append([]string{t.version}, t.keys...) {
		found := false
		for _, have := range cols {
			found = found || strings.EqualFold(have, c)
		}
		if !found {
			return locking.Invalid("migrations: %s version trigger: table %s has no column %s", t.op, t.table, c)
		}
	}
	return nil
}

// run runs statements: in one transaction on PostgreSQL (after its
// advisory lock) and SQLite; one by one on MySQL and MariaDB, whose
// trigger DDL commits by itself.
func (t *trigger) run(ctx context.Context, db *gorm.DB, statements []string) error {
	var failed error
	exec := func(tx *gorm.DB) error {
		for _, st := range statements {
			if err := tx.Exec(st).Error; err != nil {
				failed = fmt.Errorf("migrations: %s version trigger on %s: %w", t.op, t.table, locking.Classify(err))
				return failed
			}
		}
		return nil
	}
	s := db.Session(&gorm.Session{NewDB: true, Context: ctx})
	var err error
	switch t.dialect {
	case "postgres":
		err = s.Transaction(func(tx *gorm.DB) error {
			if err := tx.Exec(`SELECT pg_advisory_xact_lock(`+lockClass+`, hashtext(?))`, "version trigger "+t.table).Error; err != nil {
				failed = fmt.Errorf("migrations: %s version trigger on %s: take the lock: %w", t.op, t.table, locking.Classify(err))
				return failed
			}
			return exec(tx)
		})
	case "sqlite":
		err = s.Transaction(exec)
	default:
		err = exec(s)
	}
	if err != nil && err != failed {
		err = fmt.Errorf("migrations: %s version trigger on %s: %w", t.op, t.table, locking.Classify(err))
	}
	return err
}
