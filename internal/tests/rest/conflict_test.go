package rest_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/gormlock/gormlock/internal/tests/fixtures"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/repository"
	"github.com/gormlock/gormlock/rest"
)

// handle is a model whose key the client chooses, with a second unique
// column. Its table is made by AutoMigrate.
type handle struct {
	Name  string `gorm:"column:name;primaryKey" json:"name"`
	Email string `gorm:"column:email;not null;uniqueIndex" json:"email"`
	models.Versioned
}

func (handle) TableName() string { return "handles" }

// uniqueServer creates the tables of member and handle in db and serves
// them at /members and /handles, and the documents at /documents. It
// returns the members' repository too.
func uniqueServer(t *testing.T, db *gorm.DB) (*client, *repository.Repository[member]) {
	t.Helper()
	require.NoError(t, db.AutoMigrate(&member{}, &handle{}))
	members, err := repository.New[member](db)
	require.NoError(t, err)
	require.True(t, members.Adapter().KeyAssignedByDatabase())
	handles, err := repository.New[handle](db)
	require.NoError(t, err)
	docs, err := repository.New[fixtures.Document](db)
	require.NoError(t, err)
	logErr := rest.WithErrorLog(func(_ *http.Request, err error) { t.Errorf("500: %v", err) })
	mux := http.NewServeMux()
	for prefix, h := range map[string]func() (http.Handler, error){
		"/members":   func() (http.Handler, error) { return rest.New(members, logErr) },
		"/handles":   func() (http.Handler, error) { return rest.New(handles, logErr) },
		"/documents": func() (http.Handler, error) { return rest.New(docs, logErr) },
	} {
		hh, err := h()
		require.NoError(t, err)
		rest.Mount(mux, prefix, hh)
	}
	return serve(t, mux), members
}

// The details of a 409.
const (
	idTaken    = "a record with this id already exists"
	valueTaken = "a unique value of the record is already taken"
)

// conflict checks a 409 and returns its detail, which must not echo the
// database's message.
func (r response) conflict(t *testing.T) string {
	t.Helper()
	require.Equal(t, http.StatusConflict, r.status, r.body)
	p := r.problem(t)
	for _, leak := range []string{"UNIQUE", "unique constraint", "duplicate", "idx_", "email", "SQLSTATE", "23505"} {
		assert.NotContains(t, p.Detail, leak)
	}
	return p.Detail
}

// A write refused by a unique index says whether the record's id is taken
// or another unique value is: the id only when a record with that id
// exists.
func TestUniqueViolationSaysWhichValue(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		c, _ := uniqueServer(t, db)

		// A key the server assigns cannot be what collided.
		m1 := c.do("POST", "/members", `{"email":"ann@example.com","name":"Ann"}`)
		require.Equal(t, http.StatusCreated, m1.status, m1.body)
		assert.Equal(t, valueTaken, c.do("POST", "/members", `{"email":"ann@example.com","name":"Bob"}`).conflict(t))
		m2 := c.do("POST", "/members", `{"email":"bob@example.com","name":"Bob"}`)
		require.Equal(t, http.StatusCreated, m2.status, m2.body)

		// A key the client chooses: the id only when that record exists.
		ann := c.do("POST", "/handles", `{"name":"ann","email":"ann@example.com"}`)
		require.Equal(t, http.StatusCreated, ann.status, ann.body)
		assert.Equal(t, valueTaken, c.do("POST", "/handles", `{"name":"bob","email":"ann@example.com"}`).conflict(t))
		assert.Equal(t, idTaken, c.do("POST", "/handles", `{"name":"ann","email":"new@example.com"}`).conflict(t))
		assert.Equal(t, idTaken, c.do("POST", "/handles", `{"name":"ann","email":"ann@example.com"}`).conflict(t), "both taken: the id is")
		bob := c.do("POST", "/handles", `{"name":"bob","email":"bob@example.com"}`)
		require.Equal(t, http.StatusCreated, bob.status, bob.body)
		require.Equal(t, http.StatusCreated, c.do("POST", "/documents", `{"id":"d2","title":"t"}`).status)
		assert.Equal(t, idTaken, c.do("POST", "/documents", `{"id":"d2","title":"t"}`).conflict(t), "a table whose only unique index is the key")

		// Writes that keep their id: another unique value.
		for _, w := range []struct{ method, path, body, ifMatch string }{
			{"PUT", "/handles/bob", `{"email":"ann@example.com"}`, bob.etag()},
			{"PUT", "/handles/bob", `{"email":"ann@example.com"}`, "*"},
			{"PATCH", "/handles/bob", `{"email":"ann@example.com"}`, bob.etag()},
			{"PATCH", "/handles/bob", `{"email":"ann@example.com"}`, "*"},
			{"PATCH", m2.header.Get("Location"), `{"email":"ann@example.com"}`, m2.etag()},
			{"PUT", m2.header.Get("Location"), `{"email":"ann@example.com","name":"Bob"}`, "*"},
		} {
			hdr := []string{"If-Match", w.ifMatch}
			if w.method == "PATCH" {
				hdr = append(hdr, "Content-Type", mergePatch)
			}
			assert.Equal(t, valueTaken, c.do(w.method, w.path, w.body, hdr...).conflict(t), "%s %s If-Match %s", w.method, w.path, w.ifMatch)
		}

		// Create only if absent: an absent id with a taken value is 409,
		// not 412; a present id is 412 as before.
		assert.Equal(t, valueTaken, c.do("PUT", "/handles/cy", `{"email":"ann@example.com"}`, "If-None-Match", "*").conflict(t))
		r := c.do("PUT", "/handles/ann", `{"email":"z@example.com"}`, "If-None-Match", "*")
		require.Equal(t, http.StatusPreconditionFailed, r.status, r.body)
		assert.Equal(t, ann.etag(), r.etag())

		// Nothing above was written.
		assert.Equal(t, bob.etag(), c.do("GET", "/handles/bob", "").etag())
		assert.Equal(t, m2.etag(), c.do("GET", m2.header.Get("Location"), "").etag())
		require.Equal(t, http.StatusNotFound, c.do("GET", "/handles/cy", "").status)
		var n int64
		require.NoError(t, db.Model(&member{}).Count(&n).Error)
		assert.EqualValues(t, 2, n)
		assert.True(t, strings.HasPrefix(m1.header.Get("Location"), "/members/"))
	})
}
