package rest_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/rest"
)

// A write an integrity constraint refuses is the client's to fix: 422,
// not 500; a unique value taken stays 409, and an error of no class 500.
func TestProblemOfConstraintViolation(t *testing.T) {
	db := testdb.SQLite(t)
	require.NoError(t, db.Exec(`CREATE TABLE parents (id INTEGER PRIMARY KEY)`).Error)
	require.NoError(t, db.Exec(`CREATE TABLE children (id INTEGER PRIMARY KEY, parent_id INTEGER NOT NULL REFERENCES parents (id), code TEXT UNIQUE)`).Error)
	require.NoError(t, db.Exec(`INSERT INTO parents (id) VALUES (1)`).Error)
	require.NoError(t, db.Exec(`INSERT INTO children (id, parent_id, code) VALUES (1, 1, 'a')`).Error)

	for _, tt := range []struct {
		name   string
		sql    string
		status int
	}{
		{"foreign key", `INSERT INTO children (id, parent_id) VALUES (2, 99)`, http.StatusUnprocessableEntity},
		{"not null", `INSERT INTO children (id, parent_id) VALUES (2, NULL)`, http.StatusUnprocessableEntity},
		{"unique", `INSERT INTO children (id, parent_id, code) VALUES (2, 1, 'a')`, http.StatusConflict},
		{"no class", `INSERT INTO nosuch VALUES (1)`, http.StatusInternalServerError},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := locking.Classify(db.Exec(tt.sql).Error)
			require.Error(t, err)
			p := rest.ProblemOf(err)
			assert.Equal(t, tt.status, p.Status, "%v", err)
			assert.NotContains(t, p.Detail, "children", "the detail tells no schema names")
		})
	}
}
