package opendb

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gormlock/gormlock/locking"
)

// SQLite's error without cgo, checked in every build (TestSQLiteWithoutCgo
// checks SQLite returns it when built with CGO_ENABLED=0).
func TestErrNoCgoNamesCauseAndRemedies(t *testing.T) {
	err := errNoCgo("app.db")
	require.ErrorIs(t, err, locking.ErrNotSupported)
	for _, want := range []string{"app.db", "CGO_ENABLED=0", "CGO_ENABLED=1 and a C compiler", "opendb.PureGoSQLite", "github.com/glebarez/sqlite"} {
		assert.Contains(t, err.Error(), want)
	}
}
