package sqltext

import (
	"slices"
	"testing"
)

func TestWrites(t *testing.T) {
	for _, tc := range []struct {
		sql   string
		op    string
		table string
		where string
		sets  []string
	}{
		{"UPDATE tokens SET remain_quota = remain_quota - ? WHERE id = ?", "UPDATE", "tokens", "id = ?", []string{"remain_quota"}},
		{"update `tokens` set name = ? where id = ? and version = ?", "UPDATE", "tokens", "id = ? and version = ?", []string{"name"}},
		{`UPDATE public."tokens" AS t SET name = $1 WHERE t.id = $2 AND t.version = $3 RETURNING t.version`, "UPDATE", "tokens", "t.id = $2 AND t.version = $3", []string{"name"}},
		{"UPDATE tokens SET version = version + 1, name = ? WHERE id = ?", "UPDATE", "tokens", "id = ?", []string{"version", "name"}},
		{"UPDATE LOW_PRIORITY IGNORE tokens SET a = 1 WHERE version = ? LIMIT 1", "UPDATE", "tokens", "version = ?", []string{"a"}},
		{"UPDATE OR REPLACE tokens SET a = 1", "UPDATE", "tokens", "", []string{"a"}},
		{"DELETE FROM tokens WHERE id = ? -- old\n", "DELETE", "tokens", "id = ?", nil},
		{"delete from tokens where id = ? and version = ?", "DELETE", "tokens", "id = ? and version = ?", nil},
		{"DELETE FROM tokens WHERE id = ? OR version = ?", "DELETE", "tokens", "id = ? OR version = ?", nil},
		{"WITH old AS (SELECT id FROM tokens WHERE status = 0) DELETE FROM tokens WHERE id IN (SELECT id FROM old)", "DELETE", "tokens", "id IN (SELECT id FROM old)", nil},
		{"  -- nightly\n  UPDATE tokens SET a = 1", "UPDATE", "tokens", "", []string{"a"}},
	} {
		ws := Writes(tc.sql)
		if len(ws) != 1 {
			t.Errorf("Writes(%q) = %d writes, want 1", tc.sql, len(ws))
			continue
		}
		w := ws[0]
		if w.Op != tc.op || w.Table != tc.table || w.Where != tc.where || !slices.Equal(w.Sets, tc.sets) {
			t.Errorf("Writes(%q) = %s %s where %q sets %q, want %s %s where %q sets %q", tc.sql, w.Op, w.Table, w.Where, w.Sets, tc.op, tc.table, tc.where, tc.sets)
		}
	}
	for _, s := range []string{
		"SELECT * FROM tokens WHERE id = ? FOR UPDATE",
		"INSERT INTO tokens (a) VALUES (1) ON DUPLICATE KEY UPDATE a = 2",
		"SELECT 'UPDATE tokens SET a = 1'",
		"/* UPDATE tokens SET a = 1 */ SELECT 1",
		"EXPLAIN DELETE FROM tokens",
	} {
		if ws := Writes(s); len(ws) != 0 {
			t.Errorf("Writes(%q) = %+v, want none", s, ws)
		}
	}
	if ws := Writes("UPDATE a SET x = 1; DELETE FROM b; SELECT 1"); len(ws) != 2 || ws[0].Table != "a" || ws[1].Table != "b" {
		t.Errorf("two statements: %+v", ws)
	}
}

func TestIncrement(t *testing.T) {
	for _, tc := range []struct {
		expr string
		sign byte
		ok   bool
	}{
		{"remain_quota + ?", '+', true},
		{"remain_quota - ?", '-', true},
		{"`tokens`.`remain_quota` - ?", '-', true},
		{"remain_quota * ?", 0, false},
		{"used_quota + ?", 0, false},
		{"remain_quota + ? + ?", 0, false},
		{"? + remain_quota", 0, false},
	} {
		sign, ok := Increment(tc.expr, "remain_quota")
		if sign != tc.sign || ok != tc.ok {
			t.Errorf("Increment(%q) = %q, %v; want %q, %v", tc.expr, sign, ok, tc.sign, tc.ok)
		}
	}
}
