package repository_test

import (
	"testing"

	"github.com/gormlock/gormlock/internal/tests/fixtures"

	"github.com/stretchr/testify/require"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

type noVersion struct {
	ID   int64 `gorm:"primaryKey"`
	Name string
}

type uintVersion struct {
	ID      int64 `gorm:"primaryKey"`
	Version uint64
}

type ptrVersion struct {
	ID      int64 `gorm:"primaryKey"`
	Version *int64
}

// pluginDeletedAt stands for a soft-delete type other than gorm.DeletedAt
// (gorm.io/plugin/soft_delete's): one that brings its own delete clauses.
type pluginDeletedAt uint

func (pluginDeletedAt) DeleteClauses(*schema.Field) []clause.Interface { return nil }

type otherSoftDelete struct {
	ID        int64 `gorm:"primaryKey"`
	Version   int64
	DeletedAt pluginDeletedAt
}

type versionInKey struct {
	A       int64 `gorm:"primaryKey"`
	Version int64 `gorm:"primaryKey;autoIncrement:false"`
}

type readOnlyVersion struct {
	ID      int64 `gorm:"primaryKey"`
	Version int64 `gorm:"->"`
}

type twoTagged struct {
	ID  int64 `gorm:"primaryKey"`
	V1  int64 `gormlock:"version"`
	V2  int64 `gormlock:"version"`
	Val string
}

// tagged names its version field Rev and has a string key.
type tagged struct {
	Code string `gorm:"primaryKey"`
	Rev  int64  `gormlock:"version" gorm:"not null"`
	Note string
}

// sqlserverish pretends to be a dialect gormlock does not claim.
type sqlserverish struct{ gorm.Dialector }

func (sqlserverish) Name() string { return "sqlserver" }

func TestNewRejectsUnusableModels(t *testing.T) {
	db := testdb.SQLite(t)
	cases := []struct {
		name string
		new  func() error
		is   error
		msg  string
	}{
		{"no version field", func() error { _, err := repository.New[noVersion](db); return err }, locking.ErrInvalidArgument, "has no version field"},
		{"unsigned version", func() error { _, err := repository.New[uintVersion](db); return err }, locking.ErrInvalidArgument, "must be int64"},
		{"pointer version", func() error { _, err := repository.New[ptrVersion](db); return err }, locking.ErrInvalidArgument, "must be int64"},
		{"soft delete other than gorm.DeletedAt", func() error { _, err := repository.New[otherSoftDelete](db); return err }, locking.ErrNotSupported, "gorm.DeletedAt only"},
		{"version in the key", func() error { _, err := repository.New[versionInKey](db); return err }, locking.ErrInvalidArgument, "cannot be part of the primary key"},
		{"read-only version", func() error { _, err := repository.New[readOnlyVersion](db); return err }, locking.ErrInvalidArgument, "readable and writable"},
		{"two version tags", func() error { _, err := repository.New[twoTagged](db); return err }, locking.ErrInvalidArgument, "two fields tagged"},
		{"not a struct", func() error { _, err := repository.New[int](db); return err }, locking.ErrInvalidArgument, "not a struct"},
		{"nil db", func() error { _, err := repository.New[fixtures.Account](nil); return err }, locking.ErrInvalidArgument, "db is nil"},
		{"bad retry policy", func() error {
			_, err := repository.New[fixtures.Account](db, repository.WithRetryPolicy(locking.RetryPolicy{}))
			return err
		}, locking.ErrInvalidArgument, "MaxAttempts"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.new()
			require.ErrorIs(t, err, c.is)
			require.ErrorContains(t, err, c.msg)
		})
	}
}

func TestNewRejectsUnclaimedDialect(t *testing.T) {
	dir := t.TempDir()
	db, err := gorm.Open(sqlserverish{sqlite.Open(dir + "/x.db")}, &gorm.Config{})
	require.NoError(t, err)
	_, err = repository.New[fixtures.Account](db)
	require.ErrorIs(t, err, locking.ErrNotSupported)
	require.ErrorContains(t, err, `"sqlserver"`)
}

func TestNewAcceptsTaggedVersionAndStringKey(t *testing.T) {
	db := testdb.SQLite(t)
	r, err := repository.New[tagged](db)
	require.NoError(t, err)
	require.Equal(t, "taggeds", r.Table())
}
