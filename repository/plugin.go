package repository

import (
	"fmt"
	"sync"

	"gorm.io/gorm"
	"gorm.io/gorm/schema"

	"github.com/gormlock/gormlock/internal/dialect"
	"github.com/gormlock/gormlock/internal/store"
	"github.com/gormlock/gormlock/locking"
)

// Plugin returns gormlock's GORM plugin, which makes the plain GORM writes
// of versioned models advance the version, so that gormlock's guard sees
// them. Register it once, on the *gorm.DB the application writes through:
//
//	if err := db.Use(repository.Plugin()); err != nil {
//		log.Fatal(err)
//	}
//
// Without it, an application that writes a table with gormlock's calls in
// one place and with plain GORM in another loses updates silently: a plain
// GORM write leaves the version as it was, so a guarded Update (or Mutate)
// from a copy read before it passes the guard and writes back the old
// values of every column. With it, every such write moves the version on,
// and the guarded write is refused with locking.ErrStaleData (Mutate reads
// again and re-runs).
//
// A model is versioned as for New: a field tagged `gormlock:"version"`, or
// else one named Version, of an int64 kind. The callbacks pass every other
// model by, and every statement without a model (db.Table("t") alone).
//
// What the plugin does to each kind of plain GORM write of a versioned
// model:
//
//   - Updates (a struct or a map, gorm.Expr values included), Update,
//     UpdateColumn and UpdateColumns, of one record or of every record a
//     Where matches: the statement also sets the version to
//     max(previous version + 1, now in microseconds), per row, in the same
//     UPDATE. Any assignment to the version column the call makes is
//     dropped: the version is gormlock's. An update that changes only
//     fields tagged gormlock:"unversioned" (UnversionedTag), and the update
//     time GORM adds, leaves the version as it is.
//   - Save of an existing record (GORM's update of every column): the same;
//     the version the entity holds in memory is not written back.
//   - Fields tagged gormlock:"unversioned" are never written from a struct:
//     Save (of a slice too: its ON CONFLICT update leaves them as the row
//     has them), and Updates or UpdateColumns of a struct (Select("*")
//     included), leave them out of the statement, so a struct read before
//     an Apply changed them (which left the version, and so the guard,
//     where it was) cannot put back the value it read; the struct keeps
//     the value it held, which may be stale. Named in the update (Update's
//     column, a map's key, a Select of a struct), such a field is written
//     as named: an expression the database computes (gorm.Expr("stock -
//     ?", 1)) is safe; a value from the application is a blind write,
//     which StrictGORMWrites refuses, and which it and GuardGORMUpdates
//     otherwise report as a warning.
//   - Create (of a struct, a slice, a map or a []map; CreateInBatches,
//     FirstOrCreate and the insert of Save included) gives every record a
//     first version never used before: the larger of one above the version
//     it holds and the clock reading Repository.Create takes, so that a record
//     created again after a delete, even from a copy of the deleted one,
//     is never at a version a copy of the earlier one holds. The version
//     column is written also when Select leaves it out or Omit names it.
//     A Create that updates on conflict (clause.OnConflict with
//     DoUpdates or UpdateAll, and so Save of a slice, and the insert Save
//     falls back to when its update matched no row) advances the version
//     of the rows it updates, and the entities' versions in memory.
//   - Delete is left as it is: a soft delete sets deleted_at only, and
//     gormlock's guarded writes do not match a soft-deleted record anyway
//     (StrictGORMWrites reports an unguarded delete).
//
// "now" is this process's clock (gormlock's own writes read the
// database's clock on PostgreSQL and MySQL): versions still only grow per
// record, whichever writes them.
//
// The version the database now holds is put back into the entity only when
// it is known exactly, after a write guarded by GuardGORMUpdates. After an
// unguarded plain GORM write the entity keeps the version it had, so a
// guarded write of it is refused as stale: read the record again before a
// guarded write.
//
// Raw SQL (db.Exec, db.Raw) never reaches GORM's create, update and delete
// callbacks, and other services do not run this process's callbacks: for
// those, per-table triggers in the database advance the version, and give
// an INSERT that leaves it to its default a first version (package
// migrations). gormlock's own statements are not touched, and registering
// the plugin leaves them on their direct path (see WithCallbacks).
//
// Initialize, which db.Use calls, refuses a nil or unopened *gorm.DB and
// an invalid option with an error matching locking.ErrInvalidArgument, and
// a database gormlock does not support with one matching
// locking.ErrNotSupported. Registering it twice is GORM's
// gorm.ErrRegistered.
func Plugin(opts ...PluginOption) gorm.Plugin {
	p := &plugin{}
	p.err = applyOpts(opts, &p.cfg, PluginOption.applyPlugin)
	return p
}

// PluginOption adjusts Plugin: GuardGORMUpdates, StrictGORMWrites.
type PluginOption interface {
	applyPlugin(*pluginConfig) error
}

type pluginConfig struct {
	guard bool
	// strict is nil when StrictGORMWrites is off, else whether it refuses
	// (true) or logs (false).
	strict *bool
}

// pluginFunc is a PluginOption made of a function.
type pluginFunc func(*pluginConfig) error

func (f pluginFunc) applyPlugin(c *pluginConfig) error { return f(c) }

// GuardGORMUpdates makes the plugin guard a plain GORM update whose model is
// one record read with its version: a struct (or pointer to one) of a
// versioned model whose key and version are both set, as in
// db.Save(&token) or db.Model(&token).Updates(...). The UPDATE then also
// requires the version the record holds (AND version = ?, as
// go-gorm/optimisticlock does), and on success the entity holds the new
// version, exactly. When it matches no row because the record is at
// another version, the *gorm.DB's error is a *locking.StaleDataError
// (errors.Is(err, locking.ErrStaleData)) and nothing was written; when the
// record is gone (or soft-deleted), an error matching both
// locking.ErrStaleData and locking.ErrNotFound, and Save does not insert
// it again. A record at its version that other conditions of the call
// left out is GORM's usual outcome: no error, RowsAffected 0.
//
// The guard is joined by AND to the call's own conditions, which are put in
// parentheses as a whole: an OR among them cannot reach past it. A
// condition that could (an unbalanced parenthesis, a comment: the WHERE
// with the guard is not a guard as StrictGORMWrites decides) is refused
// with an error matching locking.ErrUnguardedWrite, and nothing is
// written.
//
// Updates whose model holds no version (db.Model(&Token{}).Where(...)), a
// slice, or a record without its key, are not guarded: they still advance
// the version.
//
// The version does not guard fields tagged gormlock:"unversioned": an
// update from a struct leaves them out (see Plugin), and one that names
// such a field with a value from the application rather than an
// expression (Update("stock", 5)) runs, and the GORM logger's Warn names
// the field, the table and the calling file and line.
func GuardGORMUpdates() PluginOption {
	return pluginFunc(func(c *pluginConfig) error {
		c.guard = true
		return nil
	})
}

// StrictGORMWrites makes the plugin report every plain GORM update or
// delete of a versioned model that no version guards: neither guarded by
// GuardGORMUpdates nor given a condition on the version column itself
// (Where("version = ?", v)). It is meant for tests and development, to
// find the call sites that can erase a concurrent change.
//
// It decides from the structure of the WHERE that GORM builds (whatever
// the conditions were given as: text with values, named arguments, a map,
// a struct, clause expressions), not from its words: a guard is an
// equality between the model's version column (unquoted or quoted, or
// qualified by the statement's table) and one value, joined by AND at the
// top level of the condition. An OR or XOR (MySQL's || too) at the top
// level, a NOT, any other comparison, a subquery, another table's column
// or a column whose name merely holds the version's, the name in a string
// literal or a comment, do not guard. When in doubt (a line comment, an
// unterminated literal, a semicolon, text the databases read differently)
// it reports: a false report costs a log line, a missed one a lost update.
// The error or warning says why the condition does not guard.
//
// With refuse true such a write is refused before anything runs (hooks
// included): the *gorm.DB's error matches locking.ErrUnguardedWrite, and
// nothing is written. With refuse false it runs, and the GORM logger's
// Warn names the table and the calling file and line (GORM's logger shows
// warnings at its Warn level and above).
//
// An update that names a field tagged gormlock:"unversioned" with a value
// from the application (Update("stock", 5), Updates(map[string]any{"stock":
// 5}), Select("Stock") beside a struct) is reported the same way, guarded
// or not, naming the field: the version does not guard such a field, so
// the value can erase a concurrent Apply of it. An expression the database
// computes (gorm.Expr("stock - ?", 1)) is not reported.
//
// Creates, upserts included, are not reported, and raw SQL is never seen
// (see Plugin). Giving the option twice with different values is an error
// matching locking.ErrInvalidArgument.
func StrictGORMWrites(refuse bool) PluginOption {
	return pluginFunc(func(c *pluginConfig) error {
		if c.strict != nil && *c.strict != refuse {
			return locking.Invalid("repository: Plugin: StrictGORMWrites given twice, refusing (%v) and not (%v)", *c.strict, refuse)
		}
		c.strict = &refuse
		return nil
	})
}

// plugin is what Plugin returns: its options, and the version field of
// each model schema it has seen.
type plugin struct {
	cfg pluginConfig
	err error // an invalid option, returned by Initialize
	// versions maps a *schema.Schema to its version field, nil for a
	// model without a usable one.
	versions sync.Map
	// unversioned maps a *schema.Schema to whether its model has fields
	// tagged gormlock:"unversioned".
	unversioned sync.Map
}

// Name implements gorm.Plugin: "gormlock".
func (*plugin) Name() string { return store.PluginName }

// Initialize implements gorm.Plugin: it registers the callbacks on db.
func (p *plugin) Initialize(db *gorm.DB) error {
	if p.err != nil {
		return p.err
	}
	if db == nil || db.Config == nil || db.Callback() == nil || db.Dialector == nil {
		return locking.Invalid("repository: Plugin: the *gorm.DB is nil or was not opened with gorm.Open")
	}
	name := db.Dialector.Name()
	if _, ok := dialect.Lookup(name); !ok {
		return fmt.Errorf("%w: repository: Plugin: dialect %q (gormlock supports SQLite, PostgreSQL, MariaDB and MySQL)", locking.ErrNotSupported, name)
	}
	w := &pluginWrites{plugin: p, greatest: "GREATEST", mysql: name == dialect.MySQL}
	if name == dialect.SQLite {
		w.greatest = "MAX"
	}
	cb := db.Callback()
	for _, err := range []error{
		cb.Create().Before("gorm:create").Register("gormlock:create", w.create),
		cb.Create().After("gorm:create").Register("gormlock:after_create", w.afterCreate),
		cb.Update().Before("gorm:setup_reflect_value").Register("gormlock:update_guard", w.updateGuard),
		cb.Update().Before("gorm:update").Register("gormlock:update_set", w.updateSet),
		cb.Update().After("gorm:update").Before("gorm:save_after_associations").Register("gormlock:update_check", w.updateCheck),
		cb.Create().After("gorm:begin_transaction").Before("gorm:save_before_associations").Register("gormlock:create_log", w.versionLogStart),
		cb.Create().After("gorm:commit_or_rollback_transaction").Register("gormlock:create_undo", w.versionUndo),
		cb.Update().After("gorm:begin_transaction").Before("gorm:save_before_associations").Register("gormlock:update_log", w.versionLogStart),
		cb.Update().After("gorm:commit_or_rollback_transaction").Register("gormlock:update_undo", w.versionUndo),
	} {
		if err != nil {
			return fmt.Errorf("repository: Plugin: %w", err)
		}
	}
	if p.cfg.strict != nil {
		if err := cb.Delete().Before("gorm:before_delete").Register("gormlock:delete_check", w.deleteCheck); err != nil {
			return fmt.Errorf("repository: Plugin: %w", err)
		}
	}
	return nil
}

// versionOf returns the version field of the model s describes, or nil
// when s is nil or its model has no usable version field.
func (p *plugin) versionOf(s *schema.Schema) *schema.Field {
	if s == nil {
		return nil
	}
	if f, ok := p.versions.Load(s); ok {
		return f.(*schema.Field)
	}
	f, _ := versionField(s)
	p.versions.Store(s, f)
	return f
}

// hasUnversioned reports whether the model s describes has fields tagged
// gormlock:"unversioned" (UnversionedTag).
func (p *plugin) hasUnversioned(s *schema.Schema) bool {
	if s == nil {
		return false
	}
	if has, ok := p.unversioned.Load(s); ok {
		return has.(bool)
	}
	has := false
	for _, f := range s.Fields {
		if isUnversioned(f) {
			has = true
			break
		}
	}
	p.unversioned.Store(s, has)
	return has
}
