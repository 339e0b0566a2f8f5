package repository_test

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/repository"
)

// unversionedReadBack is what an Update of a model with unversioned fields
// sends on each database: on PostgreSQL the UPDATE returns the fields with
// the version, and nothing else is sent; elsewhere a SELECT of the fields
// follows it.
var unversionedReadBack = map[string]bool{"sqlite": true, "postgres": false, "mariadb": true}

// isUnversionedSelect reports whether query is the SELECT of shop_products'
// stock that reads the unversioned field back after a write.
func isUnversionedSelect(query string) bool {
	q := strings.NewReplacer("`", "", `"`, "").Replace(query)
	return strings.HasPrefix(q, "SELECT stock FROM shop_products WHERE")
}

// After an Update, UpdateMany or Columns Update of a form read before
// another client changed the unversioned stock, the caller's struct holds
// the row's stock, exactly, in a transaction and outside one; on
// PostgreSQL the write itself brought it back (one statement per record
// written, none of them a SELECT), elsewhere one SELECT per record follows
// the UPDATE.
func TestUnversionedUpdateReadsBackWithTheWrite(t *testing.T) {
	for _, d := range testdb.Dialects {
		t.Run(d, func(t *testing.T) {
			rec := &sqlRecorder{Interface: logger.Discard}
			db := testdb.Open(t, d)
			products := productRepo(t, db)
			ctx := context.Background()
			p := newProduct(t, products, 100)
			q := newProduct(t, products, 50)
			recorded, err := repository.New[shopProduct](db.Session(&gorm.Session{Logger: rec}))
			require.NoError(t, err)

			// check runs write on forms of p and q read before another
			// client added 7 to each stock, and checks what it sent and
			// the forms' stock after it.
			check := func(name string, forms int, write func(ctx context.Context, forms []*shopProduct) error) {
				t.Helper()
				var fs []*shopProduct
				var want []int64
				for _, e := range []*shopProduct{p, q}[:forms] {
					cur, err := products.Get(ctx, e.ID)
					require.NoError(t, err)
					f := *cur
					f.Name += "+"
					fs = append(fs, &f)
					require.NoError(t, db.Exec("UPDATE shop_products SET stock = stock + 7 WHERE id = ?", e.ID).Error)
					want = append(want, cur.Stock+7)
				}
				rec.take()
				require.NoError(t, write(ctx, fs), name)
				sent := rec.take()
				selects := 0
				for _, s := range sent {
					if isUnversionedSelect(s) {
						selects++
					}
				}
				for i, f := range fs {
					assert.Equal(t, want[i], f.Stock, "%s: the form holds the row's stock", name)
					_, _, stock, version := rawProduct(t, db, f.ID)
					assert.Equal(t, want[i], stock, name)
					assert.Equal(t, version, f.Version, name)
				}
				if unversionedReadBack[d] {
					assert.Equal(t, forms, selects, "%s: one SELECT of the stock per record: %q", name, sent)
				} else {
					assert.Zero(t, selects, "%s: no SELECT after the write: %q", name, sent)
					writes := 0
					for _, s := range sent {
						if strings.HasPrefix(s, "UPDATE ") {
							writes++
							assert.True(t, strings.HasSuffix(s, ` RETURNING "version", "stock"`), "%s: %s", name, s)
						}
					}
					assert.Equal(t, forms, writes, "%s: %q", name, sent)
				}
			}
			check("Update", 1, func(ctx context.Context, fs []*shopProduct) error {
				return recorded.Update(ctx, fs[0])
			})
			check("Update in a transaction", 1, func(ctx context.Context, fs []*shopProduct) error {
				return repository.RunInTx(ctx, db, func(ctx context.Context) error { return recorded.Update(ctx, fs[0]) })
			})
			check("Update Columns", 1, func(ctx context.Context, fs []*shopProduct) error {
				return recorded.Update(ctx, fs[0], repository.Columns("Name"))
			})
			check("UpdateMany", 2, func(ctx context.Context, fs []*shopProduct) error {
				return recorded.UpdateMany(ctx, fs)
			})
		})
	}
}

// pickyCount is an unversioned counter whose Scan refuses 666, as a column
// type the field cannot take would: reading the field back after a write
// then fails.
type pickyCount int64

func (c *pickyCount) Scan(src any) error {
	n, ok := src.(int64)
	if !ok || n == 666 {
		return fmt.Errorf("pickyCount: cannot take %v", src)
	}
	*c = pickyCount(n)
	return nil
}

// Value implements driver.Valuer.
func (c pickyCount) Value() (driver.Value, error) { return int64(c), nil }

type pickyProduct struct {
	models.Model
	Name  string     `gorm:"column:name;not null"`
	Count pickyCount `gorm:"column:hits;not null" gormlock:"unversioned"`
}

// A write whose unversioned field cannot be read back is told as before
// the write returned the fields: outside a transaction it stands (nil,
// the field keeps the value it had), in one the call fails and the
// transaction rolls back. A value the field takes is set from the write's
// own answer (on PostgreSQL) and the entity holds it.
func TestUnversionedReadBackFailure(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		require.NoError(t, db.AutoMigrate(&pickyProduct{}))
		repo, err := repository.New[pickyProduct](db)
		require.NoError(t, err)
		e := &pickyProduct{Name: "a", Count: 5}
		require.NoError(t, repo.Create(ctx, e))

		require.NoError(t, db.Exec("UPDATE picky_products SET hits = 12 WHERE id = ?", e.ID).Error)
		e.Name = "b"
		require.NoError(t, repo.Update(ctx, e))
		assert.EqualValues(t, 12, e.Count, "a value the field takes is read back")

		require.NoError(t, db.Exec("UPDATE picky_products SET hits = 666 WHERE id = ?", e.ID).Error)
		e.Name = "c"
		require.NoError(t, repo.Update(ctx, e), "outside a transaction the write stands")
		assert.EqualValues(t, 12, e.Count, "the field keeps the value it had")
		var name string
		require.NoError(t, db.Raw("SELECT name FROM picky_products WHERE id = ?", e.ID).Scan(&name).Error)
		assert.Equal(t, "c", name)

		e.Name = "d"
		saved := *e
		err = repository.RunInTx(ctx, db, func(ctx context.Context) error { return repo.Update(ctx, e) })
		require.Error(t, err, "in a transaction the failed read fails the call")
		assert.True(t, strings.Contains(err.Error(), "pickyCount: cannot take 666"), "%v", err)
		assert.False(t, errors.Is(err, context.Canceled))
		assert.Equal(t, saved, *e, "on error the entity is left as it was")
		require.NoError(t, db.Raw("SELECT name FROM picky_products WHERE id = ?", e.ID).Scan(&name).Error)
		assert.Equal(t, "c", name, "the transaction rolled back")
	})
}

type nullableHits struct {
	models.Model
	Name string `gorm:"column:name;not null"`
	Hits *int64 `gorm:"column:hits" gormlock:"unversioned"`
}

// A Mutate whose fn changes unversioned fields only sends one UPDATE
// guarded by the value read ("= ?", or IS NULL for a NULL one), the same
// text each time for the same shape; on PostgreSQL it returns the fields
// and nothing follows it, elsewhere a SELECT of the fields does. The
// entity returned holds the row's values, exactly.
func TestUnversionedMutateWriteStatement(t *testing.T) {
	for _, d := range testdb.Dialects {
		t.Run(d, func(t *testing.T) {
			rec := &sqlRecorder{Interface: logger.Discard}
			db := testdb.Open(t, d)
			require.NoError(t, db.AutoMigrate(&nullableHits{}))
			repo, err := repository.New[nullableHits](db.Session(&gorm.Session{Logger: rec}))
			require.NoError(t, err)
			ctx := context.Background()
			e := &nullableHits{Name: "a"}
			require.NoError(t, repo.Create(ctx, e))
			version := e.Version

			// mutate runs one Mutate that adds 1 to hits (NULL counts as
			// 0) and returns the UPDATE it sent.
			mutate := func(want int64) string {
				t.Helper()
				rec.take()
				got, err := repo.Mutate(ctx, e.ID, func(p *nullableHits) error {
					n := int64(1)
					if p.Hits != nil {
						n = *p.Hits + 1
					}
					p.Hits = &n
					return nil
				})
				require.NoError(t, err)
				require.NotNil(t, got.Hits)
				assert.Equal(t, want, *got.Hits)
				assert.Equal(t, version, got.Version, "the version stays")
				var updates []string
				selects := 0
				for _, s := range rec.take() {
					switch {
					case strings.HasPrefix(s, "UPDATE "):
						updates = append(updates, s)
					case strings.HasPrefix(strings.NewReplacer("`", "", `"`, "").Replace(s), "SELECT hits FROM"):
						selects++
					}
				}
				require.Len(t, updates, 1)
				if unversionedReadBack[d] {
					assert.Equal(t, 1, selects, "one SELECT of hits after the write")
				} else {
					assert.Zero(t, selects, "no SELECT after the write")
					assert.True(t, strings.HasSuffix(updates[0], ` RETURNING "hits"`), updates[0])
				}
				return updates[0]
			}
			q := func(s string) string { return strings.NewReplacer("`", "", `"`, "").Replace(s) }
			first := mutate(1)
			assert.Contains(t, q(first), "AND (hits IS NULL)", "a NULL read is guarded by IS NULL")
			second := mutate(2)
			assert.NotContains(t, q(second), "IS NULL")
			assert.Regexp(t, `AND \(hits = (\?|\$\d+)\)`, q(second))
			require.NoError(t, db.Exec("UPDATE nullable_hits SET hits = hits + 10 WHERE id = ?", e.ID).Error)
			third := mutate(13)
			assert.Equal(t, second, third, "the same shape sends the same text")
			var hits int64
			require.NoError(t, db.Raw("SELECT hits FROM nullable_hits WHERE id = ?", e.ID).Scan(&hits).Error)
			assert.EqualValues(t, 13, hits)
		})
	}
}

// blobDoc is a named []byte: GORM's condition writes it as one value,
// but it is not one of the types whose read value the statement built
// once per shape takes (plainArg), so Mutate builds its guarded write
// for the call.
type blobDoc []byte

// unversionedBlob has an unversioned field of that type.
type unversionedBlob struct {
	models.Model
	Name string  `gorm:"column:name;not null"`
	Doc  blobDoc `gorm:"column:doc" gormlock:"unversioned"`
}

// A Mutate of an unversioned field whose statement is built for the call
// (not once per shape) is applied once and reported so: fn runs once, the
// row and the entity returned hold the new value, the version stays. On
// PostgreSQL that statement returns nothing, and reading it as if it
// returned the fields took the applied write for a stale one: fn ran 10
// times and the call failed with ErrStaleData while the row had changed.
func TestUnversionedMutateOfAFieldBuiltPerCall(t *testing.T) {
	for _, d := range testdb.Dialects {
		t.Run(d, func(t *testing.T) {
			db := testdb.Open(t, d)
			require.NoError(t, db.AutoMigrate(&unversionedBlob{}))
			repo, err := repository.New[unversionedBlob](db)
			require.NoError(t, err)
			ctx := context.Background()
			e := &unversionedBlob{Name: "a", Doc: blobDoc("a")}
			require.NoError(t, repo.Create(ctx, e))
			calls := 0
			got, err := repo.Mutate(ctx, e.ID, func(p *unversionedBlob) error {
				calls++
				p.Doc = append(p.Doc, 'x')
				return nil
			})
			require.NoError(t, err)
			assert.Equal(t, 1, calls, "fn ran once: the write was applied the first time")
			assert.Equal(t, "ax", string(got.Doc))
			assert.Equal(t, e.Version, got.Version, "an unversioned field alone leaves the version")
			var row unversionedBlob
			require.NoError(t, db.First(&row, e.ID).Error)
			assert.Equal(t, "ax", string(row.Doc))
		})
	}
}
