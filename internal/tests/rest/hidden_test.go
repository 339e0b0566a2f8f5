package rest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/models"
	"github.com/gormlock/gormlock/repository"
	"github.com/gormlock/gormlock/rest"
)

// hiddenMember has a field its JSON leaves out: the client never sees it.
type hiddenMember struct {
	models.Model
	Name         string `gorm:"column:name;not null" json:"name"`
	PasswordHash string `gorm:"column:password_hash;not null" json:"-"`
}

// A field the model's JSON leaves out (json:"-") is not the client's: a
// stale PUT's 412 does not name it among the fields that differ (the
// request's record, decoded from JSON, holds its zero value, so it always
// "differs"), and neither a PUT nor a PATCH changes it.
func TestRESTHiddenFieldNeverNamedNorWritten(t *testing.T) {
	testdb.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		require.NoError(t, db.AutoMigrate(&hiddenMember{}))
		members, err := repository.New[hiddenMember](db)
		require.NoError(t, err)
		h, err := rest.New(members, rest.WithErrorLog(func(_ *http.Request, err error) { t.Errorf("500: %v", err) }))
		require.NoError(t, err)
		mux := http.NewServeMux()
		rest.Mount(mux, "/members", h)
		c := serve(t, mux)

		m := &hiddenMember{Name: "ada", PasswordHash: "$2a$10$secret"}
		require.NoError(t, members.Create(ctx, m))
		read := fmt.Sprintf(`"%d"`, m.Version)
		path := fmt.Sprintf("/members/%d", m.ID)

		r := c.do("PUT", path, `{"name":"ada lovelace"}`, "If-Match", read)
		require.Equal(t, http.StatusOK, r.status, r.body)
		assert.NotContains(t, r.body, "secret")

		// A second editor from the first read: 412 naming the name only.
		r = c.do("PUT", path, `{"name":"countess"}`, "If-Match", read)
		require.Equal(t, http.StatusPreconditionFailed, r.status, r.body)
		p := r.problem(t)
		assert.Equal(t, []string{"name"}, p.Fields)
		assert.NotContains(t, r.body, "PasswordHash")
		assert.NotContains(t, r.body, "password")

		r = c.patch(path, `{"name":"ada king"}`, "If-Match", r.etag())
		require.Equal(t, http.StatusOK, r.status, r.body)

		got, err := members.Get(ctx, m.ID)
		require.NoError(t, err)
		assert.Equal(t, "ada king", got.Name)
		assert.Equal(t, "$2a$10$secret", got.PasswordHash, "no PUT or PATCH changed the hidden field")
		var out map[string]any
		require.NoError(t, json.Unmarshal([]byte(r.body), &out))
		assert.NotContains(t, out, "PasswordHash")
	})
}
