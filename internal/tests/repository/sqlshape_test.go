package repository_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/repository"
)

// sqlRecorder is a GORM logger that keeps the text of every statement as it
// was sent, with its placeholders: gormlock hands it to a logger's
// ParamsFilter before the arguments are written in.
type sqlRecorder struct {
	logger.Interface
	mu   sync.Mutex
	sent []string
}

func (l *sqlRecorder) LogMode(logger.LogLevel) logger.Interface { return l }

func (l *sqlRecorder) Trace(_ context.Context, _ time.Time, fc func() (string, int64), _ error) {
	fc()
}

func (l *sqlRecorder) ParamsFilter(_ context.Context, sql string, params ...any) (string, []any) {
	l.mu.Lock()
	l.sent = append(l.sent, sql)
	l.mu.Unlock()
	return sql, params
}

// take returns the statements recorded since the last call.
func (l *sqlRecorder) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.sent
	l.sent = nil
	return out
}

// The guarded statements are quoted, use the dialect's placeholders and
// write every updatable column; outside a transaction with a deadline,
// PostgreSQL's writes bound their own lock wait (one more parameter, last),
// and MariaDB's are bounded by a prefix.
func TestGuardedSQL(t *testing.T) {
	want := map[string]map[string]string{
		"sqlite": {
			"update":  "UPDATE `accounts` SET `owner` = ?, `balance` = ?, `frozen` = ?, `version` = ?, `updated_at` = ? WHERE `id` = ? AND COALESCE(`version`, 0) = ?",
			"bump":    "UPDATE `accounts` SET `version` = ?, `updated_at` = ? WHERE `id` = ? AND COALESCE(`version`, 0) = ?",
			"stale":   "SELECT `id`, `version`, `created_at`, `updated_at`, `owner`, `balance`, `frozen` FROM `accounts` WHERE `id` = ?",
			"get":     "SELECT `id`, `version`, `created_at`, `updated_at`, `owner`, `balance`, `frozen` FROM `accounts` WHERE `id` = ?",
			"delete":  "DELETE FROM `accounts` WHERE `id` = ? AND COALESCE(`version`, 0) = ?",
			"bounded": "UPDATE `accounts` SET `owner` = ?, `balance` = ?, `frozen` = ?, `version` = ?, `updated_at` = ? WHERE `id` = ? AND COALESCE(`version`, 0) = ?",
		},
		"postgres": {
			"update":  `UPDATE "accounts" SET "owner" = $1, "balance" = $2, "frozen" = $3, "version" = GREATEST($4, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT), "updated_at" = $5 WHERE "id" = $6 AND COALESCE("version", 0) = $7 RETURNING "version"`,
			"bump":    `UPDATE "accounts" SET "version" = GREATEST($1, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT), "updated_at" = $2 WHERE "id" = $3 AND COALESCE("version", 0) = $4 RETURNING "version"`,
			"stale":   `SELECT "id", "version", "created_at", "updated_at", "owner", "balance", "frozen" FROM "accounts" WHERE "id" = $1`,
			"get":     `SELECT "id", "version", "created_at", "updated_at", "owner", "balance", "frozen" FROM "accounts" WHERE "id" = $1`,
			"delete":  `DELETE FROM "accounts" WHERE "id" = $1 AND COALESCE("version", 0) = $2`,
			"bounded": `UPDATE "accounts" SET "owner" = $1, "balance" = $2, "frozen" = $3, "version" = GREATEST($4, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT), "updated_at" = $5 WHERE "id" = $6 AND COALESCE("version", 0) = $7 AND (SELECT set_config('lock_timeout', $8, true)) IS NOT NULL RETURNING "version"`,
		},
		"mariadb": {
			"update":  "UPDATE `accounts` SET `owner` = ?, `balance` = ?, `frozen` = ?, `version` = LAST_INSERT_ID(GREATEST(?, (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', SYSDATE(6)) - TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), CURRENT_TIMESTAMP(6))))), `updated_at` = ? WHERE `id` = ? AND COALESCE(`version`, 0) = ?",
			"bump":    "UPDATE `accounts` SET `version` = LAST_INSERT_ID(GREATEST(?, (TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', SYSDATE(6)) - TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), CURRENT_TIMESTAMP(6))))), `updated_at` = ? WHERE `id` = ? AND COALESCE(`version`, 0) = ?",
			"stale":   "SELECT `id`, `version`, `created_at`, `updated_at`, `owner`, `balance`, `frozen` FROM `accounts` WHERE `id` = ?",
			"get":     "SELECT `id`, `version`, `created_at`, `updated_at`, `owner`, `balance`, `frozen` FROM `accounts` WHERE `id` = ?",
			"delete":  "DELETE FROM `accounts` WHERE `id` = ? AND COALESCE(`version`, 0) = ?",
			"bounded": "SET STATEMENT max_statement_time=",
		},
	}
	for _, d := range testdb.Dialects {
		t.Run(d, func(t *testing.T) {
			rec := &sqlRecorder{Interface: logger.Discard}
			db := testdb.Open(t, d).Session(&gorm.Session{Logger: rec})
			accounts, err := repository.New[fixtures.Account](db, repository.WithCallbacks(false))
			require.NoError(t, err)
			ctx := context.Background()
			a := &fixtures.Account{Owner: "ann", Balance: 1}
			require.NoError(t, accounts.Create(ctx, a))
			rec.take()
			w := want[d]

			a.Balance++
			require.NoError(t, accounts.Update(ctx, a))
			require.Equal(t, []string{w["update"]}, rec.take(), "Update")

			require.NoError(t, accounts.ForceIncrement(ctx, a))
			require.Equal(t, []string{w["bump"]}, rec.take(), "ForceIncrement")

			stale := *a
			stale.Version--
			require.Error(t, accounts.Update(ctx, &stale))
			// One read, only because the write was stale: the whole record,
			// which the error carries (repository.StaleError).
			require.Equal(t, []string{w["update"], w["stale"]}, rec.take(), "a stale Update, then the check of why")

			_, err = accounts.Get(ctx, a.ID)
			require.NoError(t, err)
			require.Equal(t, []string{w["get"]}, rec.take(), "Get")

			deadline, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			a.Balance++
			require.NoError(t, accounts.Update(deadline, a))
			got := rec.take()
			require.Len(t, got, 1)
			if d == "mariadb" {
				require.True(t, strings.HasPrefix(got[0], w["bounded"]) && strings.HasSuffix(got[0], " FOR "+w["update"]),
					"a write with a deadline is bounded by a prefix: %s", got[0])
			} else {
				require.Equal(t, w["bounded"], got[0], "Update with a deadline")
			}

			require.NoError(t, accounts.Delete(ctx, a))
			require.Equal(t, []string{w["delete"]}, rec.take(), "Delete")
		})
	}
}

// Locked reads append the dialect's locking clause to Get's SELECT.
func TestLockedSelectSQL(t *testing.T) {
	for _, d := range []string{"postgres", "mariadb"} {
		t.Run(d, func(t *testing.T) {
			rec := &sqlRecorder{Interface: logger.Discard}
			db := testdb.Open(t, d).Session(&gorm.Session{Logger: rec})
			accounts, err := repository.New[fixtures.Account](db, repository.WithCallbacks(false))
			require.NoError(t, err)
			ctx := context.Background()
			a := &fixtures.Account{Owner: "ann"}
			require.NoError(t, accounts.Create(ctx, a))
			share := map[string]string{"postgres": " FOR SHARE", "mariadb": " LOCK IN SHARE MODE"}[d]
			for _, tc := range []struct {
				opts   []repository.LockOption
				suffix string
			}{
				{nil, " FOR UPDATE"},
				{[]repository.LockOption{repository.NoWait()}, " FOR UPDATE NOWAIT"},
				{[]repository.LockOption{repository.ForShare()}, share},
				{[]repository.LockOption{repository.ForShare(), repository.NoWait()}, share + " NOWAIT"},
			} {
				rec.take()
				require.NoError(t, repository.RunInTx(ctx, db, func(ctx context.Context) error {
					_, err := accounts.LockRow(ctx, a.ID, tc.opts...)
					return err
				}))
				var selects []string
				for _, q := range rec.take() {
					if strings.HasPrefix(q, "SELECT `id`") || strings.HasPrefix(q, `SELECT "id"`) {
						selects = append(selects, q)
					}
				}
				require.Len(t, selects, 1)
				require.True(t, strings.HasSuffix(selects[0], tc.suffix), "%q ends with %q", selects[0], tc.suffix)
			}
		})
	}
}

// Get reads every kind of field as GORM's own scan would: plain fields held
// by value, pointers, Scanners, serializers, byte slices and fields of
// embedded structs, by value and by pointer.
func TestGetReadsEveryKindOfField(t *testing.T) {
	type Embedded struct{ Inner string }
	type model struct {
		ID    int64 `gorm:"primaryKey"`
		Name  string
		When  time.Time
		Ratio float64
		Note  *string
		Attrs fixtures.Attributes `gorm:"type:text"`
		Tags  []string            `gorm:"serializer:json"`
		Blob  []byte
		Embedded
		*models.Versioned `gorm:"embedded;embeddedPrefix:p_"`
	}
	db := testdb.Open(t, "sqlite")
	require.NoError(t, db.AutoMigrate(&model{}))
	r, err := repository.New[model](db)
	require.NoError(t, err)
	ctx := context.Background()
	note := "a note"
	in := &model{ID: 1, Name: "n", When: time.Date(2026, 11, 24, 10, 0, 0, 123000, time.UTC), Ratio: 0.5, Note: &note,
		Attrs: fixtures.Attributes{"k": "v"}, Tags: []string{"a", "b"}, Blob: []byte{0, 1, 2},
		Embedded: Embedded{Inner: "in"}, Versioned: &models.Versioned{}}
	require.NoError(t, r.Create(ctx, in))
	out, err := r.Get(ctx, int64(1))
	require.NoError(t, err)
	require.Equal(t, in.Name, out.Name)
	require.True(t, in.When.Equal(out.When))
	require.Equal(t, in.Ratio, out.Ratio)
	require.Equal(t, note, *out.Note)
	require.Equal(t, in.Attrs, out.Attrs)
	require.Equal(t, in.Tags, out.Tags)
	require.Equal(t, in.Blob, out.Blob)
	require.Equal(t, "in", out.Inner)
	require.NotNil(t, out.Versioned)
	require.Equal(t, in.Version, out.Version)

	// A NULL in a plain field reads as its zero value, as with GORM.
	require.NoError(t, db.Exec("UPDATE models SET name = NULL, ratio = NULL WHERE id = 1").Error)
	out, err = r.Get(ctx, int64(1))
	require.NoError(t, err)
	require.Equal(t, "", out.Name)
	require.Zero(t, out.Ratio)
}
