package rest_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gormlock/gormlock/internal/tests/fixtures"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/repository"
	"github.com/gormlock/gormlock/rest"
)

// server serves the documents of db at /documents and the accounts at
// /accounts (each with rest.Mount), through a real net/http server.
func server(t *testing.T, db *gorm.DB, docOpts []repository.Option, opts ...rest.Option) *client {
	t.Helper()
	docs, err := repository.New[fixtures.Document](db, docOpts...)
	require.NoError(t, err)
	accounts, err := repository.New[fixtures.Account](db)
	require.NoError(t, err)
	dh, err := rest.New(docs, append([]rest.Option{rest.WithErrorLog(func(_ *http.Request, err error) { t.Errorf("500: %v", err) })}, opts...)...)
	require.NoError(t, err)
	ah, err := rest.New(accounts)
	require.NoError(t, err)
	mux := http.NewServeMux()
	rest.Mount(mux, "/documents", dh)
	rest.Mount(mux, "/accounts", ah)
	return serve(t, mux)
}

// serve serves h through a real net/http server for the test.
func serve(t *testing.T, h http.Handler) *client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &client{t: t, base: srv.URL}
}

// noRedirects is the tests' HTTP client: it returns a redirect as it is, so
// a 3xx is seen, never silently followed.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

type client struct {
	t    *testing.T
	base string
}

type response struct {
	status int
	header http.Header
	body   string
}

func (r response) etag() string { return r.header.Get("ETag") }

// problem decodes a problem-details body and checks its shape.
func (r response) problem(t *testing.T) rest.Problem {
	t.Helper()
	assert.Equal(t, "application/problem+json", r.header.Get("Content-Type"))
	var p rest.Problem
	require.NoError(t, json.Unmarshal([]byte(r.body), &p), r.body)
	assert.Equal(t, r.status, p.Status)
	assert.Equal(t, http.StatusText(r.status), p.Title)
	assert.Equal(t, "about:blank", p.Type)
	return p
}

func (c *client) do(method, path, body string, headers ...string) response {
	c.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	require.NoError(c.t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if http.CanonicalHeaderKey(headers[i]) == "Content-Type" {
			req.Header.Set(headers[i], headers[i+1]) // instead of the default
			continue
		}
		req.Header.Add(headers[i], headers[i+1])
	}
	res, err := noRedirects.Do(req)
	require.NoError(c.t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(c.t, err)
	return response{status: res.StatusCode, header: res.Header, body: string(b)}
}

func doc(t *testing.T, body string) fixtures.Document {
	t.Helper()
	var d fixtures.Document
	require.NoError(t, json.Unmarshal([]byte(body), &d), body)
	return d
}

func TestCreateAndGet(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		c := server(t, db, nil)
		r := c.do("POST", "/documents/", `{"id":"d 1","title":"hello","attrs":{"k":"v"}}`)
		require.Equal(t, http.StatusCreated, r.status, r.body)
		e1 := r.etag()
		assert.Equal(t, rest.ETag(doc(t, r.body).Version), e1)
		assert.Equal(t, "/documents/d%201", r.header.Get("Location"))
		assert.Equal(t, "hello", doc(t, r.body).Title)

		r = c.do("GET", "/documents/d%201", "")
		require.Equal(t, http.StatusOK, r.status)
		assert.Equal(t, e1, r.etag())
		assert.Equal(t, "application/json", r.header.Get("Content-Type"))
		assert.Equal(t, fixtures.Attributes{"k": "v"}, doc(t, r.body).Attrs)

		for _, inm := range []string{e1, "W/" + e1, `"7", ` + e1, `*`} {
			r = c.do("GET", "/documents/d%201", "", "If-None-Match", inm)
			assert.Equal(t, http.StatusNotModified, r.status, inm)
			assert.Equal(t, e1, r.etag())
			assert.Empty(t, r.body)
		}
		r = c.do("GET", "/documents/d%201", "", "If-None-Match", `"2"`)
		assert.Equal(t, http.StatusOK, r.status)

		r = c.do("POST", "/documents/", `{"id":"d 1","title":"again"}`)
		require.Equal(t, http.StatusConflict, r.status)
		r.problem(t)

		r = c.do("GET", "/documents/nope", "")
		require.Equal(t, http.StatusNotFound, r.status)
		r.problem(t)

		// An auto-increment key is assigned and returned.
		r = c.do("POST", "/accounts/", `{"owner":"ann","balance":5}`)
		require.Equal(t, http.StatusCreated, r.status, r.body)
		var a fixtures.Account
		require.NoError(t, json.Unmarshal([]byte(r.body), &a))
		assert.Equal(t, fmt.Sprintf("/accounts/%d", a.ID), r.header.Get("Location"))
		assert.Equal(t, http.StatusOK, c.do("GET", fmt.Sprintf("/accounts/%d", a.ID), "").status)
	})
}

func TestBadRequests(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		c := server(t, db, nil, rest.WithMaxBodyBytes(1024))
		created := c.do("POST", "/documents/", `{"id":"d1","title":"t"}`)
		require.Equal(t, http.StatusCreated, created.status)
		e1 := created.etag()
		cases := []struct {
			name   string
			method string
			path   string
			body   string
			hdr    []string
			status int
		}{
			{"malformed JSON", "POST", "/documents/", `{"id":`, nil, 400},
			{"unknown field", "POST", "/documents/", `{"id":"x","titel":"t"}`, nil, 400},
			{"two values", "POST", "/documents/", `{"id":"x"} {}`, nil, 400},
			{"trailing data", "POST", "/documents/", `{"id":"x"}]`, nil, 400},
			{"empty body", "POST", "/documents/", ``, []string{"Content-Type", "application/json"}, 400},
			{"empty key", "POST", "/documents/", `{"title":"t"}`, nil, 400},
			{"NUL byte", "POST", "/documents/", `{"id":"n","title":"a\u0000b"}`, nil, 0}, // 201 on SQLite, 400 on Postgres
			{"too large", "POST", "/documents/", `{"id":"x","title":"` + strings.Repeat("a", 2000) + `"}`, nil, 413},
			{"not JSON", "POST", "/documents/", ``, []string{"Content-Type", "text/plain"}, 415},
			{"no content type", "PUT", "/documents/d1", ``, []string{"If-Match", e1}, 415},
			{"malformed If-Match", "PUT", "/documents/d1", `{"title":"t"}`, []string{"If-Match", `1`}, 400},
			{"star and tags", "PUT", "/documents/d1", `{"title":"t"}`, []string{"If-Match", `*, ` + e1}, 400},
			{"malformed If-None-Match", "GET", "/documents/d1", ``, []string{"If-None-Match", `"1`}, 400},
			{"body moves the record", "PUT", "/documents/d1", `{"id":"d2","title":"t"}`, []string{"If-Match", e1}, 400},
			{"create and replace", "PUT", "/documents/d9", `{"title":"t"}`, []string{"If-Match", e1, "If-None-Match", "*"}, 412},
			{"null body", "PUT", "/documents/d1", `null`, []string{"If-Match", e1}, 400},
			{"array body", "POST", "/documents/", `[{"id":"x"}]`, nil, 400},
			{"dot-dot id", "POST", "/documents/", `{"id":"..","title":"t"}`, nil, 400},
			{"over the limit in trailing space", "POST", "/documents/", `{"id":"x"}` + strings.Repeat(" ", 2000), nil, 413},
			{"client-chosen auto-increment id", "POST", "/accounts/", `{"id":77,"owner":"o"}`, nil, 400},
			{"create-only PUT of an auto-increment id", "PUT", "/accounts/77", `{"owner":"o"}`, []string{"If-None-Match", "*"}, 400},
			{"integer id", "GET", "/accounts/abc", ``, nil, 400},
			{"id overflow", "GET", "/accounts/99999999999999999999", ``, nil, 400},
			{"zero id", "GET", "/accounts/0", ``, nil, 400},
			{"nested path", "GET", "/documents/a/b", ``, nil, 404},
			{"bad limit", "GET", "/documents/?limit=x", ``, nil, 400},
			{"limit too big", "GET", "/documents/?limit=100000", ``, nil, 400},
			{"negative offset", "GET", "/documents/?offset=-1", ``, nil, 400},
			{"PATCH record as JSON", "PATCH", "/documents/d1", `{}`, []string{"If-Match", e1}, 415},
			{"PATCH collection", "PATCH", "/documents/", `{}`, nil, 405},
			{"TRACE record", "TRACE", "/documents/d1", ``, nil, 405},
			{"DELETE collection", "DELETE", "/documents/", ``, nil, 405},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				r := c.do(tc.method, tc.path, tc.body, tc.hdr...)
				want := tc.status
				if want == 0 {
					want = map[string]int{"sqlite": 201, "postgres": 400, "mysql": 201}[db.Dialector.Name()]
				}
				require.Equal(t, want, r.status, r.body)
				if want >= 400 {
					r.problem(t)
				}
				if want == 405 {
					assert.NotEmpty(t, r.header.Get("Allow"))
				}
			})
		}
		// The database's refusals are 400 without the database's message.
		for _, path := range []string{"/documents/a%00b", "/documents/%FF"} {
			r := c.do("GET", path, "")
			require.Contains(t, []int{400, 404}, r.status, path)
			assert.NotContains(t, r.body, "SQLSTATE", path)
			assert.NotContains(t, r.body, "documents:", path)
		}
		// Nothing above changed d1.
		r := c.do("GET", "/documents/d1", "")
		assert.Equal(t, e1, r.etag())
		assert.Equal(t, "t", doc(t, r.body).Title)
	})
}

func TestConditionalPut(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		c := server(t, db, nil)
		created := c.do("POST", "/documents/", `{"id":"d1","title":"v1"}`)
		require.Equal(t, http.StatusCreated, created.status)
		e1 := created.etag()

		r := c.do("PUT", "/documents/d1", `{"title":"no precondition"}`)
		require.Equal(t, http.StatusPreconditionRequired, r.status)
		r.problem(t)

		// A body version is ignored: the version comes from If-Match.
		r = c.do("PUT", "/documents/d1", `{"id":"d1","title":"v2","version":99}`, "If-Match", e1)
		require.Equal(t, http.StatusOK, r.status, r.body)
		e2 := r.etag()
		got := doc(t, r.body)
		assert.Equal(t, rest.ETag(got.Version), e2)
		assert.Greater(t, got.Version, doc(t, created.body).Version)
		assert.Equal(t, "v2", got.Title)
		assert.False(t, got.CreatedAt.IsZero(), "the record keeps its creation time")

		r = c.do("PUT", "/documents/d1", `{"title":"stale"}`, "If-Match", e1)
		require.Equal(t, http.StatusPreconditionFailed, r.status)
		assert.Equal(t, e2, r.etag(), "412 carries the current ETag")
		r.problem(t)

		r = c.do("PUT", "/documents/d1", `{"title":"weak"}`, "If-Match", "W/"+e2)
		require.Equal(t, http.StatusPreconditionFailed, r.status, "a weak ETag never matches If-Match")

		r = c.do("PUT", "/documents/d1", `{"title":"v3"}`, "If-Match", e1+", "+e2, "If-Match", `"9"`)
		require.Equal(t, http.StatusOK, r.status, "a list naming the current version matches")
		e3 := r.etag()
		assert.NotContains(t, []string{e1, e2}, e3)

		r = c.do("PUT", "/documents/d1", `{"title":"v4"}`, "If-Match", `*`)
		require.Equal(t, http.StatusOK, r.status)
		e4 := r.etag()
		assert.NotContains(t, []string{e1, e2, e3}, e4)

		r = c.do("PUT", "/documents/d1", `{"title":"v5"}`, "If-Match", e4, "If-None-Match", e4)
		require.Equal(t, http.StatusPreconditionFailed, r.status)

		for _, im := range []string{`*`, e1} {
			r = c.do("PUT", "/documents/ghost", `{"title":"x"}`, "If-Match", im)
			require.Equal(t, http.StatusPreconditionFailed, r.status, im)
			assert.Empty(t, r.etag())
		}

		r = c.do("PUT", "/documents/new", `{"title":"created"}`, "If-None-Match", `*`)
		require.Equal(t, http.StatusCreated, r.status, r.body)
		eNew := r.etag()
		assert.Equal(t, rest.ETag(doc(t, r.body).Version), eNew)
		assert.Equal(t, "new", doc(t, r.body).ID)
		r = c.do("PUT", "/documents/new", `{"title":"again"}`, "If-None-Match", `*`)
		require.Equal(t, http.StatusPreconditionFailed, r.status)
		assert.Equal(t, eNew, r.etag())

		r = c.do("GET", "/documents/d1", "")
		assert.Equal(t, "v4", doc(t, r.body).Title)
		assert.Equal(t, e4, r.etag())
	})
}

func TestConditionalDelete(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		c := server(t, db, nil)
		etags := map[string]string{}
		for _, id := range []string{"d1", "d2"} {
			r := c.do("POST", "/documents/", `{"id":"`+id+`","title":"t"}`)
			require.Equal(t, http.StatusCreated, r.status)
			etags[id] = r.etag()
		}
		require.Equal(t, http.StatusPreconditionRequired, c.do("DELETE", "/documents/d1", "").status)
		r := c.do("DELETE", "/documents/d1", "", "If-Match", etags["d2"])
		require.Equal(t, http.StatusPreconditionFailed, r.status)
		assert.Equal(t, etags["d1"], r.etag())
		require.Equal(t, http.StatusNoContent, c.do("DELETE", "/documents/d1", "", "If-Match", etags["d1"]).status)
		require.Equal(t, http.StatusNotFound, c.do("GET", "/documents/d1", "").status)
		require.Equal(t, http.StatusPreconditionFailed, c.do("DELETE", "/documents/d1", "", "If-Match", etags["d1"]).status)
		require.Equal(t, http.StatusNoContent, c.do("DELETE", "/documents/d2", "", "If-Match", `*`).status)
		require.Equal(t, http.StatusPreconditionFailed, c.do("DELETE", "/documents/d2", "", "If-Match", `*`).status)
	})
}

// Without strict mode a missing If-Match means "whatever version is current".
func TestNonStrict(t *testing.T) {
	db := testdb.Open(t, "sqlite")
	c := server(t, db, nil, rest.WithStrict(false))
	created := c.do("POST", "/documents/", `{"id":"d1","title":"t"}`)
	require.Equal(t, http.StatusCreated, created.status)
	r := c.do("PUT", "/documents/d1", `{"title":"u"}`)
	require.Equal(t, http.StatusOK, r.status)
	assert.Greater(t, doc(t, r.body).Version, doc(t, created.body).Version)
	assert.Equal(t, rest.ETag(doc(t, r.body).Version), r.etag())
	require.Equal(t, http.StatusNotFound, c.do("PUT", "/documents/ghost", `{"title":"u"}`).status)
	require.Equal(t, http.StatusNoContent, c.do("DELETE", "/documents/d1", "").status)
	require.Equal(t, http.StatusNotFound, c.do("DELETE", "/documents/d1", "").status)
}

func TestList(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		c := server(t, db, nil)
		for i := range 5 {
			require.Equal(t, http.StatusCreated, c.do("POST", "/documents/", fmt.Sprintf(`{"id":"d%d","title":"t"}`, i)).status)
		}
		type pageT struct {
			Items  []fixtures.Document `json:"items"`
			Offset int                 `json:"offset"`
			Limit  int                 `json:"limit"`
			Next   *int                `json:"next_offset"`
		}
		var ids []string
		offset := 0
		for pages := 0; ; pages++ {
			require.Less(t, pages, 5)
			r := c.do("GET", fmt.Sprintf("/documents/?limit=2&offset=%d", offset), "")
			require.Equal(t, http.StatusOK, r.status)
			var p pageT
			require.NoError(t, json.Unmarshal([]byte(r.body), &p))
			for _, d := range p.Items {
				ids = append(ids, d.ID)
			}
			if p.Next == nil {
				break
			}
			offset = *p.Next
		}
		assert.Equal(t, []string{"d0", "d1", "d2", "d3", "d4"}, ids)
	})
}

// A leased record is 423 Locked with Retry-After, for writes (PUT, PATCH,
// DELETE) only.
func TestLeasedRecordIsLocked(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		c := server(t, db, []repository.Option{repository.WithLeases()})
		created := c.do("POST", "/documents/", `{"id":"d1","title":"t"}`)
		require.Equal(t, http.StatusCreated, created.status)
		docs, err := repository.New[fixtures.Document](db, repository.WithLeases())
		require.NoError(t, err)
		_, lease, err := docs.Leases().Acquire(context.Background(), "d1", "editor")
		require.NoError(t, err)

		require.Equal(t, http.StatusOK, c.do("GET", "/documents/d1", "").status)
		for _, im := range []string{created.etag(), `*`} {
			r := c.do("PUT", "/documents/d1", `{"title":"u"}`, "If-Match", im)
			require.Equal(t, http.StatusLocked, r.status, im)
			r.problem(t)
			assert.NotEmpty(t, r.header.Get("Retry-After"))
			r = c.do("PATCH", "/documents/d1", `{"title":"u"}`, "If-Match", im, "Content-Type", "application/merge-patch+json")
			require.Equal(t, http.StatusLocked, r.status, im)
			assert.NotEmpty(t, r.header.Get("Retry-After"))
			r = c.do("DELETE", "/documents/d1", "", "If-Match", im)
			require.Equal(t, http.StatusLocked, r.status, im)
		}
		require.NoError(t, docs.Leases().Release(context.Background(), lease))
		require.Equal(t, http.StatusOK, c.do("PUT", "/documents/d1", `{"title":"u"}`, "If-Match", created.etag()).status)
	})
}

// Two clients PUT with the same ETag at the same time, 100 times: exactly
// one wins each round, the other gets 412 with the winner's ETag.
func TestConcurrentPutsOneWins(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		c := server(t, db, nil)
		created := c.do("POST", "/documents/", `{"id":"d1","title":"t"}`)
		require.Equal(t, http.StatusCreated, created.status)
		etag := created.etag()
		seen := map[string]bool{etag: true}
		const rounds = 100
		for round := range rounds {
			start := make(chan struct{})
			var wg sync.WaitGroup
			got := make([]response, 2)
			for i := range got {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					got[i] = c.do("PUT", "/documents/d1", fmt.Sprintf(`{"title":"round %d client %d"}`, round, i), "If-Match", etag)
				}()
			}
			close(start)
			wg.Wait()
			statuses := []int{got[0].status, got[1].status}
			require.ElementsMatch(t, []int{http.StatusOK, http.StatusPreconditionFailed}, statuses, "round %d", round)
			next := got[0].etag()
			assert.Equal(t, next, got[1].etag(), "the loser's 412 carries the winner's ETag")
			assert.False(t, seen[next], "round %d: ETag %s was used before", round, next)
			seen[next] = true
			etag = next
		}
		r := c.do("GET", "/documents/d1", "")
		assert.Equal(t, etag, r.etag())
		assert.Len(t, seen, rounds+1, "one new ETag per round")
	})
}

func TestNewRefusesBadOptions(t *testing.T) {
	db := testdb.Open(t, "sqlite")
	docs, err := repository.New[fixtures.Document](db)
	require.NoError(t, err)
	for _, opt := range []rest.Option{rest.WithMaxBodyBytes(0), rest.WithPageLimits(0, 1), rest.WithPageLimits(5, 4)} {
		_, err := rest.New(docs, opt)
		require.Error(t, err)
	}
	_, err = rest.New[fixtures.Document](nil)
	require.Error(t, err)
}

// Negative control: a handler that checks If-Match and then writes without
// the version guard lets both clients "win" the same round: the check and the
// write are not atomic, and one client's update is silently lost. Both
// requests of a round meet after their checks, before their writes (the
// interleaving a busy server produces by chance), so that every round shows
// it: left to chance, a loaded machine ran the two one after the other in
// all 100 rounds.
func TestCheckThenWriteLosesUpdates(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		docs, err := repository.New[fixtures.Document](db)
		require.NoError(t, err)
		require.NoError(t, docs.Create(context.Background(), &fixtures.Document{ID: "d1", Title: "t"}))
		var checked atomic.Pointer[sync.WaitGroup] // the round's meeting point
		naive := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			cur, err := docs.Get(r.Context(), "d1")
			if err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			if r.Header.Get("If-Match") != rest.ETag(cur.Version) {
				w.WriteHeader(http.StatusPreconditionFailed)
				return
			}
			if wg := checked.Load(); wg != nil {
				wg.Done()
				wg.Wait()
			}
			var body fixtures.Document
			if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			cur.Title = body.Title
			cur.Version++
			if err := db.WithContext(r.Context()).Save(cur).Error; err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			w.WriteHeader(http.StatusOK)
		})
		srv := httptest.NewServer(naive)
		defer srv.Close()
		c := &client{t: t, base: srv.URL}
		bothWon := 0
		for round := range 100 {
			cur, err := docs.Get(context.Background(), "d1")
			require.NoError(t, err)
			start := make(chan struct{})
			var wg, meet sync.WaitGroup
			meet.Add(2)
			checked.Store(&meet)
			got := make([]int, 2)
			for i := range got {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					got[i] = c.do("PUT", "/documents/d1", fmt.Sprintf(`{"title":"round %d client %d"}`, round, i), "If-Match", rest.ETag(cur.Version)).status
				}()
			}
			close(start)
			wg.Wait()
			if got[0] == http.StatusOK && got[1] == http.StatusOK {
				bothWon++
			}
		}
		require.Equal(t, 100, bothWon, "check-then-write lets both clients win every round")
		t.Logf("%s: both clients got 200 in %d of 100 rounds (one update lost each time)", db.Dialector.Name(), bothWon)
	})
}

// A key too long for the database's index is the client's mistake: 400.
func TestVeryLongIDIsBadRequest(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		c := server(t, db, nil)
		// Incompressible, so PostgreSQL cannot squeeze it into its index.
		var b strings.Builder
		for i := 0; b.Len() < 6000; i++ {
			sum := sha256.Sum256([]byte{byte(i), byte(i >> 8)})
			b.WriteString(hex.EncodeToString(sum[:]))
		}
		id := b.String()
		r := c.do("POST", "/documents/", `{"id":"`+id+`","title":"t"}`)
		want := map[string]int{"sqlite": 201, "postgres": 400, "mysql": 400}[db.Dialector.Name()]
		require.Equal(t, want, r.status, r.body)
		assert.NotContains(t, r.body, "SQLSTATE")
	})
}

// Only the writable fields come from a body: not the timestamps, and the
// response is the JSON a later GET returns.
func TestBodyCannotSetTimestamps(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		c := server(t, db, nil)
		r := c.do("POST", "/documents/", `{"id":"d1","title":"t","created_at":"1999-01-01T00:00:00Z","updated_at":"1999-01-01T00:00:00Z"}`)
		require.Equal(t, http.StatusCreated, r.status, r.body)
		created := doc(t, r.body)
		assert.Greater(t, created.CreatedAt.Year(), 2000)
		assert.Greater(t, created.UpdatedAt.Year(), 2000)
		get := c.do("GET", "/documents/d1", "")
		assert.Equal(t, r.etag(), get.etag())
		assert.JSONEq(t, r.body, get.body, "one ETag, one representation")

		r = c.do("PUT", "/documents/d2", `{"title":"t","created_at":"1999-01-01T00:00:00Z"}`, "If-None-Match", "*")
		require.Equal(t, http.StatusCreated, r.status, r.body)
		assert.Greater(t, doc(t, r.body).CreatedAt.Year(), 2000)
	})
}

// If-None-Match counts on PUT and DELETE too (RFC 9110, 13.2.2).
func TestIfNoneMatchOnWrites(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		c := server(t, db, nil)
		created := c.do("POST", "/documents/", `{"id":"d1","title":"t"}`)
		require.Equal(t, http.StatusCreated, created.status)
		e1 := created.etag()
		r := c.do("PUT", "/documents/d1", `{"title":"u"}`, "If-Match", "*", "If-None-Match", e1)
		require.Equal(t, http.StatusPreconditionFailed, r.status)
		assert.Equal(t, e1, r.etag())
		r = c.do("DELETE", "/documents/d1", "", "If-Match", e1, "If-None-Match", "W/"+e1)
		require.Equal(t, http.StatusPreconditionFailed, r.status)
		r = c.do("PUT", "/documents/d1", `{"title":"u"}`, "If-Match", "*", "If-None-Match", `"7"`)
		require.Equal(t, http.StatusOK, r.status)
		require.Equal(t, http.StatusNoContent, c.do("DELETE", "/documents/d1", "", "If-Match", r.etag(), "If-None-Match", e1).status)
	})
}
