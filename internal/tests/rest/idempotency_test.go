package rest_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/rest"
)

// A request repeated with its Idempotency-Key gets the first request's
// outcome and is applied once; without the key the same repeat fails its
// precondition (the negative control).
func TestIdempotencyKeyRepeatsAreAppliedOnce(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		c := server(t, db, nil)

		// POST with the client's id, twice.
		r1 := c.do("POST", "/documents/", `{"id":"d1","title":"t"}`, "Idempotency-Key", "post-1")
		require.Equal(t, http.StatusCreated, r1.status, r1.body)
		r2 := c.do("POST", "/documents/", `{"id":"d1","title":"t"}`, "Idempotency-Key", "post-1")
		require.Equal(t, http.StatusCreated, r2.status, "a repeat is the first outcome, not 409: %s", r2.body)
		assert.Equal(t, r1.header.Get("Location"), r2.header.Get("Location"))
		assert.Equal(t, r1.etag(), r2.etag())
		require.Equal(t, http.StatusConflict, c.do("POST", "/documents/", `{"id":"d1","title":"t"}`).status, "without the key: 409")

		// POST with an id the server assigns, twice: one record.
		a1 := c.do("POST", "/accounts/", `{"owner":"idem","balance":1}`, "Idempotency-Key", `"post-2"`)
		require.Equal(t, http.StatusCreated, a1.status, a1.body)
		a2 := c.do("POST", "/accounts/", `{"owner":"idem","balance":1}`, "Idempotency-Key", `"post-2"`)
		require.Equal(t, http.StatusCreated, a2.status, a2.body)
		assert.Equal(t, a1.header.Get("Location"), a2.header.Get("Location"), "the same record, not a second one")
		var n int64
		require.NoError(t, db.Raw("SELECT count(*) FROM accounts WHERE owner = 'idem'").Scan(&n).Error)
		assert.EqualValues(t, 1, n)

		// PUT at a version, twice: the repeat is 200 with the record now.
		e1 := r1.etag()
		p1 := c.do("PUT", "/documents/d1", `{"title":"u"}`, "If-Match", e1, "Idempotency-Key", "put-1")
		require.Equal(t, http.StatusOK, p1.status, p1.body)
		p2 := c.do("PUT", "/documents/d1", `{"title":"u"}`, "If-Match", e1, "Idempotency-Key", "put-1")
		require.Equal(t, http.StatusOK, p2.status, "a repeat is 200, though If-Match no longer names the current version: %s", p2.body)
		assert.Equal(t, p1.etag(), p2.etag(), "applied once: no new version")
		assert.Equal(t, p1.etag(), c.do("GET", "/documents/d1", "").etag())
		require.Equal(t, http.StatusPreconditionFailed, c.do("PUT", "/documents/d1", `{"title":"u"}`, "If-Match", e1).status, "without the key: 412")

		// PUT If-None-Match: * (create only if absent), twice.
		n1 := c.do("PUT", "/documents/d2", `{"title":"n"}`, "If-None-Match", "*", "Idempotency-Key", "put-2")
		require.Equal(t, http.StatusCreated, n1.status, n1.body)
		n2 := c.do("PUT", "/documents/d2", `{"title":"n"}`, "If-None-Match", "*", "Idempotency-Key", "put-2")
		require.Equal(t, http.StatusCreated, n2.status, n2.body)
		assert.Equal(t, n1.etag(), n2.etag())

		// PUT If-Match: * (any version), twice.
		s1 := c.do("PUT", "/documents/d2", `{"title":"s"}`, "If-Match", "*", "Idempotency-Key", "put-3")
		require.Equal(t, http.StatusOK, s1.status, s1.body)
		s2 := c.do("PUT", "/documents/d2", `{"title":"s"}`, "If-Match", "*", "Idempotency-Key", "put-3")
		require.Equal(t, http.StatusOK, s2.status, s2.body)
		assert.Equal(t, s1.etag(), s2.etag(), "applied once")

		// DELETE, twice.
		require.Equal(t, http.StatusNoContent, c.do("DELETE", "/documents/d1", "", "If-Match", p1.etag(), "Idempotency-Key", "del-1").status)
		require.Equal(t, http.StatusNoContent, c.do("DELETE", "/documents/d1", "", "If-Match", p1.etag(), "Idempotency-Key", "del-1").status)
		require.Equal(t, http.StatusPreconditionFailed, c.do("DELETE", "/documents/d1", "", "If-Match", p1.etag()).status, "without the key: 412")
	})
}

// A key is bound to its request: another body, method or record with the
// same key is 422, and nothing is written. Malformed keys are 400.
func TestIdempotencyKeyMisuse(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		c := server(t, db, nil)
		r := c.do("POST", "/documents/", `{"id":"d1","title":"t"}`, "Idempotency-Key", "k")
		require.Equal(t, http.StatusCreated, r.status, r.body)
		e1 := r.etag()

		for name, req := range map[string][]string{
			"another body":   {"POST", "/documents/", `{"id":"d1","title":"other"}`},
			"another record": {"PUT", "/documents/d1", `{"title":"t"}`},
		} {
			got := c.do(req[0], req[1], req[2], "If-Match", e1, "Idempotency-Key", "k")
			require.Equal(t, http.StatusUnprocessableEntity, got.status, "%s: %s", name, got.body)
			got.problem(t)
		}
		p := c.do("PUT", "/documents/d1", `{"title":"x"}`, "If-Match", e1, "Idempotency-Key", "k2")
		require.Equal(t, http.StatusOK, p.status)
		got := c.do("PUT", "/documents/d1", `{"title":"y"}`, "If-Match", e1, "Idempotency-Key", "k2")
		require.Equal(t, http.StatusUnprocessableEntity, got.status, "a repeat with another body: %s", got.body)
		assert.Equal(t, "x", doc(t, c.do("GET", "/documents/d1", "").body).Title)

		for _, bad := range []string{"", `""`, strings.Repeat("k", 201), "a\tb", "é"} {
			got := c.do("PUT", "/documents/d1", `{"title":"z"}`, "If-Match", p.etag(), "Idempotency-Key", bad)
			require.Equal(t, http.StatusBadRequest, got.status, "key %q: %s", bad, got.body)
		}
		got = c.do("PUT", "/documents/d1", `{"title":"z"}`, "If-Match", p.etag(), "Idempotency-Key", "a", "Idempotency-Key", "b")
		require.Equal(t, http.StatusBadRequest, got.status, "two keys")
		assert.Equal(t, p.etag(), c.do("GET", "/documents/d1", "").etag(), "nothing written")
	})
}

// IdempotencyScope keeps clients apart: the same key from two scopes names
// two operations.
func TestIdempotencyScope(t *testing.T) {
	db := testdb.Open(t, "sqlite")
	c := server(t, db, nil, rest.WithIdempotencyScope(func(r *http.Request) string { return r.Header.Get("X-User") }))
	for _, user := range []string{"ann", "bob"} {
		r := c.do("POST", "/documents/", `{"id":"`+user+`","title":"t"}`, "Idempotency-Key", "same", "X-User", user)
		require.Equal(t, http.StatusCreated, r.status, "%s: %s", user, r.body)
	}
	r := c.do("POST", "/documents/", `{"id":"ann","title":"t"}`, "Idempotency-Key", "same", "X-User", "ann")
	require.Equal(t, http.StatusCreated, r.status, "ann's repeat: %s", r.body)
}
