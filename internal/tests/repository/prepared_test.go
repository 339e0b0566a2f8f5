package repository_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
)

// On a direct PostgreSQL connection opendb/postgres keeps pgx's cached
// prepared statements. When the server drops one under pgx (DEALLOCATE ALL
// on the session, as a pooler's DISCARD ALL does), pgx's next use of it
// fails with 26000 before anything ran; a gormlock write outside a
// transaction sends it again and succeeds, applied once. Negative control:
// a plain GORM statement with parameters on the same pool fails with 26000.
func TestPostgresRerunsAStatementWhosePreparedCopyIsGone(t *testing.T) {
	db := testdb.Open(t, "postgres")
	sqlDB, err := db.DB()
	require.NoError(t, err)
	sqlDB.SetMaxOpenConns(1) // one session: DEALLOCATE ALL reaches pgx's cache
	accounts, _ := repos(t, db)
	ctx := context.Background()
	a := newAccount(t, accounts, "ann", 10)

	deallocate := func() { require.NoError(t, db.Exec("DEALLOCATE ALL").Error) }
	for i := range 3 {
		a.Balance++
		require.NoError(t, accounts.Update(ctx, a), "update %d", i)
		deallocate()
	}
	requireRow(t, db, a.ID, 13, a.Version)

	var n int64
	require.NoError(t, db.Raw("SELECT balance FROM accounts WHERE id = ?", a.ID).Scan(&n).Error)
	deallocate()
	err = db.Raw("SELECT balance FROM accounts WHERE id = ?", a.ID).Scan(&n).Error
	require.Error(t, err, "negative control: plain GORM's cached statement is gone")
	require.Equal(t, "26000", locking.Code(err))
}
