package rest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gormlock/gormlock/internal/tests/fixtures"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/repository"
	"github.com/gormlock/gormlock/rest"
)

// Mounted with rest.Mount, the collection answers with and without the
// trailing slash: POST creates (201), GET lists (200), never a redirect.
func TestMountServesCollectionWithAndWithoutSlash(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		c := server(t, db, nil)
		for i, path := range []string{"/documents", "/documents/"} {
			r := c.do("POST", path, fmt.Sprintf(`{"id":"d%d","title":"t"}`, i))
			require.Equal(t, http.StatusCreated, r.status, "%s: %s", path, r.body)
			assert.Equal(t, fmt.Sprintf("/documents/d%d", i), r.header.Get("Location"), path)
			assert.Equal(t, http.StatusOK, c.do("GET", r.header.Get("Location"), "").status)

			r = c.do("GET", path+"?limit=1", "")
			require.Equal(t, http.StatusOK, r.status, path)
			var p struct {
				Items []fixtures.Document `json:"items"`
				Next  *int                `json:"next_offset"`
			}
			require.NoError(t, json.Unmarshal([]byte(r.body), &p))
			assert.Len(t, p.Items, 1)
			assert.Equal(t, http.StatusOK, c.do("HEAD", path, "").status)
			assert.Equal(t, http.StatusMethodNotAllowed, c.do("DELETE", path, "").status)
		}
		r := c.do("GET", "/documents", "")
		assert.Contains(t, r.body, `"d0"`)
		assert.Contains(t, r.body, `"d1"`)

		for _, path := range []string{"/accounts", "/accounts/"} {
			r := c.do("POST", path, `{"owner":"o"}`)
			require.Equal(t, http.StatusCreated, r.status, "%s: %s", path, r.body)
			assert.Regexp(t, `^/accounts/\d+$`, r.header.Get("Location"))
		}
	})
}

// Negative control: mounted at "/documents/" alone, as the docs used to
// say, a POST to "/documents" is ServeMux's redirect and creates nothing
// (a client that does not follow it loses the body). The handler itself
// serves an empty path as the collection, so mounting it at both patterns
// is all it takes.
func TestMountingOnlyTheSlashPathRedirects(t *testing.T) {
	db := testdb.Open(t, "sqlite")
	docs, err := repository.New[fixtures.Document](db)
	require.NoError(t, err)
	h, err := rest.New(docs)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/documents/", http.StripPrefix("/documents", h))
	c := serve(t, mux)
	r := c.do("POST", "/documents", `{"id":"d1","title":"t"}`)
	require.True(t, r.status >= 300 && r.status < 400, "a redirect: %d %s", r.status, r.body)
	var n int64
	require.NoError(t, db.Model(&fixtures.Document{}).Count(&n).Error)
	assert.Zero(t, n, "nothing created")

	for _, path := range []string{"", "/"} {
		req := httptest.NewRequest("POST", "/documents", strings.NewReader(`{"id":"x`+fmt.Sprint(len(path))+`","title":"t"}`))
		req.URL.Path, req.URL.RawPath = path, ""
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		assert.Equal(t, http.StatusCreated, rec.Code, "path %q: %s", path, rec.Body)
		assert.Equal(t, "/documents/x"+fmt.Sprint(len(path)), rec.Header().Get("Location"))
	}
}

// Mount takes a prefix with or without its trailing slash, nested
// prefixes and the root, and refuses what is not a literal path.
func TestMountPrefixes(t *testing.T) {
	db := testdb.Open(t, "sqlite")
	docs, err := repository.New[fixtures.Document](db)
	require.NoError(t, err)
	h, err := rest.New(docs)
	require.NoError(t, err)

	mux := http.NewServeMux()
	rest.Mount(mux, "/docs/", h)
	rest.Mount(mux, "/v1/documents", h)
	c := serve(t, mux)
	for i, path := range []string{"/docs", "/docs/", "/v1/documents", "/v1/documents/"} {
		r := c.do("POST", path, fmt.Sprintf(`{"id":"m%d","title":"t"}`, i))
		require.Equal(t, http.StatusCreated, r.status, "%s: %s", path, r.body)
		assert.Equal(t, strings.TrimSuffix(path, "/")+fmt.Sprintf("/m%d", i), r.header.Get("Location"))
		assert.Equal(t, http.StatusOK, c.do("GET", r.header.Get("Location"), "").status)
	}
	assert.Equal(t, http.StatusNotFound, c.do("GET", "/docsx", "").status)
	assert.Equal(t, http.StatusNotFound, c.do("GET", "/docs/m0/x", "").status)

	root := http.NewServeMux()
	rest.Mount(root, "/", h)
	rc := serve(t, root)
	r := rc.do("POST", "/", `{"id":"r","title":"t"}`)
	require.Equal(t, http.StatusCreated, r.status, r.body)
	assert.Equal(t, "/r", r.header.Get("Location"))
	assert.Equal(t, http.StatusOK, rc.do("GET", "/r", "").status)

	for _, bad := range []string{"docs", "/{id}", "/a b", "/a%20b", "GET /docs"} {
		assert.Panics(t, func() { rest.Mount(http.NewServeMux(), bad, h) }, bad)
	}
	assert.Panics(t, func() { rest.Mount(mux, "/docs", h) }, "mounted twice")
}
