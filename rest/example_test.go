package rest_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/gormlock/gormlock/migrations"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/opendb"
	"github.com/gormlock/gormlock/repository"
	"github.com/gormlock/gormlock/rest"
)

// Two clients hold the same ETag; the first PUT wins, the second gets 412
// with the current ETag instead of erasing the first one's change.
func ExampleNew() {
	dir, _ := os.MkdirTemp("", "gormlock-rest-example")
	defer os.RemoveAll(dir)
	db, err := opendb.SQLite(filepath.Join(dir, "docs.db"))
	if err != nil {
		panic(err)
	}
	defer opendb.Close(db)
	if err := migrations.Up(context.Background(), db); err != nil {
		panic(err)
	}
	docs, _ := repository.New[models.Document](db)
	d1 := &models.Document{ID: "d1", Title: "draft"}
	_ = docs.Create(context.Background(), d1)
	read := rest.ETag(d1.Version) // what both clients got from GET

	h, _ := rest.New(docs)
	mux := http.NewServeMux()
	mux.Handle("/documents/", http.StripPrefix("/documents", h))
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
	// Output:
	// alice: 200 new ETag: true alice's ETag: true
	// bob: 412 new ETag: true alice's ETag: true
}
