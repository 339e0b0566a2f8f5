package exampledb_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gormlock/gormlock/internal/exampledb"
	"github.com/gormlock/gormlock/internal/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/models"
)

// Open takes a MySQL DSN, as opendb.Open does, and migrates the database.
func TestOpenMySQL(t *testing.T) {
	dsn := testdb.MariaDBDatabase(t)
	for name, d := range map[string]string{"driver form": dsn, "mysql://": "mysql://" + dsn} {
		t.Run(name, func(t *testing.T) {
			db, closeDB, err := exampledb.Open(context.Background(), d, "exampledb-test")
			require.NoError(t, err)
			assert.Equal(t, "mysql", db.Dialector.Name())
			requireTables(t, db, exampleTables, true)
			requireTables(t, db, ownTables, true)
			assert.Equal(t, int64(2), examplesVersion(t, db))
			require.NoError(t, closeDB())
		})
	}
}

// The example models round-trip through the MySQL tables with plain GORM:
// microsecond times in UTC, JSON attributes, string keys that differ only in
// case or trailing spaces.
func TestMySQLTablesFitTheModels(t *testing.T) {
	db := testdb.Open(t, "mariadb")
	at := time.Date(2026, 11, 23, 10, 11, 12, 123456789, time.FixedZone("CET", 3600))
	versioned := models.Versioned{Version: 1, CreatedAt: at, UpdatedAt: at}

	acct := &models.Account{Model: models.Model{Versioned: versioned}, Owner: "Ann", Balance: 7, Frozen: true}
	require.NoError(t, db.Create(acct).Error)
	require.NotZero(t, acct.ID)
	var gotAcct models.Account
	require.NoError(t, db.First(&gotAcct, acct.ID).Error)
	assert.Equal(t, "Ann", gotAcct.Owner)
	assert.True(t, gotAcct.Frozen)
	assert.Equal(t, at.Truncate(time.Microsecond).UTC(), gotAcct.CreatedAt, "microseconds kept, read as UTC")
	assert.Equal(t, time.UTC, gotAcct.CreatedAt.Location())
	var owners int64
	require.NoError(t, db.Model(&models.Account{}).Where("owner = ?", "ann").Count(&owners).Error)
	assert.Zero(t, owners, "owner compares with case")

	for _, id := range []string{"doc", "Doc", "doc "} {
		require.NoError(t, db.Create(&models.Document{ID: id, Title: "t", Attrs: models.Attributes{"k": id, "emoji": "🙂"}, Versioned: versioned}).Error, "id %q", id)
	}
	var doc models.Document
	require.NoError(t, db.First(&doc, "id = ?", "doc ").Error)
	assert.Equal(t, "doc ", doc.ID)
	assert.Equal(t, models.Attributes{"k": "doc ", "emoji": "🙂"}, doc.Attrs)
	err := db.Create(&models.Document{ID: "doc", Title: "again", Versioned: versioned}).Error
	require.ErrorIs(t, locking.Classify(err), locking.ErrAlreadyExists)

	var attrs models.Attributes
	err = db.Exec(`INSERT INTO documents (id, title, attrs, version, created_at, updated_at)
		VALUES ('bad', 't', '{not json', 1, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)`).Error
	require.Error(t, err, "attrs holds JSON only")
	assert.Contains(t, []string{"4025", "3140"}, locking.Code(err))
	require.NoError(t, db.Raw(`SELECT attrs FROM documents WHERE id = 'doc'`).Scan(&attrs).Error)
	assert.Equal(t, models.Attributes{"k": "doc", "emoji": "🙂"}, attrs)

	job := &models.Job{Model: models.Model{Versioned: versioned}, Queue: "q", Payload: "p", Status: models.JobPending}
	require.NoError(t, db.Create(job).Error)
	var gotJob models.Job
	require.NoError(t, db.First(&gotJob, job.ID).Error)
	assert.Equal(t, "", gotJob.DoneBy)
	assert.Equal(t, models.JobPending, gotJob.Status)
}
