package repository_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	sqliteopen "github.com/gormlock/gormlock/opendb/sqlite"
)

// BenchmarkSQLiteReadBack measures, with database/sql and go-sqlite3 on
// one connection as gormlock's SQLite write holds it, the two ways a write
// of a model with an unversioned field can bring the field back: the
// UPDATE then a SELECT of the field (what gormlock does on SQLite), or
// UPDATE ... RETURNING the field (what it does on PostgreSQL). It decides
// which SQLite uses (see meta.returnsUnversioned). way=update-alone is the
// UPDATE without the read: the part of way=select that holds SQLite's
// write lock, which every other writer waits for.
func BenchmarkSQLiteReadBack(b *testing.B) {
	dsn, err := sqliteopen.DSN(filepath.Join(b.TempDir(), "readback.db"))
	if err != nil {
		b.Fatal(err)
	}
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	for _, q := range []string{
		"CREATE TABLE p (id INTEGER PRIMARY KEY, version INTEGER, updated_at DATETIME, name TEXT NOT NULL, price INTEGER NOT NULL, stock INTEGER NOT NULL)",
		"INSERT INTO p VALUES (1, 1, CURRENT_TIMESTAMP, 'lamp', 1000, 100)",
	} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	const update = "UPDATE `p` SET `name` = ?, `price` = ?, `version` = ?, `updated_at` = ? WHERE `id` = ? AND COALESCE(`version`, 0) = ?"
	version := int64(1)
	b.Run("way=select", func(b *testing.B) {
		b.ReportAllocs()
		var stock int64
		for b.Loop() {
			res, err := conn.ExecContext(ctx, update, "lamp", 1000, version+1, "2026-01-01 00:00:00", 1, version)
			if err != nil {
				b.Fatal(err)
			}
			if n, _ := res.RowsAffected(); n != 1 {
				b.Fatal("no row")
			}
			version++
			if err := conn.QueryRowContext(ctx, "SELECT `stock` FROM `p` WHERE `id` = ?", 1).Scan(&stock); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The UPDATE alone: the part of way=select that holds the write lock.
	b.Run("way=update-alone", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := conn.ExecContext(ctx, update, "lamp", 1000, version+1, "2026-01-01 00:00:00", 1, version); err != nil {
				b.Fatal(err)
			}
			version++
		}
	})
	b.Run("way=returning", func(b *testing.B) {
		b.ReportAllocs()
		var stock any
		for b.Loop() {
			if err := conn.QueryRowContext(ctx, update+" RETURNING `stock`", "lamp", 1000, version+1, "2026-01-01 00:00:00", 1, version).Scan(&stock); err != nil {
				b.Fatal(err)
			}
			version++
		}
	})
}
