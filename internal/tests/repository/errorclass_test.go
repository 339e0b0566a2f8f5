package repository_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/repository"
)

// ecParent and ecChild are a parent and a child with every kind of
// integrity constraint: a foreign key, a CHECK, NOT NULL, a unique key.
type ecParent struct {
	models.Model
	Name string
}

type ecChild struct {
	models.Model
	ParentID int64     `gorm:"not null"`
	Parent   *ecParent `gorm:"foreignKey:ParentID;constraint:OnDelete:RESTRICT"`
	Qty      int64     `gorm:"not null;check:ec_qty_positive,qty > 0"`
	Label    *string   `gorm:"not null"`
	Code     string    `gorm:"size:32;uniqueIndex:ec_children_code"`
}

// The constraint names the databases give: PostgreSQL names every
// constraint (and the column of NOT NULL); MariaDB names a foreign key,
// a CHECK and a unique key, and the column of NOT NULL; SQLite names a
// CHECK, the column of NOT NULL and the columns of a unique key, but not a
// foreign key.
type ecNames struct{ fk, check, unique, notNullColumn string }

var ecExpected = map[string]ecNames{
	"sqlite":   {"", "ec_qty_positive", "ec_children.code", "ec_children.label"},
	"postgres": {"fk_ec_children_parent", "ec_qty_positive", "ec_children_code", "label"},
	"mariadb":  {"fk_ec_children_parent", "ec_qty_positive", "ec_children_code", "label"},
}

// Integrity violations get their own sentinel, ErrConstraintViolation,
// naming the constraint where the database does, through every repository
// call that writes; a condition that is not valid SQL for the table is
// ErrInvalidArgument, the driver's error kept. Every one is definite:
// nothing of the refused call was written.
func TestErrorClassesThroughRepository(t *testing.T) {
	for _, d := range testdb.Dialects {
		t.Run(d, func(t *testing.T) {
			db := testdb.Open(t, d)
			require.NoError(t, db.AutoMigrate(&ecParent{}, &ecChild{}))
			ctx := testdb.Ctx(t)
			want := ecExpected[d]
			parents := mustRepo[ecParent](t, db)
			children := mustRepo[ecChild](t, db)
			label := func(s string) *string { return &s }

			parent := &ecParent{Name: "p"}
			require.NoError(t, parents.Create(ctx, parent))
			child := &ecChild{ParentID: parent.ID, Qty: 1, Label: label("a"), Code: "c1"}
			require.NoError(t, children.Create(ctx, child))
			version := child.Version

			requireConstraint := func(t *testing.T, err error, constraint, column string) {
				t.Helper()
				require.ErrorIs(t, err, locking.ErrConstraintViolation)
				for _, other := range []error{locking.ErrCommitUnknown, locking.ErrInvalidArgument, locking.ErrAlreadyExists, locking.ErrStaleData, locking.ErrNotFound} {
					require.NotErrorIs(t, err, other)
				}
				var de *locking.DatabaseError
				require.ErrorAs(t, err, &de)
				assert.Equal(t, constraint, de.Constraint, "%v", err)
				assert.Equal(t, column, de.Column, "%v", err)
				require.NotEmpty(t, locking.Code(err))
			}
			requireInvalid := func(t *testing.T, err error) {
				t.Helper()
				require.ErrorIs(t, err, locking.ErrInvalidArgument)
				require.NotErrorIs(t, err, locking.ErrCommitUnknown)
				require.NotEmpty(t, locking.Code(err), "the driver's error is kept: %v", err)
			}

			t.Run("Create, missing parent", func(t *testing.T) {
				err := children.Create(ctx, &ecChild{ParentID: parent.ID + 1000, Qty: 1, Label: label("x"), Code: "c2"})
				requireConstraint(t, err, want.fk, "")
			})
			t.Run("Create, check", func(t *testing.T) {
				err := children.Create(ctx, &ecChild{ParentID: parent.ID, Qty: 0, Label: label("x"), Code: "c2"})
				requireConstraint(t, err, want.check, "")
			})
			t.Run("Create, not null", func(t *testing.T) {
				err := children.Create(ctx, &ecChild{ParentID: parent.ID, Qty: 1, Code: "c2"})
				requireConstraint(t, err, "", want.notNullColumn)
			})
			t.Run("Create, unique", func(t *testing.T) {
				err := children.Create(ctx, &ecChild{ParentID: parent.ID, Qty: 1, Label: label("x"), Code: "c1"})
				require.ErrorIs(t, err, locking.ErrAlreadyExists)
				require.NotErrorIs(t, err, locking.ErrConstraintViolation)
				var de *locking.DatabaseError
				require.ErrorAs(t, err, &de)
				assert.Equal(t, want.unique, de.Constraint, "%v", err)
			})
			t.Run("Update, check", func(t *testing.T) {
				e := *child
				e.Qty = -5
				requireConstraint(t, children.Update(ctx, &e), want.check, "")
			})
			t.Run("Update, missing parent", func(t *testing.T) {
				e := *child
				e.ParentID = parent.ID + 1000
				requireConstraint(t, children.Update(ctx, &e), want.fk, "")
			})
			t.Run("Update, not null", func(t *testing.T) {
				e := *child
				e.Label = nil
				requireConstraint(t, children.Update(ctx, &e), "", want.notNullColumn)
			})
			t.Run("Apply, check", func(t *testing.T) {
				_, err := children.Apply(ctx, child.ID, []repository.Change{repository.Add("Qty", -10)})
				requireConstraint(t, err, want.check, "")
			})
			t.Run("Apply, missing parent", func(t *testing.T) {
				_, err := children.Apply(ctx, child.ID, []repository.Change{repository.SetTo("ParentID", parent.ID+1000)})
				requireConstraint(t, err, want.fk, "")
			})
			t.Run("Apply, not null", func(t *testing.T) {
				_, err := children.Apply(ctx, child.ID, []repository.Change{repository.SetTo("Label", nil)})
				requireConstraint(t, err, "", want.notNullColumn)
			})
			t.Run("Apply, If with an unknown column", func(t *testing.T) {
				_, err := children.Apply(ctx, child.ID, []repository.Change{repository.Add("Qty", 1)}, repository.If("nosuch = ?", 1))
				requireInvalid(t, err)
			})
			t.Run("Delete, parent still referenced", func(t *testing.T) {
				p := *parent
				requireConstraint(t, parents.Delete(ctx, &p), want.fk, "")
			})
			t.Run("Find, unknown column", func(t *testing.T) {
				_, err := children.Find(ctx, repository.Where("nosuch = ?", 1))
				requireInvalid(t, err)
			})
			t.Run("Find, bad SQL", func(t *testing.T) {
				_, err := children.Find(ctx, repository.Where("qty = = ?", 1))
				requireInvalid(t, err)
			})
			t.Run("Find, unknown function", func(t *testing.T) {
				_, err := children.Find(ctx, repository.Where("nosuch_fn(qty) = ?", 1))
				requireInvalid(t, err)
			})
			t.Run("inside RunInTx", func(t *testing.T) {
				err := repository.RunInTx(ctx, db, func(ctx context.Context) error {
					e := *child
					e.Qty = 0
					return children.Update(ctx, &e)
				})
				requireConstraint(t, err, want.check, "")
			})

			// Nothing of the refused calls was written: the child and the
			// parent are as created.
			got, err := children.Get(ctx, child.ID)
			require.NoError(t, err)
			assert.Equal(t, version, got.Version)
			assert.Equal(t, int64(1), got.Qty)
			assert.Equal(t, parent.ID, got.ParentID)
			require.NotNil(t, got.Label)
			assert.Equal(t, "a", *got.Label)
			assert.EqualValues(t, 1, rowCount(t, db, &ecChild{}, "1 = 1"))
			assert.EqualValues(t, 1, rowCount(t, db, &ecParent{}, "1 = 1"))
		})
	}
}

// The negative control of the classification: an error that comes from no
// database passes through untouched, matching no sentinel.
func TestErrorClassesLeaveOwnErrorsAlone(t *testing.T) {
	own := errors.New("the caller's own error")
	assert.True(t, locking.Classify(own) == own)
	for _, s := range []error{locking.ErrConstraintViolation, locking.ErrInvalidArgument, locking.ErrAlreadyExists} {
		assert.NotErrorIs(t, locking.Classify(own), s)
	}
}
