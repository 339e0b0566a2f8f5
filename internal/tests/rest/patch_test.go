package rest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/gormlock/gormlock/internal/tests/fixtures"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/rest"
)

// mergePatch is the Content-Type of a PATCH body.
const mergePatch = "application/merge-patch+json"

// patch sends a JSON merge patch.
func (c *client) patch(path, body string, headers ...string) response {
	c.t.Helper()
	return c.do("PATCH", path, body, append([]string{"Content-Type", mergePatch}, headers...)...)
}

// A PATCH changes the fields it names and keeps the others; a PUT with the
// same partial body blanks them (the negative control).
func TestPatchKeepsWhatItDoesNotName(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		c := server(t, db, nil)
		for _, id := range []string{"put", "patch"} {
			r := c.do("POST", "/documents/", `{"id":"`+id+`","title":"title","attrs":{"a":"1","b":"2"}}`)
			require.Equal(t, http.StatusCreated, r.status, r.body)
		}

		// Negative control: PUT replaces, so what it does not name is blanked.
		put := c.do("PUT", "/documents/put", `{"attrs":{"b":"3"}}`, "If-Match", "*")
		require.Equal(t, http.StatusOK, put.status, put.body)
		assert.Empty(t, doc(t, put.body).Title, "PUT blanks the title it did not name")
		assert.Equal(t, fixtures.Attributes{"b": "3"}, doc(t, put.body).Attrs)

		created := c.do("GET", "/documents/patch", "")
		e1 := created.etag()
		r := c.patch("/documents/patch", `{"attrs":{"b":"3"}}`, "If-Match", e1)
		require.Equal(t, http.StatusOK, r.status, r.body)
		got := doc(t, r.body)
		assert.Equal(t, "title", got.Title, "PATCH keeps the title it did not name")
		assert.Equal(t, fixtures.Attributes{"a": "1", "b": "3"}, got.Attrs, "objects merge member by member")
		assert.Equal(t, rest.ETag(got.Version), r.etag())
		assert.NotEqual(t, e1, r.etag())
		get := c.do("GET", "/documents/patch", "")
		assert.Equal(t, r.etag(), get.etag())
		assert.JSONEq(t, r.body, get.body, "the answer is the record as stored")

		// null removes a member.
		r = c.patch("/documents/patch", `{"attrs":{"a":null,"c":"4"}}`, "If-Match", r.etag())
		require.Equal(t, http.StatusOK, r.status, r.body)
		assert.Equal(t, fixtures.Attributes{"b": "3", "c": "4"}, doc(t, r.body).Attrs)
		// null on a field makes it its zero value.
		r = c.patch("/documents/patch", `{"attrs":null}`, "If-Match", r.etag())
		require.Equal(t, http.StatusOK, r.status, r.body)
		assert.Empty(t, doc(t, r.body).Attrs)
		assert.Equal(t, "title", doc(t, r.body).Title)

		// The id (unchanged), the version and the timestamps are not the
		// patch's to set: the same id passes, the rest is ignored.
		before := doc(t, r.body)
		r = c.patch("/documents/patch", `{"id":"patch","title":"t2","version":1,"created_at":"1999-01-01T00:00:00Z","updated_at":null}`, "If-Match", r.etag())
		require.Equal(t, http.StatusOK, r.status, r.body)
		after := doc(t, r.body)
		assert.Equal(t, "t2", after.Title)
		assert.Greater(t, after.Version, before.Version)
		assert.True(t, after.CreatedAt.Equal(before.CreatedAt), "the creation time stays")
		assert.False(t, after.UpdatedAt.Before(before.UpdatedAt))
		r = c.patch("/documents/patch", `{"id":null}`, "If-Match", r.etag())
		require.Equal(t, http.StatusOK, r.status, "removing the id is ignored like leaving it out of a PUT: %s", r.body)
		assert.Equal(t, "patch", doc(t, r.body).ID)

		// An empty patch changes nothing but still writes a new version.
		r2 := c.patch("/documents/patch", `{}`, "If-Match", r.etag())
		require.Equal(t, http.StatusOK, r2.status, r2.body)
		assert.Equal(t, doc(t, r.body).Title, doc(t, r2.body).Title)

		// An auto-increment record: only the field named changes (and the
		// version and update time), every digit of the balance kept.
		a := c.do("POST", "/accounts/", `{"owner":"ann","balance":-9223372036854775808}`)
		require.Equal(t, http.StatusCreated, a.status, a.body)
		r = c.patch(a.header.Get("Location"), `{"frozen":true}`, "If-Match", a.etag())
		require.Equal(t, http.StatusOK, r.status, r.body)
		want, have := jsonObject(t, a.body), jsonObject(t, r.body)
		want["frozen"] = true
		for _, k := range []string{"version", "updated_at"} {
			assert.NotEqual(t, want[k], have[k], k)
			delete(want, k)
			delete(have, k)
		}
		assert.Equal(t, want, have)
	})
}

// jsonObject decodes a JSON object, numbers as json.Number.
func jsonObject(t *testing.T, s string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var m map[string]any
	require.NoError(t, dec.Decode(&m), s)
	return m
}

// PATCH is guarded by If-Match exactly like PUT.
func TestPatchConditions(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		c := server(t, db, nil)
		created := c.do("POST", "/documents/", `{"id":"d1","title":"v1"}`)
		require.Equal(t, http.StatusCreated, created.status)
		e1 := created.etag()

		r := c.patch("/documents/d1", `{"title":"no precondition"}`)
		require.Equal(t, http.StatusPreconditionRequired, r.status)
		r.problem(t)

		r = c.patch("/documents/d1", `{"title":"v2"}`, "If-Match", e1)
		require.Equal(t, http.StatusOK, r.status, r.body)
		e2 := r.etag()

		for _, im := range []string{e1, "W/" + e2, `"1795403112004242"`} {
			r = c.patch("/documents/d1", `{"title":"stale"}`, "If-Match", im)
			require.Equal(t, http.StatusPreconditionFailed, r.status, im)
			assert.Equal(t, e2, r.etag(), "412 carries the current ETag")
			r.problem(t)
		}
		r = c.patch("/documents/d1", `{"title":"v3"}`, "If-Match", e1+", "+e2)
		require.Equal(t, http.StatusOK, r.status, "a list naming the current version matches")
		e3 := r.etag()
		r = c.patch("/documents/d1", `{"title":"v4"}`, "If-Match", "*")
		require.Equal(t, http.StatusOK, r.status, r.body)
		e4 := r.etag()
		assert.NotContains(t, []string{e1, e2, e3}, e4)
		r = c.patch("/documents/d1", `{"title":"v5"}`, "If-Match", "*", "If-None-Match", e4)
		require.Equal(t, http.StatusPreconditionFailed, r.status)
		assert.Equal(t, e4, r.etag())

		// A missing record: If-Match fails (412, no ETag), If-None-Match: *
		// does not make PATCH create.
		for _, im := range []string{"*", e1} {
			r = c.patch("/documents/ghost", `{"title":"x"}`, "If-Match", im)
			require.Equal(t, http.StatusPreconditionFailed, r.status, im)
			assert.Empty(t, r.etag())
		}
		require.Equal(t, http.StatusPreconditionRequired, c.patch("/documents/ghost", `{"title":"x"}`, "If-None-Match", "*").status)
		require.Equal(t, http.StatusNotFound, c.do("GET", "/documents/ghost", "").status, "nothing created")

		r = c.do("GET", "/documents/d1", "")
		assert.Equal(t, "v4", doc(t, r.body).Title)
		assert.Equal(t, e4, r.etag())
	})
}

// Without strict mode a PATCH without If-Match patches whatever version is
// current, and a PATCH of a missing record is 404, never a create.
func TestPatchNonStrict(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		c := server(t, db, nil, rest.WithStrict(false))
		created := c.do("POST", "/documents/", `{"id":"d1","title":"t","attrs":{"k":"v"}}`)
		require.Equal(t, http.StatusCreated, created.status)
		r := c.patch("/documents/d1", `{"title":"u"}`)
		require.Equal(t, http.StatusOK, r.status, r.body)
		assert.Equal(t, "u", doc(t, r.body).Title)
		assert.Equal(t, fixtures.Attributes{"k": "v"}, doc(t, r.body).Attrs)
		for _, hdr := range [][]string{nil, {"If-None-Match", "*"}} {
			r = c.patch("/documents/ghost", `{"title":"u"}`, hdr...)
			require.Equal(t, http.StatusNotFound, r.status, "%v: %s", hdr, r.body)
			r.problem(t)
		}
		require.Equal(t, http.StatusNotFound, c.do("GET", "/documents/ghost", "").status, "nothing created")
	})
}

// A patch the record cannot take is refused before anything is written.
func TestPatchBadRequests(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		c := server(t, db, nil, rest.WithMaxBodyBytes(1024))
		created := c.do("POST", "/documents/", `{"id":"d1","title":"t"}`)
		require.Equal(t, http.StatusCreated, created.status)
		e1 := created.etag()
		acct := c.do("POST", "/accounts/", `{"owner":"o"}`)
		require.Equal(t, http.StatusCreated, acct.status)
		cases := []struct {
			name        string
			path        string
			body        string
			contentType string
			status      int
		}{
			{"JSON, not a merge patch", "/documents/d1", `{"title":"x"}`, "application/json", 415},
			{"JSON Patch (RFC 6902)", "/documents/d1", `[{"op":"replace","path":"/title","value":"x"}]`, "application/json-patch+json", 415},
			{"no content type", "/documents/d1", `{"title":"x"}`, "", 415},
			{"malformed content type", "/documents/d1", `{"title":"x"}`, "application/", 415},
			{"charset parameter", "/documents/d1", `{}`, mergePatch + "; charset=utf-8", 200},
			{"array", "/documents/d1", `[{"title":"x"}]`, mergePatch, 400},
			{"string", "/documents/d1", `"x"`, mergePatch, 400},
			{"number", "/documents/d1", `1`, mergePatch, 400},
			{"null", "/documents/d1", `null`, mergePatch, 400},
			{"empty", "/documents/d1", ``, mergePatch, 400},
			{"malformed JSON", "/documents/d1", `{"title":`, mergePatch, 400},
			{"two values", "/documents/d1", `{} {}`, mergePatch, 400},
			{"unknown field", "/documents/d1", `{"titel":"x"}`, mergePatch, 400},
			{"unknown nested in a known", "/documents/d1", `{"title":{"a":1}}`, mergePatch, 400},
			{"wrong type", "/documents/d1", `{"attrs":{"k":5}}`, mergePatch, 400},
			{"bad timestamp", "/documents/d1", `{"created_at":"yesterday"}`, mergePatch, 400},
			{"another id", "/documents/d1", `{"id":"d2"}`, mergePatch, 400},
			{"too large", "/documents/d1", `{"title":"` + strings.Repeat("a", 2000) + `"}`, mergePatch, 413},
			{"another auto-increment id", acct.header.Get("Location"), `{"id":999999}`, mergePatch, 400},
			{"fractional id", acct.header.Get("Location"), `{"id":1.5}`, mergePatch, 400},
			{"collection", "/documents/", `{}`, mergePatch, 405},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				cur := c.do("GET", tc.path, "")
				hdr := []string{"If-Match", "*"}
				if tc.contentType != "" {
					hdr = append(hdr, "Content-Type", tc.contentType)
				}
				r := c.do("PATCH", tc.path, tc.body, hdr...)
				require.Equal(t, tc.status, r.status, r.body)
				if tc.status >= 400 {
					r.problem(t)
					if tc.path != "/documents/" {
						assert.Equal(t, cur.etag(), c.do("GET", tc.path, "").etag(), "nothing written")
					}
				}
				switch tc.status {
				case 415:
					assert.Equal(t, mergePatch, r.header.Get("Accept-Patch"))
				case 405:
					assert.Equal(t, "GET, HEAD, POST, OPTIONS", r.header.Get("Allow"))
				}
			})
		}
		// The wrong content type is refused before the precondition.
		r := c.do("PATCH", "/documents/d1", `{"title":"x"}`)
		require.Equal(t, http.StatusUnsupportedMediaType, r.status)
		r = c.patch("/documents/d1", `[]`, "If-Match", `1`)
		require.Equal(t, http.StatusBadRequest, r.status, "a malformed If-Match")
		r = c.do("GET", "/documents/d1", "")
		assert.Equal(t, "t", doc(t, r.body).Title)
		assert.NotEqual(t, e1, r.etag(), "only the charset case wrote")
	})
}

// A record advertises its patch format: Accept-Patch on GET and OPTIONS,
// and the methods in Allow.
func TestPatchIsAdvertised(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		c := server(t, db, nil)
		created := c.do("POST", "/documents", `{"id":"d1","title":"t"}`)
		require.Equal(t, http.StatusCreated, created.status, created.body)
		for _, method := range []string{"GET", "HEAD"} {
			r := c.do(method, "/documents/d1", "")
			require.Equal(t, http.StatusOK, r.status)
			assert.Equal(t, mergePatch, r.header.Get("Accept-Patch"), method)
		}
		r := c.do("OPTIONS", "/documents/d1", "")
		require.Equal(t, http.StatusNoContent, r.status)
		assert.Equal(t, "GET, HEAD, PUT, PATCH, DELETE, OPTIONS", r.header.Get("Allow"))
		assert.Equal(t, mergePatch, r.header.Get("Accept-Patch"))
		for _, path := range []string{"/documents", "/documents/"} {
			r = c.do("OPTIONS", path, "")
			require.Equal(t, http.StatusNoContent, r.status, path)
			assert.Equal(t, "GET, HEAD, POST, OPTIONS", r.header.Get("Allow"), path)
		}
		r = c.do("TRACE", "/documents/d1", "")
		require.Equal(t, http.StatusMethodNotAllowed, r.status)
		assert.Equal(t, "GET, HEAD, PUT, PATCH, DELETE, OPTIONS", r.header.Get("Allow"))
	})
}

// A PATCH repeated with its Idempotency-Key is applied once; the key is
// bound to the method, so a PUT with the same key and body is another
// request (422).
func TestPatchIdempotencyKey(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		c := server(t, db, nil)
		created := c.do("POST", "/documents/", `{"id":"d1","title":"t"}`)
		require.Equal(t, http.StatusCreated, created.status)
		e1 := created.etag()

		p1 := c.patch("/documents/d1", `{"title":"u"}`, "If-Match", e1, "Idempotency-Key", "patch-1")
		require.Equal(t, http.StatusOK, p1.status, p1.body)
		p2 := c.patch("/documents/d1", `{"title":"u"}`, "If-Match", e1, "Idempotency-Key", "patch-1")
		require.Equal(t, http.StatusOK, p2.status, "a repeat is 200, though If-Match no longer names the current version: %s", p2.body)
		assert.Equal(t, p1.etag(), p2.etag(), "applied once: no new version")
		require.Equal(t, http.StatusPreconditionFailed, c.patch("/documents/d1", `{"title":"u"}`, "If-Match", e1).status, "without the key: 412")

		s1 := c.patch("/documents/d1", `{"title":"s"}`, "If-Match", "*", "Idempotency-Key", "patch-2")
		require.Equal(t, http.StatusOK, s1.status, s1.body)
		s2 := c.patch("/documents/d1", `{"title":"s"}`, "If-Match", "*", "Idempotency-Key", "patch-2")
		require.Equal(t, http.StatusOK, s2.status, s2.body)
		assert.Equal(t, s1.etag(), s2.etag(), "applied once")

		// The same key and body with PUT, or with another patch, is 422.
		got := c.do("PUT", "/documents/d1", `{"title":"s"}`, "If-Match", "*", "Idempotency-Key", "patch-2")
		require.Equal(t, http.StatusUnprocessableEntity, got.status, got.body)
		got.problem(t)
		got = c.patch("/documents/d1", `{"title":"other"}`, "If-Match", "*", "Idempotency-Key", "patch-2")
		require.Equal(t, http.StatusUnprocessableEntity, got.status, got.body)
		got = c.patch("/documents/d1", `{"title":"u"}`, "If-Match", e1, "Idempotency-Key", "bad\tkey")
		require.Equal(t, http.StatusBadRequest, got.status, got.body)
		assert.Equal(t, s1.etag(), c.do("GET", "/documents/d1", "").etag(), "nothing written")
	})
}

// Two clients PATCH with the same ETag at the same time: exactly one wins
// each round, the other gets 412 with the winner's ETag. With If-Match: *
// both patches apply, each merged into the version the other left, so
// neither change is lost; the same workload with PUT If-Match: * (each body
// built from the same read) keeps only one (the negative control).
func TestConcurrentPatches(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		c := server(t, db, nil)
		created := c.do("POST", "/documents/", `{"id":"d1","title":"t","attrs":{}}`)
		require.Equal(t, http.StatusCreated, created.status)
		etag := created.etag()
		race := func(send func(i int) response) []response {
			start := make(chan struct{})
			var wg sync.WaitGroup
			got := make([]response, 2)
			for i := range got {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					got[i] = send(i)
				}()
			}
			close(start)
			wg.Wait()
			return got
		}
		const rounds = 30
		for round := range rounds {
			got := race(func(i int) response {
				return c.patch("/documents/d1", fmt.Sprintf(`{"title":"round %d client %d"}`, round, i), "If-Match", etag)
			})
			require.ElementsMatch(t, []int{http.StatusOK, http.StatusPreconditionFailed}, []int{got[0].status, got[1].status}, "round %d", round)
			assert.Equal(t, got[0].etag(), got[1].etag(), "the loser's 412 carries the winner's ETag")
			etag = got[0].etag()
		}

		for round := range rounds {
			got := race(func(i int) response {
				return c.patch("/documents/d1", fmt.Sprintf(`{"attrs":{"r%d c%d":"x"}}`, round, i), "If-Match", "*")
			})
			require.Equal(t, []int{http.StatusOK, http.StatusOK}, []int{got[0].status, got[1].status}, "round %d", round)
		}
		attrs := doc(t, c.do("GET", "/documents/d1", "").body).Attrs
		assert.Len(t, attrs, 2*rounds, "every client's member survives")

		lost := 0
		for round := range rounds {
			got := race(func(i int) response {
				return c.do("PUT", "/documents/d1", fmt.Sprintf(`{"title":"t","attrs":{"base":"x","c%d":"x"}}`, i), "If-Match", "*")
			})
			require.Equal(t, []int{http.StatusOK, http.StatusOK}, []int{got[0].status, got[1].status}, "round %d", round)
			if len(doc(t, c.do("GET", "/documents/d1", "").body).Attrs) < 3 {
				lost++
			}
		}
		assert.Equal(t, rounds, lost, "PUT If-Match: * replaces: one client's change is lost every round")
	})
}

// member is a model with a column its JSON does not show, and a unique
// column besides its auto-increment key. Its table is made by AutoMigrate.
type member struct {
	models.Model
	Email  string `gorm:"column:email;not null;uniqueIndex" json:"email"`
	Name   string `gorm:"column:name;not null" json:"name"`
	Secret string `gorm:"column:secret;not null" json:"-"`
}

func (member) TableName() string { return "members" }

// A PATCH and a PUT keep a column the JSON does not show (json:"-"): the
// request's record, decoded from JSON, holds its zero value, which is not
// the client's to write (as in Spring Data REST, DATAREST-461). The
// negative control: the column is writable, and a repository Update of a
// record decoded the same way erases it.
func TestPatchKeepsHiddenFields(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		c, members := uniqueServer(t, db)
		ctx := context.Background()
		m := &member{Email: "ann@example.com", Name: "Ann", Secret: "s3cret"}
		require.NoError(t, members.Create(ctx, m))
		path := fmt.Sprintf("/members/%d", m.ID)
		r := c.do("GET", path, "")
		require.Equal(t, http.StatusOK, r.status)
		assert.NotContains(t, r.body, "s3cret")

		r = c.patch(path, `{"name":"Ann B."}`, "If-Match", r.etag())
		require.Equal(t, http.StatusOK, r.status, r.body)
		got, err := members.Get(ctx, m.ID)
		require.NoError(t, err)
		assert.Equal(t, "Ann B.", got.Name)
		assert.Equal(t, "s3cret", got.Secret, "PATCH keeps the hidden column")

		r = c.do("PUT", path, `{"email":"ann@example.com","name":"Ann C."}`, "If-Match", r.etag())
		require.Equal(t, http.StatusOK, r.status, r.body)
		assert.NotContains(t, r.body, "s3cret")
		got, err = members.Get(ctx, m.ID)
		require.NoError(t, err)
		assert.Equal(t, "Ann C.", got.Name)
		assert.Equal(t, "s3cret", got.Secret, "PUT keeps the hidden column")

		var decoded member
		require.NoError(t, json.Unmarshal([]byte(`{"email":"ann@example.com","name":"Ann D."}`), &decoded))
		decoded.ID, decoded.Version = got.ID, got.Version
		require.NoError(t, members.Update(ctx, &decoded))
		got, err = members.Get(ctx, m.ID)
		require.NoError(t, err)
		assert.Empty(t, got.Secret, "negative control: the column is writable")
	})
}
