package sqlguard

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// guardCases are conditions and whether each dialect takes them for a
// guard by the column version of the table tokens.
var guardCases = []struct {
	cond string
	// gorm, pg, my, lite: the answer in GORM, Postgres, MySQL and SQLite.
	gorm, pg, my, lite bool
}{
	// Guards.
	{cond: "version = ?", gorm: true, my: true, lite: true},
	{cond: "version = $1", pg: true, lite: true},
	{cond: "version=?", gorm: true, my: true, lite: true},
	{cond: "VERSION = ?", gorm: true, my: true, lite: true},
	{cond: "? = version", gorm: true, my: true, lite: true},
	{cond: "version = 3", gorm: true, pg: true, my: true, lite: true},
	{cond: "version = '3'", gorm: true, pg: true, my: true, lite: true},
	{cond: "version = (?)", gorm: true, my: true, lite: true},
	{cond: "(version) = ?", gorm: true, my: true, lite: true},
	{cond: "version IN (?)", gorm: true, my: true, lite: true},
	{cond: "version IN ($1)", pg: true, lite: true},
	{cond: "id = ? AND version = ?", gorm: true, my: true, lite: true},
	{cond: "id = ?\nAND\tversion = ?", gorm: true, my: true, lite: true},
	{cond: "version = ? and id = ?", gorm: true, my: true, lite: true},
	{cond: "(id = ? AND version = ?) AND x > 1", gorm: true, my: true, lite: true},
	{cond: "((version = ?))", gorm: true, my: true, lite: true},
	{cond: "(id = ? AND (version = ? AND y = 2))", gorm: true, my: true, lite: true},
	{cond: "tokens.version = ?", gorm: true, my: true, lite: true},
	{cond: `"tokens"."version" = $1`, pg: true, lite: true},
	{cond: "`tokens`.`version` = ?", my: true, lite: true},
	{cond: "[tokens].[version] = ?", lite: true},
	{cond: `"version" = ?`, lite: true},
	{cond: `"version" = $1`, pg: true, lite: true},
	{cond: "x BETWEEN 1 AND 2 AND version = ?", gorm: true, my: true, lite: true},
	{cond: "x NOT BETWEEN ? AND ? AND version = ?", gorm: true, my: true, lite: true},
	{cond: "CASE WHEN a THEN 1 ELSE 2 END = 1 AND version = ?", gorm: true, my: true, lite: true},
	{cond: "NOT deleted AND version = ?", gorm: true, my: true, lite: true},
	{cond: "id IN (SELECT id FROM t WHERE a OR b) AND version = ?", gorm: true, my: true, lite: true},
	{cond: "version = ? /* a comment */", gorm: true, my: true, lite: true},
	{cond: "/* version */ version = ?", gorm: true, my: true, lite: true},
	{cond: "note = 'it''s' AND version = ?", gorm: true, my: true, lite: true},
	{cond: "note = 'a -- b' AND version = ?", gorm: true, my: true, lite: true},
	{cond: "version = @v", gorm: true, lite: true},
	{cond: "version = :v", lite: true},
	{cond: "version = ?1", lite: true},
	{cond: "note = E'a\\'b' AND version = $1", pg: true},
	{cond: "note = $$ OR 1=1 $$ AND version = $1", pg: true},
	{cond: "note = $x$ it's $x$ AND version = $1", pg: true},
	{cond: "version = 1.5e3", gorm: true, pg: true, my: true, lite: true},

	// Not guards.
	{cond: ""},
	{cond: "version"},
	{cond: "id = ?"},
	{cond: "version = ? OR id = ?"},
	{cond: "id = ? OR version = ?"},
	{cond: "id = ?\nOR version = ?"},
	{cond: "id = ? AND version = ? OR id = ?"},
	{cond: "version = ? AND (a OR b) OR c"},
	{cond: "version = ? XOR x"},
	{cond: "id = ? || version = ?"},
	{cond: "a || b AND version = ?", lite: true}, // MySQL: a OR (b AND version = ?)
	{cond: "NOT version = ?"},
	{cond: "NOT (version = ?)"},
	{cond: "!version = ?"},
	{cond: "version <> ?"},
	{cond: "version != ?"},
	{cond: "version > ?"},
	{cond: "version >= ?"},
	{cond: "version IS NOT NULL"},
	{cond: "version IS NULL"},
	{cond: "version = NULL"},
	{cond: "version = version"},
	{cond: "version = tokens.version"},
	{cond: "version = ? + 0"},
	{cond: "version = -1"},
	{cond: "version = ?::bigint"},
	{cond: "version = ? IS TRUE"},
	{cond: "(version = ?) IS NOT TRUE"},
	{cond: "version = (SELECT version FROM tokens WHERE id = 1)"},
	{cond: "(SELECT 1 FROM t WHERE a AND version = ?)"},
	{cond: "EXISTS (SELECT 1 WHERE version = ?)"},
	{cond: "version IN (?, ?)"},
	{cond: "version IN ?"},
	{cond: "version = ANY(?)"},
	{cond: "version BETWEEN ? AND ?"},
	{cond: "x BETWEEN 1 AND version = ?"},
	{cond: "CASE WHEN a AND version = ? AND b THEN 1 END"},
	{cond: "note <> 'version'"},
	{cond: "note <> 'version' AND id = ?"},
	{cond: "note = 'version = 1' AND id = ?"},
	{cond: "subversion = ?"},
	{cond: "version_note = ?"},
	{cond: "versions = ?"},
	{cond: "other.version = ?"},
	{cond: "public.other.version = ?"},
	{cond: `"other"."version" = $1`},
	{cond: "version = ? -- guarded"},
	{cond: "version = ? # guarded", gorm: false, pg: false, my: false, lite: false},
	{cond: "id = ? -- AND version = ?"},
	{cond: "/* version = ? */ id = ?"},
	{cond: "id = ? /* AND version = ? */"},
	{cond: "version = ? /* unterminated"},
	{cond: "/*! version = ? OR */ version = ?", lite: true}, // a plain comment in SQLite
	{cond: "version = ?; DELETE FROM tokens"},
	{cond: "version = ? AND"},
	{cond: "AND version = ?"},
	{cond: "version = ? AND AND id = 1"},
	{cond: "(version = ?"},
	{cond: "version = ?)"},
	{cond: "version = ?) OR (1 = 1"},
	{cond: "1 = 1) OR (version = ?"},
	{cond: "version = ? AND note = 'unterminated"},
	{cond: "version = ? AND \"unterminated"},
	{cond: "version = ? AND `unterminated"},
	{cond: "version = ? AND $$unterminated", my: true, lite: true}, // a name in MySQL, a placeholder in SQLite
	{cond: "1version = ?"},
	{cond: "version = 1abc"},
	{cond: "version = ? AND x = \x00"},
	{cond: "version = ? {x}"},
	{cond: "tokens . version . x = ?"},
	{cond: "version. = ?"},
	{cond: "version = ? CASE"},
	{cond: "END AND version = ?"},
	// The same text, read with backslash escapes (MySQL's default,
	// PostgreSQL with standard_conforming_strings off), hides the guard in
	// a string.
	{cond: `note = 'a\' AND version = ? AND x = '\'`, lite: true},
	{cond: `note = 'a\' AND version = $1 AND x = '\'`, lite: true},
	// MySQL reads "version" as a string by default.
	{cond: `"version" = ? AND id = ?`, lite: true},
	// SQLite's [ ] are names, PostgreSQL's are subscripts.
	{cond: "a[1] = 2 AND version = $1", pg: true, lite: true},
	// -- without a space is two minus signs in MySQL: not a comment there,
	// but no guard either.
	{cond: "version = ?--1"},
	// PostgreSQL's comments nest: the first */ does not end this one.
	{cond: "/* /* */ version = $1 */ id = $2"},
}

func TestDialectGuards(t *testing.T) {
	for _, c := range guardCases {
		for _, d := range []struct {
			d    Dialect
			want bool
		}{{GORM, c.gorm}, {Postgres, c.pg}, {MySQL, c.my}, {SQLite, c.lite}} {
			got, why := d.d.Check(c.cond, "version", "tokens")
			if got != d.want {
				t.Errorf("%v.Guards(%q) = %v (%s), want %v", d.d, c.cond, got, why, d.want)
			}
			if !got && why == "" {
				t.Errorf("%v.Check(%q): no reason given", d.d, c.cond)
			}
		}
	}
}

func TestGuardsIsGORM(t *testing.T) {
	for _, c := range guardCases {
		if got := Guards(c.cond, "version", "tokens"); got != c.gorm {
			t.Errorf("Guards(%q) = %v, want %v", c.cond, got, c.gorm)
		}
	}
}

func TestNamesAndTables(t *testing.T) {
	for _, c := range []struct {
		d             Dialect
		cond, col, tb string
		want          bool
	}{
		{Postgres, `"Version" = $1`, "version", "tokens", false},
		{Postgres, `Version = $1`, "version", "tokens", true},
		{Postgres, `"Version" = $1`, "Version", "tokens", true},
		{Postgres, `Version = $1`, "Version", "tokens", false}, // folds to version
		{MySQL, "`Version` = ?", "version", "tokens", true},
		{SQLite, `"VERSION" = ?`, "version", "tokens", true},
		{Postgres, `"app"."tokens"."version" = $1`, "version", "app.tokens", true},
		{Postgres, `"tokens"."version" = $1`, "version", "app.tokens", true},
		{Postgres, `"other"."tokens"."version" = $1`, "version", "app.tokens", false},
		{Postgres, `"app"."tokens"."version" = $1`, "version", "tokens", false},
		{Postgres, `tokens.version = $1`, "version", "", false},
		{Postgres, `version = $1`, "version", "", true},
		{Postgres, `version = $1`, "", "tokens", false},
		{MySQL, "rev = ?", "rev", "items", true},
		{GORM, "número = ?", "número", "t", true},
		{Dialect(200), "version = ?", "version", "t", true}, // an unknown Dialect reads as GORM
	} {
		if got := c.d.Guards(c.cond, c.col, c.tb); got != c.want {
			t.Errorf("%v.Guards(%q, %q, %q) = %v, want %v", c.d, c.cond, c.col, c.tb, got, c.want)
		}
	}
}

func TestDialectOf(t *testing.T) {
	for name, want := range map[string]Dialect{"postgres": Postgres, "mysql": MySQL, "sqlite": SQLite} {
		if d, ok := DialectOf(name); !ok || d != want {
			t.Errorf("DialectOf(%q) = %v, %v", name, d, ok)
		}
	}
	if d, ok := DialectOf("sqlserver"); ok || d != GORM {
		t.Errorf("DialectOf(sqlserver) = %v, %v", d, ok)
	}
}

// FuzzGuards: no input panics, and what guards stops guarding when it is
// ORed with anything or negated, and keeps guarding when ANDed with a
// plain condition.
func FuzzGuards(f *testing.F) {
	for _, c := range guardCases {
		f.Add(c.cond, "version")
	}
	f.Add("\"tokens\".\"version\" = $1 AND (a = 'x' OR b = E'\\'')", "version")
	f.Fuzz(func(t *testing.T, cond, col string) {
		for _, d := range []Dialect{GORM, Postgres, MySQL, SQLite} {
			ok, why := d.Check(cond, col, "tokens")
			if ok != (why == "") {
				t.Fatalf("%v.Check(%q, %q) = %v, %q", d, cond, col, ok, why)
			}
			if !ok {
				continue
			}
			if !utf8.ValidString(col) || strings.ContainsAny(col, "\"`[]") {
				continue
			}
			for _, wrapped := range []string{
				"(" + cond + ") OR x = 1",
				"x = 1 OR (" + cond + ")",
				"NOT (" + cond + ")",
			} {
				if d.Guards(wrapped, col, "tokens") {
					t.Fatalf("%v: %q guards, and so does %q", d, cond, wrapped)
				}
			}
			if strings.Count(cond, "(")+strings.Count(cond, "[") > maxDepth/2 {
				continue // wrapping it could nest it too deep
			}
			if and := "x = 1 AND (" + cond + ")"; !d.Guards(and, col, "tokens") {
				t.Fatalf("%v: %q guards, but %q does not", d, cond, and)
			}
		}
	})
}
