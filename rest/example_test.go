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

// Two clients hold ETag "1"; the first PUT wins, the second gets 412 with
// the current ETag instead of erasing the first one's change.
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
	_ = docs.Create(context.Background(), &models.Document{ID: "d1", Title: "draft"})

	h, _ := rest.New(docs)
	mux := http.NewServeMux()
	mux.Handle("/documents/", http.StripPrefix("/documents", h))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	put := func(title string) {
		req, _ := http.NewRequest("PUT", srv.URL+"/documents/d1", strings.NewReader(`{"title":"`+title+`"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("If-Match", `"1"`)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		res.Body.Close()
		fmt.Println(title+":", res.StatusCode, res.Header.Get("ETag"))
	}
	put("alice")
	put("bob")
	// Output:
	// alice: 200 "2"
	// bob: 412 "2"
}
