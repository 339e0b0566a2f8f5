package rest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/repository"
	"github.com/gormlock/gormlock/rest"
)

// item is a shop's product over HTTP: the stock is outside the version.
type item struct {
	models.Model
	Name  string `gorm:"column:name;not null" json:"name"`
	Price int64  `gorm:"column:price;not null" json:"price"`
	Stock int64  `gorm:"column:stock;not null" json:"stock" gormlock:"unversioned"`
}

func itemServer(t *testing.T, db *gorm.DB) (*client, *repository.Repository[item]) {
	t.Helper()
	require.NoError(t, db.AutoMigrate(&item{}))
	items, err := repository.New[item](db)
	require.NoError(t, err)
	h, err := rest.New(items, rest.WithErrorLog(func(_ *http.Request, err error) { t.Errorf("500: %v", err) }))
	require.NoError(t, err)
	mux := http.NewServeMux()
	rest.Mount(mux, "/items", h)
	// The shop's own handler: the form's JSON, with or without its
	// version, decoded into the model and written with Update; errors
	// answered with rest.ProblemOf.
	mux.HandleFunc("PUT /shop/items/{id}", func(w http.ResponseWriter, r *http.Request) {
		var e item
		if err := json.NewDecoder(r.Body).Decode(&e); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		err := items.Update(r.Context(), &e)
		if err != nil {
			p := rest.ProblemOf(err)
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(p.Status)
			_ = json.NewEncoder(w).Encode(p)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(e)
	})
	return serve(t, mux), items
}

// A stale PUT's 412 carries the current ETag and the fields that differ
// (problem+json); PUT and PATCH never write the unversioned stock: a PUT's
// stock is not written, a PATCH naming it is refused.
func TestRESTUnversionedAndConflictFields(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		c, items := itemServer(t, db)
		e := &item{Name: "lamp", Price: 1000, Stock: 100}
		require.NoError(t, items.Create(ctx, e))
		read := fmt.Sprintf(`"%d"`, e.Version)
		path := fmt.Sprintf("/items/%d", e.ID)

		// An order lands: the ETag stays; the form saves its name.
		_, err := items.Apply(ctx, e.ID, []repository.Change{repository.Add("Stock", -10)})
		require.NoError(t, err)
		r := c.do("PUT", path, `{"name":"desk lamp","price":1000,"stock":100}`, "If-Match", read)
		require.Equal(t, http.StatusOK, r.status, r.body)
		var got item
		require.NoError(t, json.Unmarshal([]byte(r.body), &got))
		assert.Equal(t, "desk lamp", got.Name)
		assert.EqualValues(t, 90, got.Stock, "the PUT's stale stock (100) is not written")
		now := r.etag()

		// A second editor from the first read: 412 with the current ETag
		// and what differs between its record and the current one.
		r = c.do("PUT", path, `{"name":"lamp","price":900,"stock":100}`, "If-Match", read)
		require.Equal(t, http.StatusPreconditionFailed, r.status, r.body)
		assert.Equal(t, now, r.etag())
		p := r.problem(t)
		assert.Equal(t, []string{"name", "price"}, p.Fields)

		// PATCH at the old version: 412 naming what the patch changes.
		r = c.patch(path, `{"price":900}`, "If-Match", read)
		require.Equal(t, http.StatusPreconditionFailed, r.status, r.body)
		assert.Equal(t, now, r.etag())
		assert.Equal(t, []string{"price"}, r.problem(t).Fields)

		// PATCH naming the stock: refused, whatever the version.
		for _, im := range []string{now, "*"} {
			r = c.patch(path, `{"stock":5}`, "If-Match", im)
			require.Equal(t, http.StatusBadRequest, r.status, r.body)
			assert.Contains(t, r.problem(t).Detail, "stock")
		}
		var stock int64
		require.NoError(t, db.Raw("SELECT stock FROM items WHERE id = ?", e.ID).Scan(&stock).Error)
		assert.EqualValues(t, 90, stock)
	})
}

// A write without a version (the shop's unchanged admin form) is refused
// with an error that says the version is missing, and answered 428; the
// same form with its version is written.
func TestRESTVersionMissingIs428(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		c, items := itemServer(t, db)
		e := &item{Name: "lamp", Price: 1000, Stock: 100}
		require.NoError(t, items.Create(ctx, e))
		path := fmt.Sprintf("/shop/items/%d", e.ID)

		r := c.do("PUT", path, fmt.Sprintf(`{"id":%d,"name":"desk lamp","price":900}`, e.ID))
		require.Equal(t, http.StatusPreconditionRequired, r.status, r.body)
		assert.Equal(t, "the request carries no version of the record: send the version it was read at", r.problem(t).Detail)
		err := items.Update(ctx, &item{Model: models.Model{ID: e.ID}, Name: "x"})
		require.True(t, errors.Is(err, locking.ErrVersionMissing) && errors.Is(err, locking.ErrStaleData), "%v", err)

		r = c.do("PUT", path, fmt.Sprintf(`{"id":%d,"version":%d,"name":"desk lamp","price":900}`, e.ID, e.Version))
		require.Equal(t, http.StatusOK, r.status, r.body)
		var got item
		require.NoError(t, json.Unmarshal([]byte(r.body), &got))
		assert.Equal(t, "desk lamp", got.Name)
		assert.EqualValues(t, 100, got.Stock, "the form's missing stock (0) is not written")

		// The gormlock handler itself: no If-Match is 428 (strict).
		r = c.do("PUT", fmt.Sprintf("/items/%d", e.ID), `{"name":"x","price":1}`)
		require.Equal(t, http.StatusPreconditionRequired, r.status, r.body)
	})
}
