package repository_test

import (
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/repository"
)

// attrs is a map stored as JSON text: a driver.Valuer whose value a
// function changes in place.
type attrs map[string]string

func (a attrs) Value() (driver.Value, error) {
	b, err := json.Marshal(a)
	return string(b), err
}

func (a *attrs) Scan(src any) error {
	var b []byte
	switch v := src.(type) {
	case string:
		b = []byte(v)
	case []byte:
		b = v
	default:
		return fmt.Errorf("attrs: cannot scan %T", src)
	}
	return json.Unmarshal(b, a)
}

// stockedItem has fields a Mutate's fn can change in place — a map that
// writes itself as JSON, a byte slice, a pointer — beside an unversioned
// stock.
type stockedItem struct {
	models.Model
	Attrs attrs   `gorm:"column:attrs;type:varchar(200);not null"`
	Code  []byte  `gorm:"column:code;type:varbinary(20)"`
	Note  *string `gorm:"column:note;type:varchar(50)"`
	Stock int64   `gorm:"column:stock;not null" gormlock:"unversioned"`
}

// A Mutate whose fn changes the unversioned stock and, in place, another
// field (a map's entry, a byte of a slice, a pointer's target): the other
// change is written and the version advances. Were the values fn read kept
// by reference, the change in place would look like none, the write would
// set the stock alone, and Mutate would return the changed entity while the
// row kept the old value — a lost write without an error.
func TestUnversionedMutateSeesChangesInPlace(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := testdb.Ctx(t)
		if db.Dialector.Name() == "postgres" {
			require.NoError(t, db.Exec("DROP TABLE IF EXISTS stocked_items").Error)
			require.NoError(t, db.Exec(`CREATE TABLE stocked_items (id bigserial PRIMARY KEY, version bigint NOT NULL DEFAULT 1,
				created_at timestamptz, updated_at timestamptz, attrs varchar(200) NOT NULL, code bytea, note varchar(50), stock bigint NOT NULL)`).Error)
		} else {
			require.NoError(t, db.AutoMigrate(&stockedItem{}))
		}
		items, err := repository.New[stockedItem](db)
		require.NoError(t, err)
		note := "first"
		changes := []struct {
			name  string
			fn    func(*stockedItem)
			check func(t *testing.T, got *stockedItem)
		}{
			{"map entry", func(it *stockedItem) { it.Attrs["color"] = "blue" },
				func(t *testing.T, got *stockedItem) { assert.Equal(t, "blue", got.Attrs["color"]) }},
			{"slice byte", func(it *stockedItem) { it.Code[0] = 'X' },
				func(t *testing.T, got *stockedItem) { assert.Equal(t, "Xbc", string(got.Code)) }},
			{"pointer target", func(it *stockedItem) { *it.Note = "second" },
				func(t *testing.T, got *stockedItem) {
					require.NotNil(t, got.Note)
					assert.Equal(t, "second", *got.Note)
				}},
		}
		for _, c := range changes {
			t.Run(c.name, func(t *testing.T) {
				n := note
				it := &stockedItem{Attrs: attrs{"color": "red"}, Code: []byte("abc"), Note: &n, Stock: 10}
				require.NoError(t, items.Create(ctx, it))
				out, err := items.Mutate(ctx, it.ID, func(e *stockedItem) error {
					c.fn(e)
					e.Stock--
					return nil
				})
				require.NoError(t, err)
				assert.Greater(t, out.Version, it.Version, "a change beside the stock advances the version")
				got, err := items.Get(ctx, it.ID)
				require.NoError(t, err)
				c.check(t, got)
				assert.EqualValues(t, 9, got.Stock)
				assert.Equal(t, out.Version, got.Version)
			})
		}

		// The stock alone, changed the same way, leaves the version.
		n := note
		it := &stockedItem{Attrs: attrs{"color": "red"}, Code: []byte("abc"), Note: &n, Stock: 10}
		require.NoError(t, items.Create(ctx, it))
		out, err := items.Mutate(ctx, it.ID, func(e *stockedItem) error { e.Stock--; return nil })
		require.NoError(t, err)
		assert.Equal(t, it.Version, out.Version, "the stock alone leaves the version")
	})
}

// opaqueItem's unversioned field holds an interface: a change in place
// could not be told from the value read, so New refuses the tag.
type opaqueItem struct {
	models.Model
	Stock any `gorm:"column:stock;type:bigint" gormlock:"unversioned"`
}

func TestUnversionedTagRefusedOnAnOpaqueType(t *testing.T) {
	db := testdb.SQLite(t)
	_, err := repository.New[opaqueItem](db)
	require.Error(t, err)
	assert.True(t, errors.Is(err, locking.ErrInvalidArgument), "%v", err)
	assert.Contains(t, err.Error(), "Stock")
}
