package rest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
	"github.com/gormlock/gormlock/rest"
)

// documents returns the documents' repository on db.
func documents() *repository.Repository[Document] {
	docs, err := repository.New[Document](db)
	if err != nil {
		panic(err)
	}
	return docs
}

// send serves one request on h, with headers given as name, value pairs,
// and returns the response.
func send(h http.Handler, method, path, body string, headers ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// The handler serves paths relative to where it is mounted: "/" is the
// collection, "/{id}" a record.
func ExampleHandler_ServeHTTP() {
	docs := documents()
	h, err := rest.New(docs)
	if err != nil {
		panic(err)
	}

	w := send(h, "POST", "/", `{"id":"d1","title":"draft"}`)
	fmt.Println("POST /:", w.Code, w.Header().Get("Location"))
	etag := w.Header().Get("ETag")

	w = send(h, "GET", "/d1", "")
	var d Document
	_ = json.Unmarshal(w.Body.Bytes(), &d)
	fmt.Println("GET /d1:", w.Code, d.Title, "same ETag:", w.Header().Get("ETag") == etag)

	w = send(h, "GET", "/d1", "", "If-None-Match", etag)
	fmt.Println("GET /d1 If-None-Match:", w.Code)
	// Prints:
	// POST /: 201 /d1
	// GET /d1: 200 draft same ETag: true
	// GET /d1 If-None-Match: 304
}

// By default a write must name the version it replaces (If-Match);
// WithStrict(false) lets a write without If-Match replace whatever version is
// current.
func ExampleWithStrict() {
	docs := documents()
	_ = docs.Create(context.Background(), &Document{ID: "d1", Title: "draft"})

	strict, _ := rest.New(docs)
	w := send(strict, "PUT", "/d1", `{"title":"final"}`)
	fmt.Println("strict:", w.Code, http.StatusText(w.Code))

	lenient, _ := rest.New(docs, rest.WithStrict(false))
	w = send(lenient, "PUT", "/d1", `{"title":"final"}`)
	fmt.Println("lenient:", w.Code, http.StatusText(w.Code))
	// Prints:
	// strict: 428 Precondition Required
	// lenient: 200 OK
}

func ExampleWithMaxBodyBytes() {
	docs := documents()
	h, err := rest.New(docs, rest.WithMaxBodyBytes(64))
	if err != nil {
		panic(err)
	}
	w := send(h, "POST", "/", `{"id":"d1","title":"`+strings.Repeat("x", 100)+`"}`)
	fmt.Println(w.Code, http.StatusText(w.Code))

	_, err = rest.New(docs, rest.WithMaxBodyBytes(0))
	fmt.Println(errors.Is(err, locking.ErrInvalidArgument))
	// Prints:
	// 413 Request Entity Too Large
	// true
}

// A list is a page of items and the offset of the next page, null on the
// last one.
func ExampleWithPageLimits() {
	docs := documents()
	for _, id := range []string{"a", "b", "c"} {
		_ = docs.Create(context.Background(), &Document{ID: id, Title: id})
	}
	h, err := rest.New(docs, rest.WithPageLimits(2, 10))
	if err != nil {
		panic(err)
	}

	var page struct {
		Items      []Document `json:"items"`
		NextOffset *int       `json:"next_offset"`
	}
	_ = json.Unmarshal(send(h, "GET", "/", "").Body.Bytes(), &page)
	fmt.Println("items:", len(page.Items), "next offset:", *page.NextOffset)

	fmt.Println("?limit=11:", send(h, "GET", "/?limit=11", "").Code)
	// Prints:
	// items: 2 next offset: 2
	// ?limit=11: 400
}

// The client of a 500 gets no detail; WithErrorLog gets the error.
func ExampleWithErrorLog() {
	docs := documents()
	h, err := rest.New(docs, rest.WithErrorLog(func(r *http.Request, err error) {
		fmt.Println("logged:", r.Method, r.URL.Path, strings.Contains(err.Error(), "no such table"))
	}))
	if err != nil {
		panic(err)
	}
	_ = db.Exec(`DROP TABLE documents`) // something unexpected

	w := send(h, "GET", "/d1", "")
	var p rest.Problem
	_ = json.Unmarshal(w.Body.Bytes(), &p)
	fmt.Printf("%d %s %q\n", p.Status, p.Title, p.Detail)
	// Prints:
	// logged: GET /d1 true
	// 500 Internal Server Error "internal error"
}

// A request repeated with its Idempotency-Key gets the first one's outcome.
// WithIdempotencyScope keeps clients' keys apart: with it, bob's key is his own
// even when alice chose it too; without it, bob's request with alice's key
// is refused (422).
func ExampleWithIdempotencyScope() {
	docs := documents()
	h, err := rest.New(docs, rest.WithIdempotencyScope(func(r *http.Request) string {
		return r.Header.Get("X-User") // in a real server, the authenticated user
	}))
	if err != nil {
		panic(err)
	}
	alice, bob := `{"id":"a1","title":"alice's"}`, `{"id":"b1","title":"bob's"}`
	fmt.Println("alice:", send(h, "POST", "/", alice, "X-User", "alice", "Idempotency-Key", "k1").Code)
	fmt.Println("alice retries:", send(h, "POST", "/", alice, "X-User", "alice", "Idempotency-Key", "k1").Code)
	fmt.Println("bob, same key:", send(h, "POST", "/", bob, "X-User", "bob", "Idempotency-Key", "k1").Code)

	unscoped, _ := rest.New(docs)
	alice, bob = `{"id":"a2","title":"alice's"}`, `{"id":"b2","title":"bob's"}`
	fmt.Println("unscoped, alice:", send(unscoped, "POST", "/", alice, "Idempotency-Key", "k2").Code)
	fmt.Println("unscoped, bob, same key:", send(unscoped, "POST", "/", bob, "Idempotency-Key", "k2").Code)
	// Prints:
	// alice: 201
	// alice retries: 201
	// bob, same key: 201
	// unscoped, alice: 201
	// unscoped, bob, same key: 422
}

// Every error is a problem details object (RFC 9457).
func ExampleProblem() {
	docs := documents()
	h, _ := rest.New(docs)
	_ = send(h, "POST", "/", `{"id":"d1","title":"draft"}`)

	w := send(h, "PUT", "/d1", `{"title":"final"}`, "If-Match", `"1"`) // not the current version
	var p rest.Problem
	_ = json.Unmarshal(w.Body.Bytes(), &p)
	fmt.Println(w.Header().Get("Content-Type"))
	fmt.Println(p.Status, p.Title, p.Type)
	// Prints:
	// application/problem+json
	// 412 Precondition Failed about:blank
}

// A stale PUT's 412 carries the current ETag and, in its "fields" member,
// the fields that differ between the request's record and the current one.
func ExampleProblem_fields() {
	docs := documents()
	h, _ := rest.New(docs)
	created := send(h, "POST", "/", `{"id":"d2","title":"draft"}`)
	read := created.Header().Get("ETag")
	_ = send(h, "PUT", "/d2", `{"title":"final"}`, "If-Match", read)

	w := send(h, "PUT", "/d2", `{"title":"draft","attrs":{"lang":"en"}}`, "If-Match", read) // from the first read
	var p rest.Problem
	_ = json.Unmarshal(w.Body.Bytes(), &p)
	fmt.Println(p.Status, "current ETag:", w.Header().Get("ETag") != read, "fields:", p.Fields)
	// Prints:
	// 412 current ETag: true fields: [title attrs]
}
