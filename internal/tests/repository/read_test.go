package repository_test

import (
	"context"
	"testing"
	"time"

	"github.com/gormlock/gormlock/internal/tests/fixtures"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/repository"
)

// wide has a column of every kind Get's scan must handle as GORM does: a
// serializer, pointers, a Scanner, bytes, floats, a NULL read into a
// non-pointer field and an ignored field.
type wide struct {
	ID       int64 `gorm:"primaryKey"`
	Name     string
	Nullable string // the test stores NULL here: GORM reads ""
	Note     *string
	When     *time.Time
	Ratio    float64
	Blob     []byte
	Tags     []string            `gorm:"serializer:json"`
	Attrs    fixtures.Attributes `gorm:"type:text"`
	Skipped  string              `gorm:"-"`
	models.Versioned
}

// computed has read-only fields: one whose column the table lacks (filled
// only by a custom Select), one whose column exists.
type computed struct {
	ID      int64 `gorm:"primaryKey"`
	Name    string
	Total   int64 `gorm:"->;-:migration"`
	Written int64 `gorm:"->"`
	models.Versioned
}

func TestGetReadsModelsWithReadOnlyFields(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		require.NoError(t, db.AutoMigrate(&computed{}))
		r, err := repository.New[computed](db)
		require.NoError(t, err)
		c := &computed{Name: "a"}
		require.NoError(t, r.Create(ctx, c))
		require.NoError(t, db.Exec("UPDATE computeds SET written = 5 WHERE id = ?", c.ID).Error)
		got, err := r.Get(ctx, c.ID)
		require.NoError(t, err, "a read-only field without a column must not break Get")
		var want computed
		require.NoError(t, db.Take(&want, c.ID).Error)
		require.Equal(t, want, *got)
		require.EqualValues(t, 5, got.Written)
		require.Zero(t, got.Total)
		m, err := r.Mutate(ctx, c.ID, func(x *computed) error { x.Name = "b"; return nil })
		require.NoError(t, err)
		require.Greater(t, m.Version, c.Version)
		require.NoError(t, repository.RunInTx(ctx, db, func(ctx context.Context) error {
			l, err := r.LockRow(ctx, c.ID)
			require.NoError(t, err)
			require.Equal(t, "b", l.Name)
			return nil
		}))
	})
}

// level and label are named plain types: scanned straight into the field.
type (
	level int16
	label string
)

// boxed embeds its bookkeeping through a pointer, and has named plain
// types: fields behind the pointer are read GORM's way.
type boxed struct {
	ID    int64 `gorm:"primaryKey"`
	Level level
	Label label
	*models.Versioned
}

// found counts AfterFind calls: a model with the hook is read through GORM.
type found struct {
	ID    int64 `gorm:"primaryKey"`
	Name  string
	Calls int `gorm:"-"`
	models.Versioned
}

func (f *found) AfterFind(*gorm.DB) error { f.Calls++; return nil }

func TestGetReadsLikeGORM(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		require.NoError(t, db.AutoMigrate(&wide{}))
		r, err := repository.New[wide](db)
		require.NoError(t, err)

		note, when := "n", time.Date(2026, 11, 22, 10, 0, 0, 123000, time.UTC)
		rows := []*wide{
			{Name: "full", Note: &note, When: &when, Ratio: 0.25, Blob: []byte{0, 1, 2}, Tags: []string{"a", "b"}, Attrs: fixtures.Attributes{"k": "v"}, Skipped: "not stored"},
			{Name: "empty"},
		}
		for _, w := range rows {
			require.NoError(t, r.Create(ctx, w))
		}
		require.NoError(t, db.Exec("UPDATE wides SET nullable = NULL WHERE id = ?", rows[1].ID).Error)

		for _, w := range rows {
			got, err := r.Get(ctx, w.ID)
			require.NoError(t, err, w.Name)
			var want wide
			require.NoError(t, db.Take(&want, w.ID).Error)
			require.Equal(t, want, *got, "Get must read %s exactly as GORM's Take does", w.Name)
			require.Empty(t, got.Skipped, "ignored fields are not read")
		}
		got, err := r.Get(ctx, rows[0].ID)
		require.NoError(t, err)
		require.Equal(t, []string{"a", "b"}, got.Tags)
		require.Equal(t, when, got.When.UTC())
		require.Equal(t, []byte{0, 1, 2}, got.Blob)

		_, err = r.Get(ctx, int64(1<<40))
		var nf *locking.NotFoundError
		require.ErrorAs(t, err, &nf)
		require.Equal(t, int64(1<<40), nf.ID)

		// Inside a transaction Get reads through it: it sees the
		// transaction's own uncommitted write.
		require.NoError(t, repository.RunInTx(ctx, db, func(ctx context.Context) error {
			w, err := r.Get(ctx, rows[1].ID)
			require.NoError(t, err)
			w.Name = "in tx"
			require.NoError(t, r.Update(ctx, w))
			again, err := r.Get(ctx, rows[1].ID)
			require.NoError(t, err)
			require.Equal(t, "in tx", again.Name)
			require.Equal(t, w.Version, again.Version)
			return nil
		}))
	})
}

func TestGetReadsEmbeddedPointersAndNamedTypes(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		require.NoError(t, db.AutoMigrate(&boxed{}))
		r, err := repository.New[boxed](db)
		require.NoError(t, err)
		b := &boxed{Level: -3, Label: "x", Versioned: &models.Versioned{}}
		require.NoError(t, r.Create(ctx, b))
		got, err := r.Get(ctx, b.ID)
		require.NoError(t, err)
		var want boxed
		require.NoError(t, db.Take(&want, b.ID).Error)
		require.Equal(t, want, *got)
		require.Equal(t, level(-3), got.Level)
		require.Equal(t, label("x"), got.Label)
		require.NotNil(t, got.Versioned)
		require.Equal(t, b.Version, got.Version)

		// A NULL in a named plain field reads as its zero value, as in GORM.
		require.NoError(t, db.Exec("UPDATE boxeds SET label = NULL WHERE id = ?", b.ID).Error)
		got, err = r.Get(ctx, b.ID)
		require.NoError(t, err)
		require.Equal(t, label(""), got.Label)
		require.Equal(t, level(-3), got.Level)
		m, err := r.Mutate(ctx, b.ID, func(x *boxed) error { x.Level++; return nil })
		require.NoError(t, err)
		require.Equal(t, level(-2), m.Level)
		require.Greater(t, m.Version, b.Version)
	})
}

func TestGetRunsAfterFindHooks(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		require.NoError(t, db.AutoMigrate(&found{}))
		r, err := repository.New[found](db)
		require.NoError(t, err)
		f := &found{Name: "x"}
		require.NoError(t, r.Create(ctx, f))
		got, err := r.Get(ctx, f.ID)
		require.NoError(t, err)
		require.Equal(t, 1, got.Calls, "AfterFind ran once")
		m, err := r.Mutate(ctx, f.ID, func(x *found) error { x.Name = "y"; return nil })
		require.NoError(t, err)
		require.Equal(t, 1, m.Calls, "Mutate's read ran AfterFind once")
		_, err = r.Get(ctx, int64(999))
		require.ErrorIs(t, err, locking.ErrNotFound)
	})
}
