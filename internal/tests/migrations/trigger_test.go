package migrations_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/migrations"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/repository"
)

// token is an API gateway's token: an editor changes its name and status
// through a form (a guarded Update of every column), billing charges its
// quota with raw SQL.
type token struct {
	models.Model
	Name        string `gorm:"column:name;not null"`
	Status      string `gorm:"column:status;not null"`
	RemainQuota int64  `gorm:"column:remain_quota;not null"`
}

func (token) TableName() string { return "tokens" }

const (
	tokensTrigger = "gormlock_version_tokens"
	chargeSQL     = "UPDATE tokens SET remain_quota = remain_quota - 1 WHERE id = ?"
)

// tokens creates the tokens table on db and returns its repository and a
// token in it.
func tokens(t testing.TB, db *gorm.DB, quota int64) (*repository.Repository[token], *token) {
	t.Helper()
	require.NoError(t, db.AutoMigrate(&token{}))
	repo, err := repository.New[token](db)
	require.NoError(t, err)
	tk := &token{Name: "gateway", Status: "active", RemainQuota: quota}
	require.NoError(t, repo.Create(context.Background(), tk))
	return repo, tk
}

// dbVersion reads the version of token id as the database holds it.
func dbVersion(t testing.TB, db *gorm.DB, id int64) int64 {
	t.Helper()
	var v int64
	require.NoError(t, db.Raw("SELECT version FROM tokens WHERE id = ?", id).Scan(&v).Error)
	return v
}

// rawExec runs a statement and requires it to change rows rows.
func rawExec(t testing.TB, db *gorm.DB, rows int64, sql string, args ...any) {
	t.Helper()
	res := db.Exec(sql, args...)
	require.NoError(t, res.Error, sql)
	require.Equal(t, rows, res.RowsAffected, sql)
}

// triggers counts the triggers named name on db (in the test's schema or
// database), and on PostgreSQL the functions of that name besides.
func triggers(t testing.TB, db *gorm.DB, name string) int64 {
	t.Helper()
	var n int64
	var err error
	switch db.Dialector.Name() {
	case "sqlite":
		err = db.Raw("SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name = ?", name).Scan(&n).Error
	case "postgres":
		err = db.Raw(`SELECT (SELECT count(*) FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid
				WHERE g.tgname = ? AND c.relnamespace = current_schema()::regnamespace)
			+ (SELECT count(*) FROM pg_proc WHERE proname = ? AND pronamespace = current_schema()::regnamespace)`, name, name).Scan(&n).Error
	default:
		err = db.Raw("SELECT count(*) FROM information_schema.triggers WHERE trigger_schema = DATABASE() AND trigger_name = ?", name).Scan(&n).Error
	}
	require.NoError(t, err)
	return n
}

// installed is what triggers counts for one installed trigger.
func installed(db *gorm.DB) int64 {
	if db.Dialector.Name() == "postgres" {
		return 2 // the trigger and its function
	}
	return 1
}

func TestVersionTriggerAdvancesRawUpdates(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		repo, tk := tokens(t, db, 100)
		require.NoError(t, migrations.CreateVersionTrigger(ctx, db, &token{}))
		assert.Equal(t, installed(db), triggers(t, db, tokensTrigger))
		stale := *tk

		v0 := dbVersion(t, db, tk.ID)
		require.Equal(t, tk.Version, v0)
		rawExec(t, db, 1, "UPDATE tokens SET name = ? WHERE id = ?", "renamed", tk.ID)
		v1 := dbVersion(t, db, tk.ID)
		assert.Greater(t, v1, v0, "a raw UPDATE advances the version")
		rawExec(t, db, 1, chargeSQL, tk.ID)
		v2 := dbVersion(t, db, tk.ID)
		assert.Greater(t, v2, v1, "and the next one again")
		// A no-op UPDATE is an UPDATE too.
		rawExec(t, db, 1, "UPDATE tokens SET remain_quota = remain_quota WHERE id = ?", tk.ID)
		assert.Greater(t, dbVersion(t, db, tk.ID), v2)

		got, err := repo.Get(ctx, tk.ID)
		require.NoError(t, err)
		assert.Equal(t, "renamed", got.Name)
		assert.Equal(t, int64(99), got.RemainQuota)

		// The copy read before the raw UPDATEs is stale now: its write is
		// refused instead of putting the quota back to 100.
		stale.Status = "blocked"
		err = repo.Update(ctx, &stale)
		require.ErrorIs(t, err, locking.ErrStaleData)
		got, err = repo.Get(ctx, tk.ID)
		require.NoError(t, err)
		assert.Equal(t, int64(99), got.RemainQuota)
		assert.Equal(t, "active", got.Status)
	})
}

func TestVersionTriggerKeepsTheVersionAnUpdateSets(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		_, tk := tokens(t, db, 100)
		require.NoError(t, migrations.CreateVersionTrigger(ctx, db, &token{}))
		v0 := dbVersion(t, db, tk.ID)

		rawExec(t, db, 1, "UPDATE tokens SET name = ?, version = ? WHERE id = ?", "a", v0+1000, tk.ID)
		assert.Equal(t, v0+1000, dbVersion(t, db, tk.ID))
		rawExec(t, db, 1, "UPDATE tokens SET name = ?, version = version + 1 WHERE id = ?", "b", tk.ID)
		assert.Equal(t, v0+1001, dbVersion(t, db, tk.ID))
		// Setting it to the value it has is leaving it unchanged.
		rawExec(t, db, 1, "UPDATE tokens SET name = ?, version = ? WHERE id = ?", "c", v0+1001, tk.ID)
		assert.Greater(t, dbVersion(t, db, tk.ID), v0+1001)
	})
}

// gormlock's own writes change the version, so the trigger leaves them
// alone: the version each returns is the one the database holds.
func TestVersionTriggerLeavesGormlocksWritesAlone(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		repo, tk := tokens(t, db, 100)
		require.NoError(t, migrations.CreateVersionTrigger(ctx, db, &token{}))

		stale := *tk
		tk.Name = "updated"
		require.NoError(t, repo.Update(ctx, tk))
		assert.Greater(t, tk.Version, stale.Version)
		// On MySQL and MariaDB gormlock reads the version it wrote from the
		// server's answer (the LAST_INSERT_ID the statement set), which
		// carries 0 when the table has an UPDATE trigger.
		assert.Equal(t, tk.Version, dbVersion(t, db, tk.ID), "Update's version is the one it wrote")

		stale.Name = "stale"
		require.ErrorIs(t, repo.Update(ctx, &stale), locking.ErrStaleData)

		before := tk.Version
		mutated, err := repo.Mutate(ctx, tk.ID, func(x *token) error {
			x.Status = "paused"
			return nil
		})
		require.NoError(t, err)
		assert.Greater(t, mutated.Version, before)
		assert.Equal(t, mutated.Version, dbVersion(t, db, tk.ID), "Mutate's version is the one it wrote")

		applied, err := repo.Apply(ctx, tk.ID, []repository.Change{repository.Add("RemainQuota", -5)})
		require.NoError(t, err)
		assert.Greater(t, applied.Version, mutated.Version)
		assert.Equal(t, applied.Version, dbVersion(t, db, tk.ID), "Apply's version is the one it wrote")
		assert.Equal(t, int64(95), applied.RemainQuota)

		require.NoError(t, repo.ForceIncrement(ctx, applied))
		assert.Equal(t, applied.Version, dbVersion(t, db, tk.ID), "ForceIncrement's version is the one it wrote")

		// A copy from before Apply is refused, as without the trigger.
		mutated.Name = "late"
		require.ErrorIs(t, repo.Update(ctx, mutated), locking.ErrStaleData)
		got, err := repo.Get(ctx, tk.ID)
		require.NoError(t, err)
		assert.Equal(t, applied.Version, got.Version)
		assert.Equal(t, "updated", got.Name)
		assert.Equal(t, "paused", got.Status)
	})
}

func TestVersionTriggerAdvancesEveryRow(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		repo, first := tokens(t, db, 100)
		ids := []int64{first.ID}
		for i := range 4 {
			tk := &token{Name: fmt.Sprint("t", i), Status: "active", RemainQuota: 10}
			require.NoError(t, repo.Create(ctx, tk))
			ids = append(ids, tk.ID)
		}
		require.NoError(t, migrations.CreateVersionTrigger(ctx, db, &token{}))
		before := map[int64]int64{}
		for _, id := range ids {
			before[id] = dbVersion(t, db, id)
		}
		rawExec(t, db, int64(len(ids)), "UPDATE tokens SET status = 'suspended'")
		for _, id := range ids {
			assert.Greater(t, dbVersion(t, db, id), before[id], "token %d", id)
		}
	})
}

func TestDropVersionTrigger(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		_, tk := tokens(t, db, 100)
		// None to drop: nothing happens.
		require.NoError(t, migrations.DropVersionTrigger(ctx, db, &token{}))

		require.NoError(t, migrations.CreateVersionTrigger(ctx, db, &token{}))
		require.NoError(t, migrations.DropVersionTrigger(ctx, db, &token{}))
		assert.Zero(t, triggers(t, db, tokensTrigger))
		// The negative control: without the trigger a raw UPDATE leaves the
		// version where it was.
		v := dbVersion(t, db, tk.ID)
		rawExec(t, db, 1, chargeSQL, tk.ID)
		assert.Equal(t, v, dbVersion(t, db, tk.ID))

		require.NoError(t, migrations.DropVersionTrigger(ctx, db, &token{}))
		// A dropped table took its trigger along.
		require.NoError(t, migrations.CreateVersionTrigger(ctx, db, &token{}))
		require.NoError(t, db.Migrator().DropTable(&token{}))
		require.NoError(t, migrations.DropVersionTrigger(ctx, db, &token{}))
	})
}

func TestCreateVersionTriggerTwice(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		_, tk := tokens(t, db, 100)
		require.NoError(t, migrations.CreateVersionTrigger(ctx, db, &token{}))
		require.NoError(t, migrations.CreateVersionTrigger(ctx, db, token{}))
		assert.Equal(t, installed(db), triggers(t, db, tokensTrigger))

		// Processes starting at once each create it.
		start := make(chan struct{})
		errs := make([]error, 4)
		var wg sync.WaitGroup
		for i := range errs {
			wg.Go(func() {
				<-start
				errs[i] = migrations.CreateVersionTrigger(ctx, db, &token{})
			})
		}
		close(start)
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		assert.Equal(t, installed(db), triggers(t, db, tokensTrigger))

		v := dbVersion(t, db, tk.ID)
		rawExec(t, db, 1, chargeSQL, tk.ID)
		assert.Greater(t, dbVersion(t, db, tk.ID), v)
	})
}

// dialectsOf names the dialects whose scripts run on db: on MariaDB both
// MySQL's (DROP, then CREATE) and MariaDB's (CREATE OR REPLACE).
func dialectsOf(db *gorm.DB) []string {
	if db.Dialector.Name() == "mysql" {
		return []string{"mysql", "mariadb"}
	}
	return []string{db.Dialector.Name()}
}

// The scripts work as a migration tool runs them: UpStatements and
// DownStatements one at a time with db.Exec, also on a table whose name
// needs quoting, holding quotes, a semicolon, a comment mark and a dollar
// sign.
func TestVersionTriggerScriptsRunOneByOne(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *gorm.DB) {
		q := func(s string) string { // quoted as the dialect quotes
			if db.Dialector.Name() == "mysql" {
				return "`" + strings.ReplaceAll(s, "`", "``") + "`"
			}
			return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
		}
		for _, table := range []string{"plain", "odd \"name\"; `x` -- $gormlock$ 'y'"} {
			for _, dialect := range dialectsOf(db) {
				t.Run(dialect+"/"+table[:4], func(t *testing.T) {
					version := "ver $gormlock$ \"v\""
					require.NoError(t, db.Exec("CREATE TABLE "+q(table)+" (id BIGINT NOT NULL, k2 VARCHAR(10) NOT NULL, n BIGINT NOT NULL, "+
						q(version)+" BIGINT NOT NULL, PRIMARY KEY (id, k2))").Error)
					t.Cleanup(func() { require.NoError(t, db.Exec("DROP TABLE "+q(table)).Error) })
					require.NoError(t, db.Exec("INSERT INTO "+q(table)+" VALUES (1, 'a', 0, 5), (1, 'b', 0, 7)").Error)
					s, err := migrations.VersionTrigger(dialect, table, version, "id", "k2")
					require.NoError(t, err)
					assert.Equal(t, "version-trigger-"+table, s.Name)
					assert.Zero(t, s.Version)
					versionOf := func(k2 string) int64 {
						var v int64
						require.NoError(t, db.Raw("SELECT "+q(version)+" FROM "+q(table)+" WHERE id = 1 AND k2 = ?", k2).Scan(&v).Error)
						return v
					}

					for range 2 { // twice: Up replaces the trigger
						for _, st := range s.UpStatements() {
							require.NoError(t, db.Exec(st).Error, st)
						}
					}
					rawExec(t, db, 1, "UPDATE "+q(table)+" SET n = n + 1 WHERE k2 = 'a'")
					assert.Greater(t, versionOf("a"), int64(5))
					assert.Equal(t, int64(7), versionOf("b"), "only the row updated")
					rawExec(t, db, 1, "INSERT INTO "+q(table)+" VALUES (1, 'c', 0, 1)")
					assert.Greater(t, versionOf("c"), int64(1_000_000_000_000_000), "an INSERT gets a first version")

					for _, st := range s.DownStatements() {
						require.NoError(t, db.Exec(st).Error, st)
					}
					v := versionOf("a")
					rawExec(t, db, 1, "UPDATE "+q(table)+" SET n = n + 1 WHERE k2 = 'a'")
					assert.Equal(t, v, versionOf("a"), "Down removed the trigger")
					rawExec(t, db, 1, "INSERT INTO "+q(table)+" VALUES (1, 'd', 0, 1)")
					assert.Equal(t, int64(1), versionOf("d"), "Down removed the INSERT trigger")
				})
			}
		}
	})
}

// With recursive_triggers on, the trigger's own UPDATE fires it again: its
// WHEN clause stops it there, as the version changed.
func TestSQLiteVersionTriggerWithRecursiveTriggers(t *testing.T) {
	db := testdb.SQLite(t)
	ctx := testdb.Ctx(t)
	_, tk := tokens(t, db, 100)
	require.NoError(t, migrations.CreateVersionTrigger(ctx, db, &token{}))
	require.NoError(t, db.Connection(func(conn *gorm.DB) error {
		require.NoError(t, conn.Exec("PRAGMA recursive_triggers = ON").Error)
		defer func() { require.NoError(t, conn.Exec("PRAGMA recursive_triggers = OFF").Error) }()
		var on int
		require.NoError(t, conn.Raw("PRAGMA recursive_triggers").Scan(&on).Error)
		require.Equal(t, 1, on)
		for range 3 {
			v := dbVersion(t, conn, tk.ID)
			rawExec(t, conn, 1, chargeSQL, tk.ID)
			assert.Greater(t, dbVersion(t, conn, tk.ID), v)
		}
		return nil
	}))
}

// A table qualified by its schema: SQLite's trigger goes to that schema,
// and names the table unqualified, as SQLite wants it in a trigger.
func TestSQLiteVersionTriggerInASchema(t *testing.T) {
	db := testdb.SQLite(t)
	_, tk := tokens(t, db, 100)
	s, err := migrations.VersionTrigger("sqlite", "main.tokens", "version", "id")
	require.NoError(t, err)
	runScripts(t, db, s)
	assert.Equal(t, int64(1), triggers(t, db, tokensTrigger))
	v := dbVersion(t, db, tk.ID)
	rawExec(t, db, 1, chargeSQL, tk.ID)
	assert.Greater(t, dbVersion(t, db, tk.ID), v)
	for _, st := range s.DownStatements() {
		require.NoError(t, db.Exec(st).Error, st)
	}
	assert.Zero(t, triggers(t, db, tokensTrigger))
}

// SQLite creates a trigger that names a missing column, after which every
// UPDATE of the table fails; CreateVersionTrigger checks the columns first.
// PostgreSQL and MariaDB refuse such a trigger themselves.
func TestCreateVersionTriggerNeedsTheColumns(t *testing.T) {
	type unversioned struct {
		ID   int64 `gorm:"primaryKey"`
		Name string
	}
	type legacy struct {
		ID      int64 `gorm:"primaryKey"`
		Name    string
		Version int64
	}
	eachEmpty(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		err := migrations.CreateVersionTrigger(ctx, db, &legacy{})
		require.Error(t, err, "no table")
		if db.Dialector.Name() == "sqlite" {
			require.ErrorIs(t, err, locking.ErrInvalidArgument)
		}
		require.NoError(t, db.Table("legacies").AutoMigrate(&unversioned{}))
		err = migrations.CreateVersionTrigger(ctx, db, &legacy{})
		require.Error(t, err, "no version column")
		if db.Dialector.Name() == "sqlite" {
			require.ErrorIs(t, err, locking.ErrInvalidArgument)
		}
		assert.Zero(t, triggers(t, db, "gormlock_version_legacies"))
		require.NoError(t, db.Exec("INSERT INTO legacies (id, name) VALUES (1, 'a')").Error)
		rawExec(t, db, 1, "UPDATE legacies SET name = 'b' WHERE id = 1")
	})
}

func TestVersionTriggerRefusesBadInput(t *testing.T) {
	for _, c := range []struct {
		dialect, table, version string
		keys                    []string
		want                    error
	}{
		{"oracle", "tokens", "version", []string{"id"}, locking.ErrNotSupported},
		{"", "tokens", "version", []string{"id"}, locking.ErrNotSupported},
		{"postgres", "", "version", nil, locking.ErrInvalidArgument},
		{"postgres", "tokens", "", nil, locking.ErrInvalidArgument},
		{"postgres", "a.b.c", "version", nil, locking.ErrInvalidArgument},
		{"postgres", ".tokens", "version", nil, locking.ErrInvalidArgument},
		{"postgres", "tokens.", "version", nil, locking.ErrInvalidArgument},
		{"postgres", "tokens\n; DROP TABLE x", "version", nil, locking.ErrInvalidArgument},
		{"mysql", "tokens\x00", "version", nil, locking.ErrInvalidArgument},
		{"mysql", " tokens", "version", nil, locking.ErrInvalidArgument},
		{"mysql", "tokens", "t.version", nil, locking.ErrInvalidArgument},
		{"mysql", "tokens", "version", []string{""}, locking.ErrInvalidArgument},
		{"mariadb", "tokens", "version", []string{"version"}, locking.ErrInvalidArgument},
		{"postgres", strings.Repeat("t", 64), "version", nil, locking.ErrInvalidArgument},
		{"mysql", strings.Repeat("t", 65), "version", nil, locking.ErrInvalidArgument},
		{"sqlite", "tokens", "version", nil, locking.ErrInvalidArgument},
		{"sqlite", "tokens", "version\r", []string{"id"}, locking.ErrInvalidArgument},
		{"sqlite", "tokens", "version", []string{"id\t"}, locking.ErrInvalidArgument},
		{"sqlite", "tokens", "version", []string{"a.id"}, locking.ErrInvalidArgument},
		{"sqlite", "tokens\xff", "version", []string{"id"}, locking.ErrInvalidArgument},
	} {
		_, err := migrations.VersionTrigger(c.dialect, c.table, c.version, c.keys...)
		assert.ErrorIs(t, err, c.want, "%q %q %q %q", c.dialect, c.table, c.version, c.keys)
	}

	// Names PostgreSQL accepts, and the longest MySQL does.
	for _, c := range []struct{ dialect, table string }{
		{"postgres", strings.Repeat("t", 63)}, {"postgres", "app.tokens"},
		{"mysql", strings.Repeat("é", 64)}, {"sqlite", strings.Repeat("t", 300)},
	} {
		_, err := migrations.VersionTrigger(c.dialect, c.table, "version", "id")
		assert.NoError(t, err, c.table)
	}
}

func TestVersionTriggerNamesFitPostgres(t *testing.T) {
	db := testdb.Postgres(t)
	ctx := testdb.Ctx(t)
	// Two long names that differ only past the cut get triggers of their
	// own.
	long := strings.Repeat("t", 60)
	type a struct {
		ID      int64 `gorm:"primaryKey"`
		Version int64
	}
	for _, suffix := range []string{"_a", "_b"} {
		table := long + suffix
		require.NoError(t, db.Table(table).AutoMigrate(&a{}))
		s, err := migrations.VersionTrigger("postgres", table, "version", "id")
		require.NoError(t, err)
		runScripts(t, db, s)
		require.NoError(t, db.Exec(`INSERT INTO `+table+` (id, version) VALUES (1, 1)`).Error)
	}
	var n int64
	require.NoError(t, db.Raw(`SELECT count(DISTINCT tgname) FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid
		WHERE c.relnamespace = current_schema()::regnamespace AND NOT g.tgisinternal`).Scan(&n).Error)
	assert.Equal(t, int64(4), n, "an UPDATE and an INSERT trigger per table")
	for _, suffix := range []string{"_a", "_b"} {
		rawExec(t, db, 1, `UPDATE `+long+suffix+` SET id = 1`)
		var v int64
		require.NoError(t, db.Raw(`SELECT version FROM `+long+suffix).Scan(&v).Error)
		assert.Greater(t, v, int64(1))
	}
	// A schema-qualified table: the function goes to the table's schema.
	var schema string
	require.NoError(t, db.Raw(`SELECT current_schema()`).Scan(&schema).Error)
	_, tk := tokens(t, db, 10)
	s, err := migrations.VersionTrigger("postgres", schema+".tokens", "version", "id")
	require.NoError(t, err)
	runScripts(t, db, s)
	assert.Equal(t, int64(2), triggers(t, db, tokensTrigger))
	v := dbVersion(t, db, tk.ID)
	rawExec(t, db, 1, chargeSQL, tk.ID)
	assert.Greater(t, dbVersion(t, db, tk.ID), v)
	require.NoError(t, migrations.DropVersionTrigger(ctx, db, &token{}))
	assert.Zero(t, triggers(t, db, tokensTrigger))
}

func TestCreateVersionTriggerRefusesBadModels(t *testing.T) {
	db := testdb.SQLite(t)
	ctx := testdb.Ctx(t)
	type noKey struct {
		Name    string
		Version int64
	}
	type noVersion struct {
		ID   int64 `gorm:"primaryKey"`
		Name string
	}
	type narrowVersion struct {
		ID      int64 `gorm:"primaryKey"`
		Version int32
	}
	type twoTagged struct {
		ID int64 `gorm:"primaryKey"`
		A  int64 `gormlock:"version"`
		B  int64 `gormlock:"version"`
	}
	for _, model := range []any{nil, 42, &noKey{}, &noVersion{}, &narrowVersion{}, &twoTagged{}} {
		for _, fn := range []func(context.Context, *gorm.DB, any) error{migrations.CreateVersionTrigger, migrations.DropVersionTrigger} {
			err := fn(ctx, db, model)
			assert.ErrorIs(t, err, locking.ErrInvalidArgument, "%T", model)
		}
	}
	assert.ErrorIs(t, migrations.CreateVersionTrigger(ctx, nil, &token{}), locking.ErrInvalidArgument)
	assert.ErrorIs(t, migrations.DropVersionTrigger(ctx, nil, &token{}), locking.ErrInvalidArgument)

	// A version field tagged gormlock:"version" is the version, whatever
	// its name.
	type tagged struct {
		ID      int64 `gorm:"primaryKey"`
		Rev     int64 `gormlock:"version"`
		Version int64 // an ordinary column here
	}
	require.NoError(t, db.AutoMigrate(&tagged{}))
	require.NoError(t, db.Exec("INSERT INTO taggeds (id, rev, version) VALUES (1, 1, 1)").Error)
	require.NoError(t, migrations.CreateVersionTrigger(ctx, db, &tagged{}))
	rawExec(t, db, 1, "UPDATE taggeds SET version = 2")
	var row struct{ Rev, Version int64 }
	require.NoError(t, db.Raw("SELECT rev, version FROM taggeds").Scan(&row).Error)
	assert.Greater(t, row.Rev, int64(1))
	assert.Equal(t, int64(2), row.Version)
}

// Statements split at the semicolons that end them, not at those in
// dollar-quoted strings, backquoted identifiers or a trigger's body.
func TestStatementsWithBodies(t *testing.T) {
	s := migrations.Script{Up: `CREATE FUNCTION f() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE FUNCTION g() RETURNS int LANGUAGE plpgsql AS $body$ BEGIN RETURN 1; /* ; */ END $body$; -- done
SELECT $1, a$b$c FROM ` + "`a;b`" + `;
CREATE TRIGGER t AFTER UPDATE ON x BEGIN
	UPDATE x SET v = CASE WHEN v > 0 THEN 1 ELSE 2 END;
	DELETE FROM y; -- ; END;
END;
create temp trigger t2 before update on x for each row begin select 1; end
;
CREATE TRIGGER m BEFORE UPDATE ON x FOR EACH ROW BEGIN IF NEW.v <=> OLD.v THEN SET NEW.v = 1; END IF; END;
CREATE TRIGGER s BEFORE UPDATE ON x FOR EACH ROW SET NEW.v = 1;
CREATE DEFINER = ` + "`u`@`%`" + ` TRIGGER d BEFORE UPDATE ON x FOR EACH ROW BEGIN SET NEW.v = 1; END;
CREATE TABLE z (trigger TEXT, begin TEXT);
SELECT 'END;'`}
	assert.Equal(t, []string{
		"CREATE FUNCTION f() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$",
		"CREATE FUNCTION g() RETURNS int LANGUAGE plpgsql AS $body$ BEGIN RETURN 1; /* ; */ END $body$",
		"SELECT $1, a$b$c FROM `a;b`",
		"CREATE TRIGGER t AFTER UPDATE ON x BEGIN\n\tUPDATE x SET v = CASE WHEN v > 0 THEN 1 ELSE 2 END;\n\tDELETE FROM y; \nEND",
		"create temp trigger t2 before update on x for each row begin select 1; end",
		"CREATE TRIGGER m BEFORE UPDATE ON x FOR EACH ROW BEGIN IF NEW.v <=> OLD.v THEN SET NEW.v = 1; END IF; END",
		"CREATE TRIGGER s BEFORE UPDATE ON x FOR EACH ROW SET NEW.v = 1",
		"CREATE DEFINER = `u`@`%` TRIGGER d BEFORE UPDATE ON x FOR EACH ROW BEGIN SET NEW.v = 1; END",
		"CREATE TABLE z (trigger TEXT, begin TEXT)",
		"SELECT 'END;'",
	}, s.UpStatements())
}

// The workload of an API gateway: an editor saves a token's form (Mutate:
// a guarded Update of every column, the quota as read), while billing
// charges its quota with raw SQL. It reports how many charges succeeded, how
// many the editor's writes erased, how many edits were saved and how many of
// the editor's writes were refused as stale (and run again by Mutate).
func gatewayWorkload(t *testing.T, db *gorm.DB, trigger bool) (charges, lost, edits, refused int64) {
	t.Helper()
	const (
		billers   = 4
		perBiller = 150
		quota     = 1_000_000
		pause     = time.Millisecond
	)
	ctx := testdb.Ctx(t)
	repo, tk := tokens(t, db, quota)
	if trigger {
		require.NoError(t, migrations.CreateVersionTrigger(ctx, db, &token{}))
	}

	start := make(chan struct{})
	stop := make(chan struct{})
	var charged, failed atomic.Int64
	var saved, stale, exhausted int64 // the editor's, read after it ends
	var editErr error
	var billing, editor sync.WaitGroup
	editor.Go(func() {
		<-start
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			var rep repository.MutateReport
			_, err := repo.Mutate(ctx, tk.ID, func(x *token) error {
				x.Name = fmt.Sprint("gateway-", i)
				x.Status = []string{"active", "paused"}[i%2]
				return nil
			}, repository.Report(&rep))
			switch {
			case err == nil:
				saved++
				stale += int64(rep.Attempts - 1)
			case errors.Is(err, locking.ErrStaleData):
				exhausted++ // retries ran out: the form is sent again
				stale += int64(rep.Attempts)
			default:
				editErr = err
				return
			}
		}
	})
	for range billers {
		billing.Go(func() {
			<-start
			for range perBiller {
				time.Sleep(pause) // requests come one after another
				res := db.WithContext(ctx).Exec(chargeSQL, tk.ID)
				switch {
				case res.Error != nil:
					failed.Add(1)
					t.Errorf("charge: %v", res.Error)
				case res.RowsAffected == 1:
					charged.Add(1)
				}
			}
		})
	}
	began := time.Now()
	close(start)
	billing.Wait()
	close(stop)
	editor.Wait()
	require.NoError(t, editErr)
	require.Zero(t, failed.Load())

	got, err := repo.Get(ctx, tk.ID)
	require.NoError(t, err)
	charges = charged.Load()
	lost = got.RemainQuota - (quota - charges)
	t.Logf("trigger=%v: %d charges, %d lost; the editor saved %d edits, %d writes refused as stale, %d calls out of retries; %v",
		trigger, charges, lost, saved, stale, exhausted, time.Since(began).Round(time.Millisecond))
	return charges, lost, saved, stale
}

func TestVersionTriggerGatewayWorkload(t *testing.T) {
	eachEmpty(t, func(t *testing.T, db *gorm.DB) {
		t.Run("trigger", func(t *testing.T) {
			charges, lost, edits, refused := gatewayWorkload(t, db, true)
			assert.Equal(t, int64(600), charges)
			assert.Zero(t, lost, "no charge is lost")
			assert.Positive(t, edits, "the editor saved its form")
			assert.Positive(t, refused, "charges came between the editor's reads and writes")
		})
		t.Run("no trigger", func(t *testing.T) { // the negative control
			require.NoError(t, db.Migrator().DropTable(&token{}))
			charges, lost, _, _ := gatewayWorkload(t, db, false)
			assert.Equal(t, int64(600), charges)
			assert.Positive(t, lost, "without the trigger the editor's writes erase charges")
		})
	})
}
