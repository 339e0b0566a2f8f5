package repository_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/repository"
)

// Update with Columns writes only the named fields (and the version and
// update time), guarded: a field another writer changed in the meantime
// keeps its value where a full Update would have written the entity's.
func TestUpdateWithColumnsWritesOnlyThem(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		accounts, _ := repos(t, db)
		a := newAccount(t, accounts, "ann", 10)

		// Another writer charges the balance through Apply; our copy
		// still has the old balance.
		charged, err := accounts.Apply(ctx, a.ID, []repository.Change{repository.Add("Balance", -3)})
		require.NoError(t, err)
		stale := *a

		// Renaming with the stale copy at its old version: stale, as
		// any guarded write.
		stale.Owner = "anne"
		require.ErrorIs(t, accounts.Update(ctx, &stale, repository.Columns("Owner")), locking.ErrStaleData)

		// Read again, rename, change the balance in memory too: only the
		// owner is written.
		cur, err := accounts.Get(ctx, a.ID)
		require.NoError(t, err)
		require.Equal(t, charged.Version, cur.Version)
		cur.Owner, cur.Balance, cur.Frozen = "anne", 999, true
		require.NoError(t, accounts.Update(ctx, cur, repository.Columns("owner"))) // a column name works too
		require.Greater(t, cur.Version, charged.Version)
		got, err := accounts.Get(ctx, a.ID)
		require.NoError(t, err)
		require.Equal(t, "anne", got.Owner)
		require.EqualValues(t, 7, got.Balance, "the balance was not written")
		require.False(t, got.Frozen, "frozen was not written")
		require.Equal(t, cur.Version, got.Version)
		require.True(t, got.UpdatedAt.After(a.UpdatedAt) || got.UpdatedAt.Equal(a.UpdatedAt))

		// Several columns, in any order; with an operation key.
		got.Owner, got.Frozen, got.Balance = "ann", true, 1
		key := repository.OpKey("columns-" + db.Dialector.Name())
		require.NoError(t, accounts.Update(ctx, got, repository.Columns("Frozen", "Owner"), key))
		again, err := accounts.Get(ctx, a.ID)
		require.NoError(t, err)
		require.Equal(t, "ann", again.Owner)
		require.True(t, again.Frozen)
		require.EqualValues(t, 7, again.Balance)

		// UpdateMany takes it too.
		b := newAccount(t, accounts, "bob", 20)
		again.Owner, b.Owner = "ann2", "bob2"
		again.Balance, b.Balance = 0, 0
		require.NoError(t, accounts.UpdateMany(ctx, []*fixtures.Account{again, b}, repository.Columns("Owner")))
		requireRow(t, db, a.ID, 7, again.Version)
		requireRow(t, db, b.ID, 20, b.Version)

		// Refused before any I/O.
		for _, cols := range [][]string{{}, {"Nope"}, {"ID"}, {"Version"}, {"CreatedAt"}, {"UpdatedAt"}, {"Owner", "owner"}} {
			e, err := accounts.Get(ctx, a.ID)
			require.NoError(t, err)
			require.ErrorIs(t, accounts.Update(ctx, e, repository.Columns(cols...)), locking.ErrInvalidArgument, "%v", cols)
		}
		requireRow(t, db, a.ID, 7, again.Version)
	})
}

// Columns with a model whose update hooks change a field: the hooks run,
// and only the named columns are written.
func TestUpdateWithColumnsRunsHooks(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		require.NoError(t, db.AutoMigrate(&hookedNote{}))
		notes, err := repository.New[hookedNote](db)
		require.NoError(t, err)
		n := &hookedNote{ID: "n1", Title: "a", Body: "b"}
		require.NoError(t, notes.Create(ctx, n))
		n.Title, n.Body = "title", "body"
		require.NoError(t, notes.Update(ctx, n, repository.Columns("Title")))
		var title, body string
		require.NoError(t, db.Raw("SELECT title, body FROM hooked_notes WHERE id = 'n1'").Row().Scan(&title, &body))
		require.Equal(t, "TITLE", title, "BeforeUpdate ran and its change to a named column was written")
		require.Equal(t, "b", body, "an unnamed column was not written")
	})
}

// hookedNote upper-cases its title before every update.
type hookedNote struct {
	ID    string `gorm:"primaryKey;size:64"`
	Title string `gorm:"size:100"`
	Body  string `gorm:"size:100"`
	models.Versioned
}

func (n *hookedNote) BeforeUpdate(*gorm.DB) error {
	n.Title = strings.ToUpper(n.Title)
	return nil
}
