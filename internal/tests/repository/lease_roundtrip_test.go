package repository_test

import (
	"testing"

	"github.com/gormlock/gormlock/internal/tests/fixtures"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

// On PostgreSQL, Leases.Acquire and Leases.Update are one statement each,
// committed by themselves: no BEGIN, no COMMIT. A refused write sends the
// statement and then reads what refused it.
func TestLeaseRoundTripsPostgres(t *testing.T) {
	for _, layout := range leaseLayouts {
		t.Run(layout, func(t *testing.T) { leaseRoundTrips(t, layout) })
	}
}

func leaseRoundTrips(t *testing.T, layout string) {
	db := testdb.Open(t, "postgres")
	withLeases := leaseLayout(t, db, layout)
	rec := &recorder{}
	db = db.Session(&gorm.Session{Logger: rec})
	docs := leasedDocs(t, db, withLeases)
	ctx := testdb.Ctx(t)
	newDoc(t, docs, "doc-1")

	var doc *fixtures.Document
	var lease *repository.Lease
	sqls := logged(t, rec, func() (err error) {
		doc, lease, err = docs.Leases().Acquire(ctx, "doc-1", "alice")
		return err
	})
	require.Len(t, sqls, 1, "%q", sqls)
	if layout == "table" {
		assert.Contains(t, sqls[0], "INSERT INTO gormlock_leases")
	} else {
		assert.Contains(t, sqls[0], `UPDATE "documents"`, "the lease in the record's row: one UPDATE")
	}

	stale := *doc
	stale.Version--
	rec.take()
	require.ErrorIs(t, docs.Leases().Update(ctx, &stale, lease), locking.ErrStaleData)
	rec.take()

	doc.Title = "alice's"
	sqls = logged(t, rec, func() error { return docs.Leases().Update(ctx, doc, lease) })
	require.Len(t, sqls, 1, "%q", sqls)
	got, st, err := docs.Leases().Get(ctx, "doc-1")
	require.NoError(t, err)
	assert.Nil(t, st, "released")
	assert.Equal(t, "alice's", got.Title)
	assert.Equal(t, doc.Version, got.Version)
	assert.True(t, doc.UpdatedAt.Equal(got.UpdatedAt), "%v %v", doc.UpdatedAt, got.UpdatedAt)
}
