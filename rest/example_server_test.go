package rest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/gormlock/gormlock/repository"
	"github.com/gormlock/gormlock/rest"
)

// Two clients hold the same ETag; the first PUT wins, the second gets 412
// with the current ETag instead of erasing the first one's change.
func ExampleNew() {
	docs, _ := repository.New[Document](db)
	d1 := &Document{ID: "d1", Title: "draft"}
	_ = docs.Create(context.Background(), d1)
	read := rest.ETag(d1.Version) // what both clients got from GET

	h, _ := rest.New(docs)
	mux := http.NewServeMux()
	rest.Mount(mux, "/documents", h)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	var alicesETag string
	put := func(title string) {
		req, _ := http.NewRequest("PUT", srv.URL+"/documents/d1", strings.NewReader(`{"title":"`+title+`"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("If-Match", read)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		res.Body.Close()
		etag := res.Header.Get("ETag")
		if alicesETag == "" {
			alicesETag = etag
		}
		fmt.Println(title+":", res.StatusCode, "new ETag:", etag != read, "alice's ETag:", etag == alicesETag)
	}
	put("alice")
	put("bob")
	// Prints:
	// alice: 200 new ETag: true alice's ETag: true
	// bob: 412 new ETag: true alice's ETag: true
}

// Mount serves the collection with and without its trailing slash, so a
// POST to /documents creates instead of being redirected; a PATCH (a JSON
// merge patch) then changes only the fields it names.
func ExampleMount() {
	docs, _ := repository.New[Document](db)
	h, _ := rest.New(docs)
	mux := http.NewServeMux()
	rest.Mount(mux, "/documents", h)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	send := func(method, path, contentType, ifMatch, body string) *http.Response {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		if ifMatch != "" {
			req.Header.Set("If-Match", ifMatch)
		}
		res, err := http.DefaultTransport.RoundTrip(req) // no redirects followed
		if err != nil {
			panic(err)
		}
		return res
	}
	res := send("POST", "/documents", "application/json", "", `{"id":"d1","title":"draft","attrs":{"lang":"en"}}`)
	res.Body.Close()
	fmt.Println("POST /documents:", res.StatusCode, res.Header.Get("Location"))

	res = send("PATCH", "/documents/d1", "application/merge-patch+json", res.Header.Get("ETag"), `{"title":"final"}`)
	var d Document
	_ = json.NewDecoder(res.Body).Decode(&d)
	res.Body.Close()
	fmt.Println("PATCH:", res.StatusCode, d.Title, d.Attrs["lang"])
	// Prints:
	// POST /documents: 201 /documents/d1
	// PATCH: 200 final en
}
