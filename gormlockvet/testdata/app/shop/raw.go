package shop

import (
	"context"
	"database/sql"

	"gorm.io/gorm"
)

const chargeSQL = "UPDATE tokens SET remain_quota = remain_quota - ? WHERE id = ?"

func raw(ctx context.Context, db *gorm.DB, sqlDB *sql.DB, tx *sql.Tx, id uint) {
	db.Exec("UPDATE tokens SET name = ? WHERE id = ?", "x", id)                           // want `unguarded raw SQL UPDATE of versioned model model.Token \(table tokens\) through Exec: no condition on its version column \(version\) in its WHERE guards it`
	db.Exec(chargeSQL, 5, id)                                                             // want `unguarded raw SQL UPDATE of versioned model model.Token`
	db.Exec("DELETE FROM `accounts` WHERE id = ?", id)                                    // want `unguarded raw SQL DELETE of versioned model model.Account`
	db.Raw("UPDATE docs SET title = ? WHERE id = ? RETURNING *", "t", id)                 // want `unguarded raw SQL UPDATE of versioned model model.Doc`
	db.Exec("UPDATE custom_things SET n = n + 1, version = version + 1 WHERE id = ?", id) // want `unguarded raw SQL UPDATE of versioned model model.Custom .*it advances the version but checks none`
	sqlDB.ExecContext(ctx, "UPDATE taggeds SET n = 1 WHERE id = $1", id)                  // want `unguarded raw SQL UPDATE of versioned model model.Tagged`
	tx.Exec("update plains set n = 1 where id = ? or version = ?", id, 2)                 // want `unguarded raw SQL UPDATE of versioned model model.Plain`
	sqlDB.PrepareContext(ctx, "DELETE FROM tokens WHERE id = ?")                          // want `unguarded raw SQL DELETE of versioned model model.Token`
	q := "UPDATE accounts SET balance = 0"
	db.Exec(q+" WHERE id = ?", id) // want `unguarded raw SQL UPDATE of versioned model model.Account`

	db.Exec("UPDATE tokens SET name = ? WHERE id = ? AND version = ?", "x", id, 3)
	sqlDB.Exec("DELETE FROM accounts WHERE id = $1 AND version = $2", id, 3)
	db.Exec("UPDATE taggeds SET n = 1 WHERE id = ? AND rev = ?", id, 3)
}
