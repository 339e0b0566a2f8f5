//go:build cgo

package locking_test

import (
	"database/sql"
	"errors"
	"testing"

	"github.com/mattn/go-sqlite3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
)

// github.com/mattn/go-sqlite3 (gorm.io/driver/sqlite's driver) needs cgo.
func init() {
	sqliteDrivers = append([]sqliteDriver{{
		name: "mattn",
		open: func(t *testing.T) *gorm.DB { return testdb.SQLite(t) },
		raw: func(t *testing.T, path, txlock string) *sql.DB {
			return testdb.RawSQLite(t, path, "_busy_timeout=0&_txlock="+txlock)
		},
		code: func(err error) (int, bool) {
			var se sqlite3.Error
			if errors.As(err, &se) {
				return int(se.ExtendedCode), true
			}
			return 0, false
		},
	}}, sqliteDrivers...)
}

// The driver error stays reachable as go-sqlite3's own type, with its
// primary and extended codes, as the README promises (errors.As with
// sqlite3.Error).
func TestClassifyKeepsGoSQLite3Error(t *testing.T) {
	db := testdb.SQLite(t)
	require.NoError(t, db.Exec(`CREATE TABLE items (id INTEGER PRIMARY KEY, code TEXT NOT NULL UNIQUE)`).Error)
	require.NoError(t, db.Exec(`INSERT INTO items (id, code) VALUES (1, 'a')`).Error)
	for _, tt := range []struct {
		sql string
		ext sqlite3.ErrNoExtended
	}{
		{`INSERT INTO items (id, code) VALUES (1, 'b')`, sqlite3.ErrConstraintPrimaryKey},
		{`INSERT INTO items (id, code) VALUES (2, 'a')`, sqlite3.ErrConstraintUnique},
	} {
		err := locking.Classify(db.Exec(tt.sql).Error)
		require.ErrorIs(t, err, locking.ErrAlreadyExists)
		var se sqlite3.Error
		require.ErrorAs(t, err, &se)
		assert.Equal(t, sqlite3.ErrConstraint, se.Code)
		assert.Equal(t, tt.ext, se.ExtendedCode)
	}
	// The constants the tests use agree with go-sqlite3's.
	assert.EqualValues(t, sqlite3.ErrBusy, codeBusy)
	assert.EqualValues(t, sqlite3.ErrBusySnapshot, codeBusySnapshot)
	assert.EqualValues(t, sqlite3.ErrConstraintForeignKey, codeConstraintForeignKey)
	assert.EqualValues(t, sqlite3.ErrConstraintPrimaryKey, codeConstraintPrimaryKey)
	assert.EqualValues(t, sqlite3.ErrConstraintUnique, codeConstraintUnique)
}
