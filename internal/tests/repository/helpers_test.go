package repository_test

import (
	"context"
	"testing"

	"github.com/gormlock/gormlock/internal/tests/fixtures"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/repository"
)

func repos(t *testing.T, db *gorm.DB) (*repository.Repository[fixtures.Account], *repository.Repository[fixtures.Document]) {
	t.Helper()
	accounts, err := repository.New[fixtures.Account](db)
	require.NoError(t, err)
	docs, err := repository.New[fixtures.Document](db)
	require.NoError(t, err)
	return accounts, docs
}

func newAccount(t *testing.T, accounts *repository.Repository[fixtures.Account], owner string, balance int64) *fixtures.Account {
	t.Helper()
	a := &fixtures.Account{Owner: owner, Balance: balance}
	require.NoError(t, accounts.Create(context.Background(), a))
	return a
}

// rawAccount reads the row with plain SQL, bypassing the repository.
func rawAccount(t *testing.T, db *gorm.DB, id int64) (balance, version int64, found bool) {
	t.Helper()
	var row struct {
		Balance int64
		Version int64
	}
	res := db.Raw("SELECT balance, version FROM accounts WHERE id = ?", id).Scan(&row)
	require.NoError(t, res.Error)
	return row.Balance, row.Version, res.RowsAffected == 1
}

// requireRow checks, with plain SQL, that account id exists with the given
// balance and version.
func requireRow(t *testing.T, db *gorm.DB, id, balance, version int64, msg ...any) {
	t.Helper()
	gotBalance, gotVersion, found := rawAccount(t, db, id)
	require.True(t, found, msg...)
	require.Equal(t, balance, gotBalance, msg...)
	require.Equal(t, version, gotVersion, msg...)
}
