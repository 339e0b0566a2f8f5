package repository_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/locking"
	sqliteopen "github.com/gormlock/gormlock/opendb/sqlite"
	"github.com/gormlock/gormlock/repository"
)

// A COMMIT that SQLite refuses — a deferred foreign key still violated —
// is a definite failure: nothing was committed, and the error says so (it
// does not match locking.ErrCommitUnknown) and keeps SQLite's constraint
// error, also when the application opened GORM with TranslateError, which
// turns a driver's error into GORM's own (gorm.ErrForeignKeyViolated): that
// translation lost the SQLite code, and the refused COMMIT was reported
// unknown.
func TestRefusedCommitIsDefinite(t *testing.T) {
	for _, translate := range []bool{false, true} {
		name := "driver errors"
		if translate {
			name = "TranslateError"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			db, err := sqliteopen.Open(filepath.Join(t.TempDir(), "fk.db"), &gorm.Config{TranslateError: translate})
			require.NoError(t, err)
			t.Cleanup(func() {
				if s, err := db.DB(); err == nil {
					_ = s.Close()
				}
			})
			require.NoError(t, db.Exec("CREATE TABLE parents (id INTEGER PRIMARY KEY)").Error)
			require.NoError(t, db.Exec("CREATE TABLE children (id INTEGER PRIMARY KEY, parent_id INTEGER NOT NULL "+
				"REFERENCES parents(id) DEFERRABLE INITIALLY DEFERRED)").Error)

			err = repository.RunInTx(ctx, db, func(ctx context.Context) error {
				// Accepted now; checked at COMMIT.
				return repository.Tx(ctx, db).Exec("INSERT INTO children (id, parent_id) VALUES (1, 99)").Error
			})
			require.Error(t, err)
			require.NotErrorIs(t, err, locking.ErrCommitUnknown, "SQLite refused the COMMIT: nothing was committed")
			require.Contains(t, err.Error(), "FOREIGN KEY constraint failed")

			var n int64
			require.NoError(t, db.Raw("SELECT COUNT(*) FROM children").Scan(&n).Error)
			require.Zero(t, n, "the refused transaction left no row")

			// The gate's connection is usable afterwards: a valid
			// transaction commits.
			require.NoError(t, repository.RunInTx(ctx, db, func(ctx context.Context) error {
				tx := repository.Tx(ctx, db)
				if err := tx.Exec("INSERT INTO parents (id) VALUES (99)").Error; err != nil {
					return err
				}
				return tx.Exec("INSERT INTO children (id, parent_id) VALUES (1, 99)").Error
			}))
			require.NoError(t, db.Raw("SELECT COUNT(*) FROM children").Scan(&n).Error)
			require.EqualValues(t, 1, n)
		})
	}
}
