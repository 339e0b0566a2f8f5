package repository_test

// GORM's semantics that gormlock's own statements must keep, each checked
// against what plain GORM does with the same model and settings.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/repository"
)

type parityCompany struct {
	ID   int64  `gorm:"primaryKey"`
	Name string `gorm:"size:100"`
	models.Versioned
}

type parityProfile struct {
	ID     int64  `gorm:"primaryKey"`
	UserID int64  `gorm:"index"`
	Bio    string `gorm:"size:100"`
	models.Versioned
}

type parityUser struct {
	ID        int64  `gorm:"primaryKey"`
	Name      string `gorm:"size:100"`
	CompanyID int64
	Company   parityCompany // belongs to, left at its zero value
	Profile   parityProfile `gorm:"foreignKey:UserID"` // has one, left at its zero value
	models.Versioned
}

// Create leaves empty (zero-value) has-one and belongs-to fields alone, as
// GORM does: no phantom row, and the caller's foreign key kept.
func TestParityCreateLeavesEmptyAssociationsAlone(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		mdb := db.Session(&gorm.Session{})
		mdb.Config.DisableForeignKeyConstraintWhenMigrating = true
		require.NoError(t, mdb.AutoMigrate(&parityCompany{}, &parityProfile{}, &parityUser{}))
		companies, err := repository.New[parityCompany](db)
		require.NoError(t, err)
		acme := &parityCompany{ID: 7, Name: "acme"}
		require.NoError(t, companies.Create(ctx, acme))
		users, err := repository.New[parityUser](db)
		require.NoError(t, err)

		plain := &parityUser{ID: 1, Name: "gorm", CompanyID: acme.ID, Versioned: models.Versioned{Version: 1}}
		require.NoError(t, db.Create(plain).Error)
		ours := &parityUser{ID: 2, Name: "gormlock", CompanyID: acme.ID}
		require.NoError(t, users.Create(ctx, ours))

		var nCompanies, nProfiles int64
		require.NoError(t, db.Model(&parityCompany{}).Count(&nCompanies).Error)
		require.NoError(t, db.Model(&parityProfile{}).Count(&nProfiles).Error)
		require.EqualValues(t, 1, nCompanies, "no phantom company")
		require.Zero(t, nProfiles, "no phantom profile")
		require.Equal(t, acme.ID, plain.CompanyID)
		require.Equal(t, acme.ID, ours.CompanyID, "the foreign key the caller set is kept")
		got, err := users.Get(ctx, int64(2))
		require.NoError(t, err)
		require.Equal(t, acme.ID, got.CompanyID)
		require.Zero(t, ours.Company.Version, "the empty association was not given a version")
	})
}

// parityGuarded's hooks add a condition to the write, as applications do
// with tx.Statement.Where.
type parityGuarded struct {
	ID    int64  `gorm:"primaryKey"`
	Owner string `gorm:"size:100"`
	Name  string `gorm:"size:100"`
	models.Versioned
}

func (parityGuarded) BeforeUpdate(tx *gorm.DB) error {
	tx.Statement.Where("owner <> ?", "admin")
	return nil
}

func (parityGuarded) BeforeDelete(tx *gorm.DB) error {
	tx.Statement.Where("owner <> ?", "admin")
	return nil
}

// A condition a Before hook adds to the statement applies to gormlock's
// guarded write as it applies to GORM's: the admin's record is not written.
// GORM reports nothing (0 rows); gormlock reports ErrConditionFailed.
func TestParityHookConditionsApply(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		require.NoError(t, db.AutoMigrate(&parityGuarded{}))
		r, err := repository.New[parityGuarded](db)
		require.NoError(t, err)
		admin := &parityGuarded{ID: 1, Owner: "admin", Name: "a"}
		bob := &parityGuarded{ID: 2, Owner: "bob", Name: "b"}
		require.NoError(t, r.Create(ctx, admin))
		require.NoError(t, r.Create(ctx, bob))

		// Plain GORM: the admin's row matches nothing.
		res := db.Model(&parityGuarded{ID: 1}).Updates(parityGuarded{Name: "gorm"})
		require.NoError(t, res.Error)
		require.Zero(t, res.RowsAffected)

		admin.Name = "x"
		err = r.Update(ctx, admin)
		require.ErrorIs(t, err, locking.ErrConditionFailed)
		require.NotErrorIs(t, err, locking.ErrStaleData)
		bob.Name = "y"
		require.NoError(t, r.Update(ctx, bob))
		require.ErrorIs(t, r.Delete(ctx, admin), locking.ErrConditionFailed)

		var names []string
		require.NoError(t, db.Model(&parityGuarded{}).Order("id").Pluck("name", &names).Error)
		require.Equal(t, []string{"a", "y"}, names, "only bob's record was written")
		require.NoError(t, r.Delete(ctx, bob))
		var n int64
		require.NoError(t, db.Model(&parityGuarded{}).Count(&n).Error)
		require.EqualValues(t, 1, n)
	})
}

type parityParent struct {
	ID int64 `gorm:"primaryKey"`
	models.Versioned
	Email string `gorm:"size:100;uniqueIndex"`
}

type parityChild struct {
	ID       int64 `gorm:"primaryKey"`
	ParentID int64
	Parent   parityParent
	models.Versioned
}

// With gorm.Config{TranslateError: true}, Update's errors match GORM's
// translated ones, as Create's do and as GORM's own Updates do, and still
// match gormlock's.
func TestParityTranslateErrorOnUpdate(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		require.NoError(t, db.AutoMigrate(&parityParent{}, &parityChild{}))
		tdb := db.Session(&gorm.Session{})
		tdb.Config.TranslateError = true
		parents, err := repository.New[parityParent](tdb)
		require.NoError(t, err)
		children, err := repository.New[parityChild](tdb)
		require.NoError(t, err)
		p1 := &parityParent{ID: 1, Email: "one@example.com"}
		p2 := &parityParent{ID: 2, Email: "two@example.com"}
		require.NoError(t, parents.Create(ctx, p1))
		require.NoError(t, parents.Create(ctx, p2))
		c := &parityChild{ID: 1, ParentID: 1}
		require.NoError(t, children.Create(ctx, c))

		// GORM.
		err = tdb.Model(&parityParent{ID: 2}).Update("email", "one@example.com").Error
		require.ErrorIs(t, err, gorm.ErrDuplicatedKey)
		err = tdb.Model(&parityChild{ID: 1}).Update("parent_id", 99).Error
		require.ErrorIs(t, err, gorm.ErrForeignKeyViolated)

		// gormlock.
		p2.Email = "one@example.com"
		err = parents.Update(ctx, p2)
		require.ErrorIs(t, err, gorm.ErrDuplicatedKey)
		require.ErrorIs(t, err, locking.ErrAlreadyExists)
		c.ParentID = 99
		err = children.Update(ctx, c)
		require.ErrorIs(t, err, gorm.ErrForeignKeyViolated)
		// Create's, for comparison.
		err = parents.Create(ctx, &parityParent{ID: 3, Email: "two@example.com"})
		require.ErrorIs(t, err, gorm.ErrDuplicatedKey)
		require.ErrorIs(t, err, locking.ErrAlreadyExists)
		require.NotErrorIs(t, err, locking.ErrCommitUnknown)
		// A Create goes through GORM, which returns only its translation:
		// still gormlock's kind, and not applied.
		err = children.Create(ctx, &parityChild{ID: 2, ParentID: 77})
		require.ErrorIs(t, err, gorm.ErrForeignKeyViolated)
		require.ErrorIs(t, err, locking.ErrConstraintViolation)
		require.NotErrorIs(t, err, locking.ErrCommitUnknown)
		var n int64
		require.NoError(t, tdb.Model(&parityChild{}).Where("id = ?", 2).Count(&n).Error)
		require.Zero(t, n)
	})
}

// gormlock's creation, update and deletion times come from GORM's NowFunc,
// set in the config or in a session, as GORM's own do.
func TestParityNowFunc(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		require.NoError(t, db.AutoMigrate(&parityCompany{}))
		created := time.Date(2030, 1, 2, 3, 4, 5, 678000, time.UTC)
		updated := created.Add(time.Hour)
		clock := created

		// In the config.
		cdb := db.Session(&gorm.Session{})
		cdb.Config.NowFunc = func() time.Time { return clock }
		r, err := repository.New[parityCompany](cdb)
		require.NoError(t, err)
		e := &parityCompany{ID: 1, Name: "x"}
		require.NoError(t, r.Create(ctx, e))
		require.True(t, e.CreatedAt.Equal(created), "created %v", e.CreatedAt)
		require.True(t, e.UpdatedAt.Equal(created))
		clock = updated
		e.Name = "y"
		require.NoError(t, r.Update(ctx, e))
		require.True(t, e.UpdatedAt.Equal(updated), "updated %v", e.UpdatedAt)
		got, err := r.Get(ctx, int64(1))
		require.NoError(t, err)
		require.True(t, got.CreatedAt.Equal(created))
		require.True(t, got.UpdatedAt.Equal(updated))

		// In a transaction: RunInTx's, whose statements go through GORM
		// (Update reads nothing), and MutateRowLocked's, whose statements
		// are all gormlock's own.
		inTx := updated.Add(time.Hour)
		clock = inTx
		require.NoError(t, repository.RunInTx(ctx, cdb, func(ctx context.Context) error {
			e.Name = "in tx"
			return r.Update(ctx, e)
		}))
		require.True(t, e.UpdatedAt.Equal(inTx), "updated in RunInTx %v", e.UpdatedAt)
		locked := inTx.Add(time.Hour)
		clock = locked
		m, err := r.MutateRowLocked(ctx, int64(1), func(c *parityCompany) error { c.Name = "locked"; return nil })
		require.NoError(t, err)
		require.True(t, m.UpdatedAt.Equal(locked), "updated in MutateRowLocked %v", m.UpdatedAt)
		got, err = r.Get(ctx, int64(1))
		require.NoError(t, err)
		require.Equal(t, "locked", got.Name)
		require.True(t, got.UpdatedAt.Equal(locked))

		// GORM's own Create with the same clock, for comparison.
		clock = created
		plain := &parityCompany{ID: 2, Name: "gorm", Versioned: models.Versioned{Version: 1}}
		require.NoError(t, cdb.Create(plain).Error)
		require.True(t, plain.CreatedAt.Equal(created))

		// In a session.
		later := created.Add(48 * time.Hour)
		sdb := db.Session(&gorm.Session{NowFunc: func() time.Time { return later }})
		rs, err := repository.New[parityCompany](sdb)
		require.NoError(t, err)
		s := &parityCompany{ID: 3, Name: "s"}
		require.NoError(t, rs.Create(ctx, s))
		require.True(t, s.CreatedAt.Equal(later), "created %v", s.CreatedAt)
	})
}

type paritySoftParent struct {
	ID        int64 `gorm:"primaryKey"`
	DeletedAt gorm.DeletedAt
	models.Versioned
}

type paritySoftChild struct {
	ID        int64 `gorm:"primaryKey"`
	ParentID  int64
	DeletedAt gorm.DeletedAt
}

// BeforeDelete deletes the parent's children with the hook's tx.
func (p *paritySoftParent) BeforeDelete(tx *gorm.DB) error {
	return tx.Where("parent_id = ?", p.ID).Delete(&paritySoftChild{}).Error
}

// With PropagateUnscoped, a permanent delete's Unscoped reaches the
// statements its hooks run — the children are removed, not soft-deleted —
// as GORM's Unscoped().Delete does; without it, they are soft-deleted.
func TestParityPropagateUnscoped(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		require.NoError(t, db.AutoMigrate(&paritySoftParent{}, &paritySoftChild{}))
		rows := func(parent int64) (all, live int64) {
			require.NoError(t, db.Unscoped().Model(&paritySoftChild{}).Where("parent_id = ?", parent).Count(&all).Error)
			require.NoError(t, db.Model(&paritySoftChild{}).Where("parent_id = ?", parent).Count(&live).Error)
			return all, live
		}
		for _, propagate := range []bool{true, false} {
			pdb := db.Session(&gorm.Session{})
			pdb.Config.PropagateUnscoped = propagate
			parents, err := repository.New[paritySoftParent](pdb)
			require.NoError(t, err)
			base := int64(10)
			if !propagate {
				base = 20
			}
			// GORM: parent base, gormlock: parent base+1.
			for _, id := range []int64{base, base + 1} {
				require.NoError(t, parents.Create(ctx, &paritySoftParent{ID: id}))
				require.NoError(t, db.Create(&paritySoftChild{ID: id*10 + 1, ParentID: id}).Error)
			}
			require.NoError(t, pdb.Unscoped().Delete(&paritySoftParent{ID: base}).Error)
			p, err := parents.Get(ctx, base+1)
			require.NoError(t, err)
			require.NoError(t, parents.Delete(ctx, p, repository.Permanently()))

			gAll, gLive := rows(base)
			oAll, oLive := rows(base + 1)
			require.Zero(t, gLive)
			require.Zero(t, oLive)
			require.Equal(t, gAll, oAll, "PropagateUnscoped=%v: gormlock's hooks delete as GORM's do", propagate)
			if propagate {
				require.Zero(t, oAll, "the children are removed")
			} else {
				require.EqualValues(t, 1, oAll, "the child is soft-deleted")
			}
		}
	})
}

// RunInTx honours gorm.Config's DefaultTransactionTimeout, as GORM's
// Transaction does: a transaction whose context has no deadline ends after
// it, and nothing is committed.
func TestParityDefaultTransactionTimeout(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		require.NoError(t, db.AutoMigrate(&parityCompany{}))
		tdb := db.Session(&gorm.Session{})
		tdb.Config.DefaultTransactionTimeout = 100 * time.Millisecond
		r, err := repository.New[parityCompany](tdb)
		require.NoError(t, err)

		gormErr := tdb.Transaction(func(tx *gorm.DB) error {
			time.Sleep(300 * time.Millisecond)
			return tx.Create(&parityCompany{ID: 1, Name: "gorm", Versioned: models.Versioned{Version: 1}}).Error
		})
		require.Error(t, gormErr, "GORM's transaction ended after the timeout")

		err = repository.RunInTx(ctx, tdb, func(ctx context.Context) error {
			time.Sleep(300 * time.Millisecond)
			return r.Create(ctx, &parityCompany{ID: 2, Name: "gormlock"})
		})
		require.Error(t, err)
		require.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
		var n int64
		require.NoError(t, db.Model(&parityCompany{}).Count(&n).Error)
		require.Zero(t, n, "neither committed")
	})
}
