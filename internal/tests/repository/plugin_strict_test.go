package repository_test

import (
	"database/sql"
	"testing"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

// strictToken has the columns the hostile conditions name: a note that
// may say "version", and a column whose name holds the word.
type strictToken struct {
	ID        int64  `gorm:"column:id;primaryKey;autoIncrement"`
	Note      string `gorm:"column:note;size:100"`
	MyVersion int64  `gorm:"column:myversion;not null"`
	Balance   int64  `gorm:"column:balance;not null"`
	Version   int64  `gorm:"column:version;not null;default:1"`
}

func (strictToken) TableName() string { return "strict_tokens" }

// strictWrite is one plain GORM write of the token tok, the row as it is.
type strictWrite func(db *gorm.DB, tok strictToken) *gorm.DB

// unguardedWrites are writes no version guards, however much their
// conditions say "version"; writes is whether one runs (and writes the
// row) when nothing refuses it: the negative control.
var unguardedWrites = []struct {
	name   string
	writes bool
	write  strictWrite
}{
	{"version = ? OR id = ?", true, func(db *gorm.DB, tok strictToken) *gorm.DB {
		return db.Model(&strictToken{}).Where("version = ?", -1).Or("id = ?", tok.ID).Update("balance", 777)
	}},
	{"id = ? OR version = ? in one text", true, func(db *gorm.DB, tok strictToken) *gorm.DB {
		return db.Model(&strictToken{}).Where("id = ? OR version = ?", tok.ID, -1).Update("balance", 777)
	}},
	{"OR on its own line", true, func(db *gorm.DB, tok strictToken) *gorm.DB {
		return db.Model(&strictToken{}).Where("version = ?\nor id = ?", -1, tok.ID).Update("balance", 777)
	}},
	{"AND then OR", true, func(db *gorm.DB, tok strictToken) *gorm.DB {
		return db.Model(&strictToken{}).Where("id = ? AND version = ? OR id = ?", tok.ID, -1, tok.ID).Update("balance", 777)
	}},
	{"Or of clause.Eq on the version", true, func(db *gorm.DB, tok strictToken) *gorm.DB {
		return db.Model(&strictToken{}).Where("id = ?", tok.ID).Or(clause.Eq{Column: "version", Value: -1}).Update("balance", 777)
	}},
	{"clause.OrConditions", true, func(db *gorm.DB, tok strictToken) *gorm.DB {
		return db.Model(&strictToken{}).Where(clause.Or(clause.Eq{Column: "version", Value: -1}, clause.Eq{Column: "id", Value: tok.ID})).Update("balance", 777)
	}},
	{"the word in a string literal", true, func(db *gorm.DB, tok strictToken) *gorm.DB {
		return db.Model(&strictToken{}).Where("note <> 'version'").Where("id = ?", tok.ID).Update("balance", 777)
	}},
	{"the word in a comment", true, func(db *gorm.DB, tok strictToken) *gorm.DB {
		return db.Model(&strictToken{}).Where("id = ? /* AND version = 1 */", tok.ID).Update("balance", 777)
	}},
	{"a line comment", false, func(db *gorm.DB, tok strictToken) *gorm.DB {
		return db.Model(&strictToken{}).Where("version = ? -- AND id = 0\n", tok.Version).Or("id = ?", tok.ID).Update("balance", 777)
	}},
	{"a column whose name holds the word", true, func(db *gorm.DB, tok strictToken) *gorm.DB {
		return db.Model(&strictToken{}).Where("myversion = ?", 0).Where("id = ?", tok.ID).Update("balance", 777)
	}},
	{"NOT (version = ?)", true, func(db *gorm.DB, tok strictToken) *gorm.DB {
		return db.Model(&strictToken{}).Where("NOT (version = ?)", -1).Where("id = ?", tok.ID).Update("balance", 777)
	}},
	{"Not of a map", true, func(db *gorm.DB, tok strictToken) *gorm.DB {
		return db.Model(&strictToken{}).Not(map[string]any{"version": -1}).Where("id = ?", tok.ID).Update("balance", 777)
	}},
	{"version <> ?", true, func(db *gorm.DB, tok strictToken) *gorm.DB {
		return db.Model(&strictToken{}).Where("version <> ? AND id = ?", -1, tok.ID).Update("balance", 777)
	}},
	{"version = version", true, func(db *gorm.DB, tok strictToken) *gorm.DB {
		return db.Model(&strictToken{}).Where("version = version AND id = ?", tok.ID).Update("balance", 777)
	}},
	{"a subquery in the text", true, func(db *gorm.DB, tok strictToken) *gorm.DB {
		return db.Model(&strictToken{}).Where("version = (SELECT MAX(version) FROM strict_tokens) AND id = ?", tok.ID).Update("balance", 777)
	}},
	{"a subquery as a value", true, func(db *gorm.DB, tok strictToken) *gorm.DB {
		sub := db.Session(&gorm.Session{NewDB: true}).Model(&strictToken{}).Select("MAX(version)")
		return db.Model(&strictToken{}).Where("version = (?)", sub).Where("id = ?", tok.ID).Update("balance", 777)
	}},
	{"another table's version", false, func(db *gorm.DB, tok strictToken) *gorm.DB {
		return db.Model(&strictToken{}).Where("id = ? AND other.version = ?", tok.ID, -1).Update("balance", 777)
	}},
	{"a list of versions", true, func(db *gorm.DB, tok strictToken) *gorm.DB {
		return db.Model(&strictToken{}).Where("id = ? AND version IN ?", tok.ID, []int64{tok.Version, tok.Version + 1, 1}).Update("balance", 777)
	}},
	{"Delete with an OR", true, func(db *gorm.DB, tok strictToken) *gorm.DB {
		return db.Where("version = ?", -1).Or("id = ?", tok.ID).Delete(&strictToken{})
	}},
	{"Delete with the word in a string", true, func(db *gorm.DB, tok strictToken) *gorm.DB {
		return db.Where("note <> 'version' AND id = ?", tok.ID).Delete(&strictToken{})
	}},
}

// strictRow reads the token with plain SQL.
func strictRow(t *testing.T, db *gorm.DB, id int64) (row strictToken, found bool) {
	t.Helper()
	res := db.Raw("SELECT * FROM strict_tokens WHERE id = ?", id).Scan(&row)
	require.NoError(t, res.Error)
	return row, res.RowsAffected == 1
}

// TestPluginStrictDecidesFromStructure: StrictGORMWrites refuses every
// write whose WHERE does not guard it by the version, however the word
// "version" appears in it, and the row is unchanged. The negative control
// runs the same writes through the plugin without strict mode: each one
// writes the row (but the one with a line comment, and the one naming a
// table the statement does not have, which the database refuses).
func TestPluginStrictDecidesFromStructure(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		require.NoError(t, db.AutoMigrate(&strictToken{}))
		plain := db.Session(&gorm.Session{NewDB: true})
		strict := testdb.Open(t, testdbName(db))
		require.NoError(t, strict.AutoMigrate(&strictToken{}))
		require.NoError(t, db.Use(repository.Plugin()))
		require.NoError(t, strict.Use(repository.Plugin(repository.StrictGORMWrites(true))))
		ctx := testdb.Ctx(t)
		for _, c := range unguardedWrites {
			t.Run(c.name, func(t *testing.T) {
				tok := strictToken{Note: "n", Balance: 5}
				require.NoError(t, mustRepo[strictToken](t, strict).Create(ctx, &tok))
				before, _ := strictRow(t, strict, tok.ID)
				res := c.write(strict, tok)
				require.ErrorIs(t, res.Error, locking.ErrUnguardedWrite)
				require.ErrorContains(t, res.Error, "plugin_strict_test.go:")
				after, found := strictRow(t, strict, tok.ID)
				require.True(t, found)
				require.Equal(t, before, after, "nothing written")

				ctl := strictToken{Note: "n", Balance: 5}
				require.NoError(t, mustRepo[strictToken](t, plain).Create(ctx, &ctl))
				res = c.write(db, ctl)
				if !c.writes {
					return
				}
				require.NoError(t, res.Error, "the negative control")
				require.Equal(t, int64(1), res.RowsAffected, "the negative control writes the row")
			})
		}
	})
}

// TestPluginStrictPassesGenuineGuards: an equality on the model's version
// column joined by AND, in every form GORM writes one, passes strict mode,
// and guards: the write of the version read passes, the same write again
// (the version has moved on) matches no row.
func TestPluginStrictPassesGenuineGuards(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		require.NoError(t, db.AutoMigrate(&strictToken{}))
		require.NoError(t, db.Use(repository.Plugin(repository.StrictGORMWrites(true))))
		ctx := testdb.Ctx(t)
		quoted := "`version` = ?"
		if db.Dialector.Name() == "postgres" {
			quoted = `"version" = ?`
		}
		guards := map[string]strictWrite{
			"Where text": func(db *gorm.DB, tok strictToken) *gorm.DB {
				return db.Model(&strictToken{}).Where("version = ?", tok.Version).Where("id = ?", tok.ID).Update("balance", 777)
			},
			"one text with AND": func(db *gorm.DB, tok strictToken) *gorm.DB {
				return db.Model(&strictToken{}).Where("id = ? AND version = ?", tok.ID, tok.Version).Update("balance", 777)
			},
			"a group with AND": func(db *gorm.DB, tok strictToken) *gorm.DB {
				return db.Model(&strictToken{}).Where("id = ? AND (version = ? AND note = ?)", tok.ID, tok.Version, "n").Update("balance", 777)
			},
			"the word in a string beside a guard": func(db *gorm.DB, tok strictToken) *gorm.DB {
				return db.Model(&strictToken{}).Where("note <> 'version' AND version = ?", tok.Version).Where("id = ?", tok.ID).Update("balance", 777)
			},
			"quoted": func(db *gorm.DB, tok strictToken) *gorm.DB {
				return db.Model(&strictToken{}).Where(quoted, tok.Version).Where("id = ?", tok.ID).Update("balance", 777)
			},
			"table-qualified": func(db *gorm.DB, tok strictToken) *gorm.DB {
				return db.Model(&strictToken{}).Where("strict_tokens.version = ? AND id = ?", tok.Version, tok.ID).Update("balance", 777)
			},
			"clause.Eq": func(db *gorm.DB, tok strictToken) *gorm.DB {
				return db.Model(&strictToken{}).Where(clause.Eq{Column: "version", Value: tok.Version}).Where("id = ?", tok.ID).Update("balance", 777)
			},
			"clause.Eq of a column": func(db *gorm.DB, tok strictToken) *gorm.DB {
				col := clause.Column{Table: clause.CurrentTable, Name: "version"}
				return db.Model(&strictToken{}).Where(clause.Eq{Column: col, Value: tok.Version}).Where("id = ?", tok.ID).Update("balance", 777)
			},
			"a map": func(db *gorm.DB, tok strictToken) *gorm.DB {
				return db.Model(&strictToken{}).Where(map[string]any{"version": tok.Version, "id": tok.ID}).Update("balance", 777)
			},
			"a struct": func(db *gorm.DB, tok strictToken) *gorm.DB {
				return db.Model(&strictToken{}).Where(&strictToken{ID: tok.ID, Version: tok.Version}).Update("balance", 777)
			},
			"named arguments": func(db *gorm.DB, tok strictToken) *gorm.DB {
				return db.Model(&strictToken{}).Where("id = @id AND version = @v", sql.Named("id", tok.ID), sql.Named("v", tok.Version)).Update("balance", 777)
			},
			"Delete": func(db *gorm.DB, tok strictToken) *gorm.DB {
				return db.Where("version = ?", tok.Version).Delete(&strictToken{}, tok.ID)
			},
		}
		if db.Dialector.Name() != "mysql" { // MySQL reads "version" as a string
			guards["double-quoted"] = func(db *gorm.DB, tok strictToken) *gorm.DB {
				return db.Model(&strictToken{}).Where(`"strict_tokens"."version" = ? AND id = ?`, tok.Version, tok.ID).Update("balance", 777)
			}
		}
		for name, write := range guards {
			t.Run(name, func(t *testing.T) {
				tok := strictToken{Note: "n", Balance: 5}
				require.NoError(t, mustRepo[strictToken](t, db).Create(ctx, &tok))
				res := write(db, tok)
				require.NoError(t, res.Error)
				require.Equal(t, int64(1), res.RowsAffected)
				after, found := strictRow(t, db, tok.ID)
				if name == "Delete" {
					require.False(t, found)
					return
				}
				require.Equal(t, int64(777), after.Balance)
				require.Greater(t, after.Version, tok.Version)
				res = write(db, tok) // the version read is stale now
				require.NoError(t, res.Error)
				require.Equal(t, int64(0), res.RowsAffected, "the guard holds")
			})
		}
	})
}

// TestPluginGuardHoldsWhateverTheCondition: GuardGORMUpdates adds its
// guard so that the caller's condition cannot undo it: an OR that GORM
// does not see (on its own line) is put in parentheses, and a condition
// that would reach past them is refused, strict mode or not.
func TestPluginGuardHoldsWhateverTheCondition(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		require.NoError(t, db.AutoMigrate(&strictToken{}))
		require.NoError(t, db.Use(repository.Plugin(repository.GuardGORMUpdates())))
		ctx := testdb.Ctx(t)
		tokens := mustRepo[strictToken](t, db)
		tok := &strictToken{Note: "n", Balance: 5}
		require.NoError(t, tokens.Create(ctx, tok))
		stale := *tok
		tok.Balance = 6
		require.NoError(t, tokens.Update(ctx, tok))

		err := db.Model(&stale).Where("id = ?\nOR note = ?", stale.ID, "n").Update("balance", 777).Error
		require.ErrorIs(t, err, locking.ErrStaleData, "the OR is inside the guard")
		row, _ := strictRow(t, db, tok.ID)
		require.Equal(t, int64(6), row.Balance)

		err = db.Model(&stale).Where("id = ?) OR (1 = 1", stale.ID).Update("balance", 777).Error
		require.ErrorIs(t, err, locking.ErrUnguardedWrite, "a condition that reaches past the parentheses")
		require.ErrorContains(t, err, "GuardGORMUpdates")
		row, _ = strictRow(t, db, tok.ID)
		require.Equal(t, int64(6), row.Balance)

		cur := *tok
		require.NoError(t, db.Model(&cur).Where("id = ?\nOR note = ?", cur.ID, "n").Update("balance", 8).Error, "the guard passes the version read")
		row, _ = strictRow(t, db, tok.ID)
		require.Equal(t, int64(8), row.Balance)
		require.Equal(t, row.Version, cur.Version)
	})
}
