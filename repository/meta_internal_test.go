package repository

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gormlock/gormlock/internal/testdb"
	"github.com/gormlock/gormlock/models"
)

// The guarded statements are built once, quoted, with the dialect's
// placeholders, and write every updatable column.
func TestGuardedSQL(t *testing.T) {
	want := map[string][6]string{
		"sqlite": {
			"UPDATE `accounts` SET `owner` = ?, `balance` = ?, `frozen` = ?, `version` = ?, `updated_at` = ? WHERE `id` = ? AND `version` = ?",
			"DELETE FROM `accounts` WHERE `id` = ? AND `version` = ?",
			"SELECT `version`, FALSE FROM `accounts` WHERE `id` = ?",
			"UPDATE `accounts` SET `version` = ?, `updated_at` = ? WHERE `id` = ? AND `version` = ?",
			"UPDATE `accounts` SET `version` = `version` WHERE 0 = 1",
			"SELECT `id`, `version`, `created_at`, `updated_at`, `owner`, `balance`, `frozen` FROM `accounts` WHERE `id` = ?",
		},
		"postgres": {
			`UPDATE "accounts" SET "owner" = $1, "balance" = $2, "frozen" = $3, "version" = GREATEST($4, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT), "updated_at" = $5 WHERE "id" = $6 AND "version" = $7 RETURNING "version"`,
			`DELETE FROM "accounts" WHERE "id" = $1 AND "version" = $2`,
			`SELECT "version", FALSE FROM "accounts" WHERE "id" = $1`,
			`UPDATE "accounts" SET "version" = GREATEST($1, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT), "updated_at" = $2 WHERE "id" = $3 AND "version" = $4 RETURNING "version"`,
			`UPDATE "accounts" SET "version" = "version" WHERE 0 = 1`,
			`SELECT "id", "version", "created_at", "updated_at", "owner", "balance", "frozen" FROM "accounts" WHERE "id" = $1`,
		},
		"mariadb": {
			"UPDATE `accounts` SET `owner` = ?, `balance` = ?, `frozen` = ?, `version` = LAST_INSERT_ID(GREATEST(?, CAST(UNIX_TIMESTAMP(SYSDATE(6)) * 1000000 AS SIGNED))), `updated_at` = ? WHERE `id` = ? AND `version` = ?",
			"DELETE FROM `accounts` WHERE `id` = ? AND `version` = ?",
			"SELECT `version`, FALSE FROM `accounts` WHERE `id` = ?",
			"UPDATE `accounts` SET `version` = LAST_INSERT_ID(GREATEST(?, CAST(UNIX_TIMESTAMP(SYSDATE(6)) * 1000000 AS SIGNED))), `updated_at` = ? WHERE `id` = ? AND `version` = ?",
			"UPDATE `accounts` SET `version` = `version` WHERE 0 = 1",
			"SELECT `id`, `version`, `created_at`, `updated_at`, `owner`, `balance`, `frozen` FROM `accounts` WHERE `id` = ?",
		},
	}
	wantDoc := map[string]string{
		"sqlite":   "UPDATE `documents` SET `title` = ?, `attrs` = ?, `version` = ?, `updated_at` = ? WHERE `id` = ? AND `version` = ?",
		"postgres": `UPDATE "documents" SET "title" = $1, "attrs" = $2, "version" = GREATEST($3, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT), "updated_at" = $4 WHERE "id" = $5 AND "version" = $6 RETURNING "version"`,
		"mariadb":  "UPDATE `documents` SET `title` = ?, `attrs` = ?, `version` = LAST_INSERT_ID(GREATEST(?, CAST(UNIX_TIMESTAMP(SYSDATE(6)) * 1000000 AS SIGNED))), `updated_at` = ? WHERE `id` = ? AND `version` = ?",
	}
	for _, d := range testdb.Dialects {
		t.Run(d, func(t *testing.T) {
			r, err := New[models.Account](testdb.Open(t, d))
			require.NoError(t, err)
			require.Equal(t, want[d], [6]string{r.m.update.text, r.m.delete.text, r.m.versionSQL, r.m.bump.text, r.m.writeLockSQL, r.m.selectSQL})
			// Outside a transaction with a deadline, PostgreSQL's writes bound
			// their own lock wait (one more parameter, last); MariaDB's are
			// bounded by a prefix (the statement as it is); SQLite waits in Go.
			bound := map[string][3]string{
				"sqlite":  {},
				"mariadb": {r.m.update.text, r.m.delete.text, r.m.bump.text},
				"postgres": {
					strings.TrimSuffix(r.m.update.text, ` RETURNING "version"`) + ` AND (SELECT set_config('lock_timeout', $8, true)) IS NOT NULL RETURNING "version"`,
					r.m.delete.text + ` AND (SELECT set_config('lock_timeout', $3, true)) IS NOT NULL`,
					strings.TrimSuffix(r.m.bump.text, ` RETURNING "version"`) + ` AND (SELECT set_config('lock_timeout', $5, true)) IS NOT NULL RETURNING "version"`,
				},
			}
			require.Equal(t, bound[d], [3]string{r.m.update.bounded, r.m.delete.bounded, r.m.bump.bounded})
			require.Equal(t, r.m.selectSQL+" FOR UPDATE", r.m.lockedSelect(lockConfig{}))
			require.Equal(t, r.m.selectSQL+" FOR UPDATE NOWAIT", r.m.lockedSelect(lockConfig{nowait: true}))
			share := map[string]string{"mariadb": " LOCK IN SHARE MODE"}[d]
			if share == "" {
				share = " FOR SHARE"
			}
			require.Equal(t, r.m.selectSQL+share, r.m.lockedSelect(lockConfig{shared: true}))
			require.Equal(t, r.m.selectSQL+share+" NOWAIT", r.m.lockedSelect(lockConfig{shared: true, nowait: true}))
			docs, err := New[models.Document](testdb.Open(t, d))
			require.NoError(t, err)
			require.Equal(t, wantDoc[d], docs.m.update.text)
		})
	}
}

// Get scans plain fields held by value straight into the struct, and every
// other field (pointers, Scanners, serializers, embedded pointers) GORM's way.
func TestDirectScanFields(t *testing.T) {
	type Embedded struct{ Inner string }
	type model struct {
		ID    int64 `gorm:"primaryKey"`
		Name  string
		When  time.Time
		Ratio float64
		Note  *string
		Attrs models.Attributes `gorm:"type:text"`
		Tags  []string          `gorm:"serializer:json"`
		Blob  []byte
		Embedded
		*models.Versioned `gorm:"embedded;embeddedPrefix:p_"`
	}
	r, err := New[model](testdb.Open(t, "sqlite"))
	require.NoError(t, err)
	direct := map[string]bool{}
	for i, f := range r.m.readCols {
		direct[f.DBName] = r.m.direct[i] != nil
	}
	require.Equal(t, map[string]bool{
		"id": true, "name": true, "when": true, "ratio": true, "inner": true,
		"note": false, "attrs": false, "tags": false, "blob": false,
		"p_created_at": false, "p_updated_at": false, "p_version": false,
	}, direct)
}

// keyString's shortcuts print what fmt.Sprint prints.
func TestKeyString(t *testing.T) {
	for _, id := range []any{"doc-1", "", int64(-42), int64(1 << 62), 7, int32(5), uint64(9), [2]byte{1, 2}} {
		require.Equal(t, fmt.Sprint(id), keyString(id), "%T", id)
	}
}

// Get reads with its own SELECT unless the model has an AfterFind hook or a
// read-only field, whose column may not exist.
func TestOwnSelect(t *testing.T) {
	type readOnly struct {
		ID    int64 `gorm:"primaryKey"`
		Total int64 `gorm:"->"`
		models.Versioned
	}
	db := testdb.Open(t, "sqlite")
	accounts, err := New[models.Account](db)
	require.NoError(t, err)
	require.True(t, accounts.m.ownSelect())
	require.NotEmpty(t, accounts.m.selectSQL)
	ro, err := New[readOnly](db)
	require.NoError(t, err)
	require.False(t, ro.m.ownSelect())
	require.Empty(t, ro.m.selectSQL)
}
