package repository

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gormlock/gormlock/internal/testdb"
	"github.com/gormlock/gormlock/models"
)

// The guarded statements are built once, quoted, with the dialect's
// placeholders, and write every updatable column.
func TestGuardedSQL(t *testing.T) {
	want := map[string][3]string{
		"sqlite": {
			"UPDATE `accounts` SET `owner` = ?, `balance` = ?, `frozen` = ?, `version` = ?, `updated_at` = ? WHERE `id` = ? AND `version` = ?",
			"DELETE FROM `accounts` WHERE `id` = ? AND `version` = ?",
			"SELECT `version` FROM `accounts` WHERE `id` = ?",
		},
		"postgres": {
			`UPDATE "accounts" SET "owner" = $1, "balance" = $2, "frozen" = $3, "version" = $4, "updated_at" = $5 WHERE "id" = $6 AND "version" = $7`,
			`DELETE FROM "accounts" WHERE "id" = $1 AND "version" = $2`,
			`SELECT "version" FROM "accounts" WHERE "id" = $1`,
		},
	}
	for _, d := range testdb.Dialects {
		t.Run(d, func(t *testing.T) {
			r, err := New[models.Account](testdb.Open(t, d))
			require.NoError(t, err)
			require.Equal(t, want[d], [3]string{r.m.updateSQL, r.m.deleteSQL, r.m.versionSQL})
		})
	}
}
