package migrations_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/migrations"
)

func TestScripts(t *testing.T) {
	for _, dialect := range []string{"sqlite", "postgres", "mysql"} {
		t.Run(dialect, func(t *testing.T) {
			scripts, err := migrations.Scripts(dialect)
			require.NoError(t, err)
			require.Len(t, scripts, latest)
			for i, want := range []struct {
				name, table string
				up          int
			}{{"leases", "gormlock_leases", 3}, {"operations", "gormlock_operations", 2}} {
				s := scripts[i]
				assert.Equal(t, int64(i+1), s.Version)
				assert.Equal(t, want.name, s.Name)
				assert.True(t, strings.HasPrefix(s.Up, "-- "), "Up starts with the migration's comment")
				assert.NotContains(t, s.Up+s.Down, "+goose")
				assert.Contains(t, s.Up, "CREATE TABLE "+want.table+" (")
				assert.Len(t, s.UpStatements(), want.up)
				assert.Equal(t, []string{"DROP TABLE " + want.table}, s.DownStatements())
				for _, st := range s.UpStatements() {
					assert.NotContains(t, st, "--")
					assert.False(t, strings.HasSuffix(st, ";"))
				}
			}
		})
	}
}

// UpStatements and DownStatements split at the semicolons that end
// statements, and drop comments, but keep what is quoted.
func TestStatements(t *testing.T) {
	s := migrations.Script{
		Up: `-- a comment; with a semicolon
CREATE TABLE t (a TEXT DEFAULT 'x;y', b TEXT DEFAULT 'it''s -- no comment'); -- trailing
/* block; comment */ INSERT INTO "odd;name" VALUES ('/* not a comment */');

;  `,
		Down: "-- only a comment\n",
	}
	assert.Equal(t, []string{
		"CREATE TABLE t (a TEXT DEFAULT 'x;y', b TEXT DEFAULT 'it''s -- no comment')",
		`INSERT INTO "odd;name" VALUES ('/* not a comment */')`,
	}, s.UpStatements())
	assert.Empty(t, s.DownStatements())
	assert.Equal(t, []string{"DROP TABLE t"}, migrations.Script{Down: "DROP TABLE t; -- gone\n"}.DownStatements())
}

// column is one column as the database itself describes it.
type column struct {
	Name, Type, Default string
	NotNull             bool
	PK                  int
}

// describeTable returns table's columns and indexes, from SQLite's pragmas
// or PostgreSQL's or MySQL's catalog, which report what the database holds
// whatever text created it.
func describeTable(t *testing.T, db *gorm.DB, table string) (cols []column, indexes []string) {
	t.Helper()
	switch db.Dialector.Name() {
	case "mysql":
		require.NoError(t, db.Raw(`SELECT column_name AS name, column_type AS type, COALESCE(column_default, '') AS `+"`default`"+`,
			is_nullable = 'NO' AS not_null,
			COALESCE((SELECT k.ordinal_position FROM information_schema.key_column_usage k
				WHERE k.table_schema = c.table_schema AND k.table_name = c.table_name
				AND k.constraint_name = 'PRIMARY' AND k.column_name = c.column_name), 0) AS pk
			FROM information_schema.columns c WHERE table_schema = DATABASE() AND table_name = ? ORDER BY ordinal_position`, table).Scan(&cols).Error)
		require.NoError(t, db.Raw(`SELECT CONCAT(index_name, ' ', non_unique, ' ', GROUP_CONCAT(column_name ORDER BY seq_in_index))
			FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name = ?
			GROUP BY index_name, non_unique ORDER BY index_name`, table).Scan(&indexes).Error)
		var checks []string
		require.NoError(t, db.Raw(`SELECT CONCAT(cc.constraint_name, ' ', cc.check_clause)
			FROM information_schema.check_constraints cc JOIN information_schema.table_constraints tc
			ON tc.constraint_schema = cc.constraint_schema AND tc.constraint_name = cc.constraint_name
			WHERE tc.table_schema = DATABASE() AND tc.table_name = ? AND tc.constraint_type = 'CHECK' ORDER BY 1`, table).Scan(&checks).Error)
		var options []string
		require.NoError(t, db.Raw(`SELECT CONCAT(engine, ' ', row_format, ' ', table_collation) FROM information_schema.tables
			WHERE table_schema = DATABASE() AND table_name = ?`, table).Scan(&options).Error)
		indexes = append(append(indexes, checks...), options...)
	case "sqlite":
		require.NoError(t, db.Raw(`SELECT name, type, COALESCE(dflt_value, '') AS "default", "notnull" AS not_null, pk
			FROM pragma_table_info(?) ORDER BY cid`, table).Scan(&cols).Error)
		require.NoError(t, db.Raw(`SELECT il.name || ' ' || il."unique" || ' ' || il.origin || ' ' || group_concat(ii.name, ',')
			FROM pragma_index_list(?) AS il, pragma_index_info(il.name) AS ii
			GROUP BY il.name ORDER BY il.name`, table).Scan(&indexes).Error)
	default:
		require.NoError(t, db.Raw(`SELECT column_name AS name, data_type AS type, COALESCE(column_default, '') AS "default",
			is_nullable = 'NO' AS not_null,
			COALESCE((SELECT k.ordinal_position FROM information_schema.table_constraints tc
				JOIN information_schema.key_column_usage k ON k.constraint_name = tc.constraint_name AND k.table_schema = tc.table_schema
				WHERE tc.table_schema = c.table_schema AND tc.table_name = c.table_name AND tc.constraint_type = 'PRIMARY KEY'
				AND k.column_name = c.column_name), 0) AS pk
			FROM information_schema.columns c WHERE table_schema = current_schema() AND table_name = ? ORDER BY ordinal_position`, table).Scan(&cols).Error)
		require.NoError(t, db.Raw(`SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() AND tablename = ? ORDER BY indexname`,
			table).Scan(&indexes).Error)
		for i, def := range indexes { // the schema's name differs between databases
			indexes[i] = strings.ReplaceAll(def, " "+currentSchema(t, db)+".", " ")
		}
		var checks []string
		require.NoError(t, db.Raw(`SELECT pg_get_constraintdef(oid) FROM pg_constraint
			WHERE conrelid = to_regclass(?) ORDER BY 1`, table).Scan(&checks).Error)
		indexes = append(indexes, checks...)
	}
	require.NotEmpty(t, cols, "table %s exists", table)
	return cols, indexes
}

func currentSchema(t *testing.T, db *gorm.DB) string {
	var s string
	require.NoError(t, db.Raw(`SELECT current_schema()`).Scan(&s).Error)
	return s
}

// The SQL for other tools, run statement by statement on an empty
// database, gives the tables Up gives, and its Down removes them.
func TestScriptsGiveTheTablesUpGives(t *testing.T) {
	for _, e := range empties {
		t.Run(e.name, func(t *testing.T) {
			byUp, byHand := e.open(t), e.open(t)
			dialect := byUp.Dialector.Name()
			require.NoError(t, migrations.Up(context.Background(), byUp))
			scripts, err := migrations.Scripts(dialect)
			require.NoError(t, err)
			for _, s := range scripts {
				for _, st := range s.UpStatements() {
					require.NoError(t, byHand.Exec(st).Error, st)
				}
			}
			for _, table := range ownTables {
				upCols, upIndexes := describeTable(t, byUp, table)
				handCols, handIndexes := describeTable(t, byHand, table)
				assert.Equal(t, upCols, handCols, table)
				assert.Equal(t, upIndexes, handIndexes, table)
			}
			if dialect == "sqlite" {
				// SQLite keeps CHECK constraints only in the CREATE TABLE
				// text: compare that text without comments or layout.
				for _, table := range ownTables {
					assert.Equal(t, createText(t, byUp, table), createText(t, byHand, table))
				}
			}
			for i := len(scripts) - 1; i >= 0; i-- {
				for _, st := range scripts[i].DownStatements() {
					require.NoError(t, byHand.Exec(st).Error, st)
				}
			}
			requireTables(t, byHand, ownTables, false)
		})
	}
}

// createText returns the CREATE TABLE statement SQLite stored for table,
// without comments and with single spaces.
func createText(t *testing.T, db *gorm.DB, table string) string {
	t.Helper()
	var text string
	require.NoError(t, db.Raw(`SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?`, table).Scan(&text).Error)
	stmts := migrations.Script{Up: text}.UpStatements()
	require.Len(t, stmts, 1)
	return strings.Join(strings.Fields(stmts[0]), " ")
}

// An application that uses golang-migrate writes each script to a pair
// of files, numbered in its own sequence.
func ExampleScripts() {
	scripts, err := migrations.Scripts("postgres")
	if err != nil {
		panic(err)
	}
	next := 7 // the application's next migration number
	for _, s := range scripts {
		base := fmt.Sprintf("%06d_gormlock_%s", next, s.Name)
		next++
		// os.WriteFile(filepath.Join("db/migrations", base+".up.sql"), []byte(s.Up), 0o644) ...
		fmt.Printf("%s.up.sql: %d statements\n", base, len(s.UpStatements()))
		fmt.Printf("%s.down.sql: %s\n", base, strings.TrimSpace(s.Down))
	}
	// Output:
	// 000007_gormlock_leases.up.sql: 3 statements
	// 000007_gormlock_leases.down.sql: DROP TABLE gormlock_leases;
	// 000008_gormlock_operations.up.sql: 2 statements
	// 000008_gormlock_operations.down.sql: DROP TABLE gormlock_operations;
}
