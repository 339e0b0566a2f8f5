package sqltext

import (
	"slices"
	"testing"
)

func TestGuards(t *testing.T) {
	for _, tc := range []struct {
		cond string
		want bool
	}{
		{"version = ?", true},
		{"`version` = ?", true},
		{`"tokens"."version" = $2`, true},
		{"id = ? AND version = ?", true},
		{"id = ? and VERSION=?", true},
		{"(id = ? AND version = ?)", true},
		{"id = ? AND (version = ?)", true},
		{"version = ?::bigint", true},
		{"? = version", true},
		{"version = 7", true},
		{"version = @v AND id = @id", true},
		{"qty BETWEEN 1 AND 5 AND version = ?", true},

		{"", false},
		{"id = ?", false},
		{"version = ? OR id = ?", false},
		{"id = ? OR version = ?", false},
		{"(version = ? OR id = ?)", false},
		{"version = ? || id = ?", false},
		{"NOT version = ?", false},
		{"NOT (version = ?)", false},
		{"note <> 'version = 1' AND id = ?", false},
		{"id = ? /* AND version = ? */", false},
		{"id = ? -- AND version = ?", false},
		{"subversion = ?", false},
		{"version_note = ?", false},
		{"version > ?", false},
		{"version >= ?", false},
		{"version <> ?", false},
		{"version IN (?)", false},
		{"version = (SELECT max(version) FROM tokens)", false},
		{"version = version", false},
		{"id IN (SELECT id FROM t WHERE version = ?)", false},
	} {
		if got := Guards(tc.cond, "version"); got != tc.want {
			t.Errorf("Guards(%q, version) = %v, want %v", tc.cond, got, tc.want)
		}
	}
}

func TestWrites(t *testing.T) {
	for _, tc := range []struct {
		sql     string
		op      string
		table   string
		guarded bool
		sets    []string
	}{
		{"UPDATE tokens SET remain_quota = remain_quota - ? WHERE id = ?", "UPDATE", "tokens", false, []string{"remain_quota"}},
		{"update `tokens` set name = ? where id = ? and version = ?", "UPDATE", "tokens", true, []string{"name"}},
		{`UPDATE public."tokens" AS t SET name = $1 WHERE t.id = $2 AND t.version = $3 RETURNING t.version`, "UPDATE", "tokens", true, []string{"name"}},
		{"UPDATE tokens SET version = version + 1, name = ? WHERE id = ?", "UPDATE", "tokens", false, []string{"version", "name"}},
		{"UPDATE LOW_PRIORITY IGNORE tokens SET a = 1 WHERE version = ? LIMIT 1", "UPDATE", "tokens", true, []string{"a"}},
		{"UPDATE OR REPLACE tokens SET a = 1", "UPDATE", "tokens", false, []string{"a"}},
		{"DELETE FROM tokens WHERE id = ?", "DELETE", "tokens", false, nil},
		{"delete from tokens where id = ? and version = ?", "DELETE", "tokens", true, nil},
		{"DELETE FROM tokens WHERE id = ? OR version = ?", "DELETE", "tokens", false, nil},
		{"WITH old AS (SELECT id FROM tokens WHERE status = 0) DELETE FROM tokens WHERE id IN (SELECT id FROM old)", "DELETE", "tokens", false, nil},
		{"  -- nightly\n  UPDATE tokens SET a = 1", "UPDATE", "tokens", false, []string{"a"}},
	} {
		ws := Writes(tc.sql)
		if len(ws) != 1 {
			t.Errorf("Writes(%q) = %d writes, want 1", tc.sql, len(ws))
			continue
		}
		w := ws[0]
		if w.Op != tc.op || w.Table != tc.table || w.Guarded("version") != tc.guarded || !slices.Equal(w.Sets, tc.sets) {
			t.Errorf("Writes(%q) = %s %s guarded=%v sets=%q, want %s %s guarded=%v sets=%q", tc.sql, w.Op, w.Table, w.Guarded("version"), w.Sets, tc.op, tc.table, tc.guarded, tc.sets)
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
