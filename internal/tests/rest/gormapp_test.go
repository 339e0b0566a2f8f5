package rest_test

// The HTTP adapter over an existing GORM application's models: gorm.Model
// (uint key, soft delete), a composite key, and GORM's TranslateError.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/repository"
	"github.com/gormlock/gormlock/rest"
)

type shopItem struct {
	gorm.Model
	models.Versioning
	Name  string `json:"name" gorm:"not null"`
	Stock int    `json:"stock"`
}

type tenantNote struct {
	TenantID string `json:"tenant_id" gorm:"primaryKey"`
	ID       int64  `json:"id" gorm:"primaryKey;autoIncrement:false"`
	models.Versioning
	Text string `json:"text"`
}

func appServer(t *testing.T, db *gorm.DB) *client {
	t.Helper()
	require.NoError(t, db.AutoMigrate(&shopItem{}, &tenantNote{}))
	items, err := repository.New[shopItem](db)
	require.NoError(t, err)
	notes, err := repository.New[tenantNote](db)
	require.NoError(t, err)
	ih, err := rest.New(items, rest.WithErrorLog(func(_ *http.Request, err error) { t.Errorf("500: %v", err) }))
	require.NoError(t, err)
	nh, err := rest.New(notes, rest.WithErrorLog(func(_ *http.Request, err error) { t.Errorf("500: %v", err) }))
	require.NoError(t, err)
	mux := http.NewServeMux()
	rest.Mount(mux, "/items", ih)
	rest.Mount(mux, "/notes", nh)
	return serve(t, mux)
}

func TestGormModelOverHTTP(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		db = db.Session(&gorm.Session{})
		db.Config.TranslateError = true // an application's setting; 409s still come
		c := appServer(t, db)
		r := c.do("POST", "/items", `{"name":"lamp","stock":2}`)
		require.Equal(t, http.StatusCreated, r.status, r.body)
		var it shopItem
		require.NoError(t, json.Unmarshal([]byte(r.body), &it))
		path := fmt.Sprintf("/items/%d", it.ID)
		require.Equal(t, path, r.header.Get("Location"))
		etag := r.etag()

		r = c.do("PATCH", path, `{"stock":9}`, "If-Match", etag, "Content-Type", "application/merge-patch+json")
		require.Equal(t, http.StatusOK, r.status, r.body)
		require.NoError(t, json.Unmarshal([]byte(r.body), &it))
		assert.Equal(t, "lamp", it.Name, "PATCH keeps what it does not name")
		assert.Equal(t, 9, it.Stock)

		r = c.do("DELETE", path, "", "If-Match", r.etag())
		require.Equal(t, http.StatusNoContent, r.status, r.body)
		assert.Equal(t, http.StatusNotFound, c.do("GET", path, "").status, "soft-deleted: gone for HTTP too")
		var n int64
		require.NoError(t, db.Unscoped().Model(&shopItem{}).Where("id = ?", it.ID).Count(&n).Error)
		assert.EqualValues(t, 1, n, "the row remains")

		// A client-chosen id held by the soft-deleted record: 409.
		r = c.do("PUT", path, `{"name":"again"}`, "If-None-Match", "*")
		assert.Contains(t, []int{http.StatusConflict, http.StatusBadRequest}, r.status, r.body)
	})
}

func TestCompositeKeyOverHTTP(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		db = db.Session(&gorm.Session{})
		db.Config.TranslateError = true // the duplicate below is still a 409
		c := appServer(t, db)
		r := c.do("POST", "/notes", `{"tenant_id":"acme","id":1,"text":"hi"}`)
		require.Equal(t, http.StatusCreated, r.status, r.body)
		assert.Equal(t, "/notes/acme%2C1", r.header.Get("Location"))
		r = c.do("POST", "/notes", `{"tenant_id":"beta","id":1,"text":"other tenant"}`)
		require.Equal(t, http.StatusCreated, r.status, r.body)
		r = c.do("POST", "/notes", `{"tenant_id":"acme","id":1,"text":"dup"}`)
		require.Equal(t, http.StatusConflict, r.status, r.body)

		for _, path := range []string{"/notes/acme,1", "/notes/acme%2C1"} {
			g := c.do("GET", path, "")
			require.Equal(t, http.StatusOK, g.status, path)
			var n tenantNote
			require.NoError(t, json.Unmarshal([]byte(g.body), &n))
			assert.Equal(t, "hi", n.Text)
		}
		g := c.do("GET", "/notes/acme,1", "")
		r = c.do("PUT", "/notes/acme,1", `{"tenant_id":"acme","id":1,"text":"changed"}`, "If-Match", g.etag())
		require.Equal(t, http.StatusOK, r.status, r.body)
		r = c.do("PUT", "/notes/acme,1", `{"text":"stale"}`, "If-Match", g.etag())
		require.Equal(t, http.StatusPreconditionFailed, r.status, r.body)
		r = c.do("PUT", "/notes/acme,1", `{"tenant_id":"beta","id":1,"text":"other record"}`, "If-Match", "*")
		require.Equal(t, http.StatusBadRequest, r.status, "a body naming another key")
		for _, bad := range []string{"/notes/acme", "/notes/acme,x", "/notes/acme,1,2"} {
			assert.Equal(t, http.StatusBadRequest, c.do("GET", bad, "").status, bad)
		}
		var beta tenantNote
		require.NoError(t, json.Unmarshal([]byte(c.do("GET", "/notes/beta,1", "").body), &beta))
		assert.Equal(t, "other tenant", beta.Text)
		d := c.do("GET", "/notes/acme,1", "")
		require.Equal(t, http.StatusNoContent, c.do("DELETE", "/notes/acme,1", "", "If-Match", d.etag()).status)
		assert.Equal(t, http.StatusNotFound, c.do("GET", "/notes/acme,1", "").status)
		assert.Equal(t, http.StatusOK, c.do("GET", "/notes/beta,1", "").status)
	})
}
