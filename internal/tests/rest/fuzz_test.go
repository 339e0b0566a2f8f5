package rest_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"testing"

	"github.com/gormlock/gormlock/internal/tests/fixtures"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/repository"
	"github.com/gormlock/gormlock/rest"
)

var methods = []string{"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"}

// FuzzHandler sends random methods, paths, conditional headers, content
// types and bodies to the documents and accounts handlers on SQLite. The
// handler must never panic and never answer a client's mistake with a 5xx.
// The corpus in testdata/fuzz/FuzzHandler runs with every go test.
func FuzzHandler(f *testing.F) {
	f.Add("GET", "/documents/d1", "", "", "", []byte(nil))
	f.Add("GET", "/documents/d1", "", `W/"1"`, "", []byte(nil))
	f.Add("POST", "/documents/", "", "", "application/json", []byte(`{"id":"x","title":"t","attrs":{"a":"b"}}`))
	f.Add("PUT", "/documents/d1", `"1"`, "", "application/json", []byte(`{"title":"t"}`))
	f.Add("PUT", "/documents/d2", "", "*", "application/json; charset=utf-8", []byte(`{"id":"d2"}`))
	f.Add("PUT", "/documents/d1", "*", "", "application/merge-patch+json", []byte(`{"attrs":null}`))
	f.Add("PATCH", "/documents/d1", "*", "", "application/merge-patch+json", []byte(`{"attrs":{"a":null,"b":"c"},"title":"t"}`))
	f.Add("PATCH", "/documents/d1", `"1"`, "", "application/merge-patch+json; charset=utf-8", []byte(`{"id":"d1","version":1}`))
	f.Add("PATCH", "/accounts/1", "*", "", "application/merge-patch+json", []byte(`{"balance":1e400}`))
	f.Add("POST", "/documents", "", "", "application/json", []byte(`{"id":"y","title":"t"}`))
	f.Add("OPTIONS", "/documents/d1", "", "", "", []byte(nil))
	f.Add("DELETE", "/documents/d1", `"1", W/"2"`, "", "", []byte(nil))
	f.Add("GET", "/documents/?limit=2&offset=1", "", "", "", []byte(nil))
	f.Add("POST", "/accounts/", "", "", "application/json", []byte(`{"owner":"o","balance":-9223372036854775808}`))
	f.Add("PUT", "/accounts/1", `"1"`, "", "application/json", []byte(`{"id":1.5}`))
	f.Add("GET", "/accounts/-1", "", "", "", []byte(nil))

	// SQLite always; PostgreSQL too when it is configured, since it
	// refuses values SQLite takes (NUL bytes, invalid UTF-8, huge keys).
	dialects := []string{"sqlite"}
	if os.Getenv(testdb.PostgresEnv) != "" {
		dialects = append(dialects, "postgres")
	}
	var serverErr error
	logErr := rest.WithErrorLog(func(_ *http.Request, err error) { serverErr = err })
	var muxes []*http.ServeMux
	for _, d := range dialects {
		db := testdb.Open(f, d)
		docs, err := repository.New[fixtures.Document](db)
		if err != nil {
			f.Fatal(err)
		}
		accounts, err := repository.New[fixtures.Account](db)
		if err != nil {
			f.Fatal(err)
		}
		if err := docs.Create(context.Background(), &fixtures.Document{ID: "d1", Title: "t"}); err != nil {
			f.Fatal(err)
		}
		dh, err := rest.New(docs, logErr, rest.WithMaxBodyBytes(4096))
		if err != nil {
			f.Fatal(err)
		}
		ah, err := rest.New(accounts, logErr)
		if err != nil {
			f.Fatal(err)
		}
		mux := http.NewServeMux()
		rest.Mount(mux, "/documents", dh)
		rest.Mount(mux, "/accounts", ah)
		muxes = append(muxes, mux)
	}

	f.Fuzz(func(t *testing.T, method, path, ifMatch, ifNoneMatch, contentType string, body []byte) {
		for i, mux := range muxes {
			fuzzOne(t, dialects[i], mux, &serverErr, method, path, ifMatch, ifNoneMatch, contentType, body)
		}
	})
}

func fuzzOne(t *testing.T, dialect string, mux *http.ServeMux, serverErr *error, method, path, ifMatch, ifNoneMatch, contentType string, body []byte) {
	{
		// Inputs no server would pass on (a method that is not a token, a
		// path that does not parse) are folded into ones it would, so every
		// corpus entry exercises the handler.
		req, err := http.NewRequest(method, "http://example.com"+path, bytes.NewReader(body))
		if err != nil {
			method = methods[len(method)%len(methods)]
			req, err = http.NewRequest(method, "http://example.com/documents/"+url.PathEscape(path), bytes.NewReader(body))
		}
		if err != nil || req.URL.Path == "" || req.URL.Path[0] != '/' {
			req, err = http.NewRequest(method, "http://example.com/documents/"+url.PathEscape(path), bytes.NewReader(body))
			if err != nil {
				t.Fatalf("folded request: %v", err)
			}
		}
		req.RequestURI = req.URL.RequestURI()
		for name, v := range map[string]string{"If-Match": ifMatch, "If-None-Match": ifNoneMatch, "Content-Type": contentType} {
			if v != "" {
				req.Header.Set(name, v)
			}
		}
		*serverErr = nil
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s: %s %s: %d %s (server error: %v)", dialect, method, path, rec.Code, rec.Body.String(), *serverErr)
		}
		list := req.Method == "GET" && slices.Contains([]string{"/documents", "/documents/", "/accounts", "/accounts/"}, req.URL.Path)
		if rec.Code < 300 && rec.Code != http.StatusNoContent && req.Method != "HEAD" && !list && rec.Header().Get("ETag") == "" {
			t.Fatalf("%s: %s %s: %d without an ETag", dialect, method, path, rec.Code)
		}
	}
}
