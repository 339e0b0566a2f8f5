package migrations_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/migrations"
)

// On MySQL and MariaDB, keys are compared byte for byte: keys that differ
// only in trailing spaces or case are distinct, as on SQLite and
// PostgreSQL. A utf8mb4 collation (utf8mb4_bin included, which pads with
// spaces) would make them one.
func TestMySQLKeysAreExact(t *testing.T) {
	db := testdb.MariaDB(t)
	require.NoError(t, migrations.Up(context.Background(), db))
	for _, key := range []string{"k", "k ", "K", "k\u00a0", "é", "e\u0301"} {
		insertLease(t, db, key)
		require.NoError(t, db.Exec(`INSERT INTO gormlock_operations (op_key, resource, record_key, kind, version, created_ms, expires_ms)
			VALUES (?, 'accounts', ?, 'update', 2, 0, 0)`, key, key).Error, "op key %q", key)
	}
	assert.Equal(t, int64(6), count(t, db, `SELECT count(*) FROM gormlock_leases`))
	assert.Equal(t, int64(6), count(t, db, `SELECT count(*) FROM gormlock_operations`))
	var got string
	require.NoError(t, db.Raw(`SELECT record_key FROM gormlock_leases WHERE resource = 'accounts' AND record_key = ?`, "k ").Scan(&got).Error)
	assert.Equal(t, "k ", got, "the key reads back as it was written, as a string")

	// The control: the same keys in a utf8mb4_bin column collide.
	require.NoError(t, db.Exec(`CREATE TABLE collated (k VARCHAR(10) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PRIMARY KEY)`).Error)
	require.NoError(t, db.Exec(`INSERT INTO collated (k) VALUES ('k')`).Error)
	err := db.Exec(`INSERT INTO collated (k) VALUES ('k ')`).Error
	require.ErrorIs(t, locking.Classify(err), locking.ErrAlreadyExists, "utf8mb4_bin ignores trailing spaces")
}

// The longest keys gormlock's tables hold, and one byte more: refused (in
// the strict sql_mode package opendb/mysql sets) rather than cut short.
func TestMySQLKeyLengths(t *testing.T) {
	db := testdb.MariaDB(t)
	require.NoError(t, migrations.Up(context.Background(), db))
	lease := func(resource, key, owner string) error {
		return db.Exec(`INSERT INTO gormlock_leases (resource, record_key, owner, fence, acquired_ms, expires_ms)
			VALUES (?, ?, ?, 1, 0, 0)`, resource, key, owner).Error
	}
	op := func(key, fingerprint string) error {
		return db.Exec(`INSERT INTO gormlock_operations (op_key, resource, record_key, kind, version, fingerprint, created_ms, expires_ms)
			VALUES (?, 'accounts', '1', 'update', 2, ?, 0, 0)`, key, fingerprint).Error
	}
	// repository.MaxOperationKeyLen, and OpKey's limit on fingerprints.
	const maxOpKey, maxFingerprint = 255, 1024
	for name, err := range map[string]error{
		"longest table name": lease(strings.Repeat("t", 512), "1", "ann"),
		"longest record key": lease("accounts", strings.Repeat("é", 1280), "ann"),
		"longest owner":      lease("accounts", "2", strings.Repeat("o", 1024)),
		"longest op key":     op(strings.Repeat("k", maxOpKey), strings.Repeat("f", maxFingerprint)),
	} {
		require.NoError(t, err, name)
	}
	for name, err := range map[string]error{
		"table name":  lease(strings.Repeat("t", 513), "3", "ann"),
		"record key":  lease("accounts", strings.Repeat("k", 2561), "ann"),
		"owner":       lease("accounts", "4", strings.Repeat("o", 1025)),
		"op key":      op(strings.Repeat("k", maxOpKey+1), ""),
		"fingerprint": op("k2", strings.Repeat("f", maxFingerprint+1)),
	} {
		require.ErrorIs(t, locking.Classify(err), locking.ErrInvalidArgument, "%s one byte too long", name)
		assert.Equal(t, "1406", locking.Code(err), name)
	}
	assert.Equal(t, int64(3), count(t, db, `SELECT count(*) FROM gormlock_leases`))
	assert.Equal(t, int64(1), count(t, db, `SELECT count(*) FROM gormlock_operations`))
}

// Every table the migrations create, VersionTable included, is InnoDB with
// a primary key: Galera replicates a table without one wrongly.
func TestMySQLTablesHavePrimaryKeys(t *testing.T) {
	db := testdb.MariaDB(t)
	require.NoError(t, migrations.Up(context.Background(), db))
	var tables []struct {
		Name, Engine string
		PK           int64
	}
	require.NoError(t, db.Raw(`SELECT t.table_name AS name, t.engine AS engine,
		(SELECT count(*) FROM information_schema.table_constraints c WHERE c.table_schema = t.table_schema
			AND c.table_name = t.table_name AND c.constraint_type = 'PRIMARY KEY') AS pk
		FROM information_schema.tables t WHERE t.table_schema = DATABASE() ORDER BY 1`).Scan(&tables).Error)
	require.Len(t, tables, 3)
	for _, tbl := range tables {
		assert.Equal(t, "InnoDB", tbl.Engine, tbl.Name)
		assert.Equal(t, int64(1), tbl.PK, "%s has a primary key", tbl.Name)
	}
	assert.Equal(t, []string{"gormlock_leases", "gormlock_operations", migrations.VersionTable},
		[]string{tables[0].Name, tables[1].Name, tables[2].Name})
}
