// Package sqlguard tells whether an SQL condition guards a write by a
// version column: whether the rows it lets through all hold one given
// value in that column, so that an UPDATE or DELETE with it cannot
// overwrite a change it has not seen. gormlock's GORM plugin asks it of
// the WHERE of the plain GORM writes it checks (StrictGORMWrites,
// GuardGORMUpdates), and gormlockvet of the conditions it finds in Go
// source.
//
// It decides from the condition's structure, not from its words. A guard
// is an equality between the version column and one value (a placeholder,
// a number or a string literal), in either order, or the column IN one
// value, that is joined by AND at the top level of the condition:
//
//	version = ?                          a guard
//	id = ? AND version = ?               a guard
//	(id = ? AND version = ?) AND x > 1   a guard: a parenthesised AND group counts
//	"tokens"."version" = $1              a guard, when table is "tokens"
//
// and these are not:
//
//	id = ? OR version = ?                OR at the top level (also ||, XOR)
//	NOT version = ?                      negated
//	version > ?, version IS NOT NULL     not an equality
//	version = version, version = ? + 1   not one value
//	version = (SELECT ...)               a subquery
//	other.version = ?                    another table's column
//	subversion = ?, version_note = ?     another column
//	note <> 'version'                    a string is not a name
//	version = ? -- ...                   a line comment could hide what follows
//
// When in doubt it answers "not a guard": a condition with a line
// comment, an unterminated literal or comment, a semicolon, unbalanced
// parentheses, or a character the database would not read, guards
// nothing. Where databases (or one database's settings) read the same
// text differently — backslashes in MySQL's strings, MySQL's "..." as a
// string or as a name, # and -- comments — the condition is read every
// way, and it guards only if it guards in each.
//
// A placeholder is taken for one plain value. What is bound to it is the
// caller's to check: GORM expands a slice into a list, and builds a
// *gorm.DB or an expression into SQL. gormlock's plugin checks the WHERE
// that GORM built, in which every placeholder is a value.
//
// Every function is pure (no I/O, no state), safe for concurrent use, and
// never panics, whatever its input.
package sqlguard

import (
	"strconv"
	"strings"
)

// Dialect is the SQL a condition is written in.
type Dialect uint8

const (
	// GORM is a condition as written for GORM's Where, Or and Not in Go
	// source: ? and @name are GORM's placeholders, and the database is not
	// known, so the condition must guard as PostgreSQL, MySQL (any
	// sql_mode) and SQLite read it. A name quoted with "..." is then
	// never the column, as MySQL reads "..." as a string by default:
	// write the column unquoted.
	GORM Dialect = iota
	// Postgres is PostgreSQL's SQL: $1 placeholders, E'...' and
	// $tag$...$tag$ strings, nested comments; unquoted names fold to lower
	// case. Strings are read with standard_conforming_strings on and off.
	Postgres
	// MySQL is MySQL's and MariaDB's SQL: ? placeholders, `...` names, #
	// comments, || as OR; read with backslash escapes on and off
	// (NO_BACKSLASH_ESCAPES), and with "..." as a string and as a name
	// (ANSI_QUOTES).
	MySQL
	// SQLite is SQLite's SQL: ?, ?NNN, :name, @name and $name
	// placeholders; "...", `...` and [...] names.
	SQLite
)

// String returns the Dialect's name.
func (d Dialect) String() string {
	switch d {
	case GORM:
		return "GORM"
	case Postgres:
		return "Postgres"
	case MySQL:
		return "MySQL"
	case SQLite:
		return "SQLite"
	}
	return "Dialect(" + strconv.Itoa(int(d)) + ")"
}

// DialectOf returns the Dialect of a GORM dialector's Name: "postgres",
// "mysql" (MySQL and MariaDB) or "sqlite". ok is false for another name,
// and the Dialect is GORM, which reads the condition every way.
func DialectOf(dialectorName string) (d Dialect, ok bool) {
	switch dialectorName {
	case "postgres":
		return Postgres, true
	case "mysql":
		return MySQL, true
	case "sqlite":
		return SQLite, true
	}
	return GORM, false
}

// Guards reports whether cond, a condition written for GORM (see GORM),
// guards a write by column: see the package doc. column is the column's
// name as the database knows it ("version"); table is the table's name
// ("tokens", or "app.tokens"), which a qualified column must name; with
// table "" only an unqualified column counts.
func Guards(cond, column, table string) bool {
	ok, _ := GORM.Check(cond, column, table)
	return ok
}

// Guards reports whether cond, a condition (a WHERE clause's text without
// the word WHERE) in d's SQL, guards a write by column of table: see the
// package doc and the package-level Guards.
func (d Dialect) Guards(cond, column, table string) bool {
	ok, _ := d.Check(cond, column, table)
	return ok
}

// Check is Guards that also says, when cond does not guard, why not, in a
// few words ("OR at the top level", "a line comment", "no equality on
// version joined by AND at the top level").
func (d Dialect) Check(cond, column, table string) (guarded bool, why string) {
	if column == "" {
		return false, "no column named"
	}
	t := target{column: column}
	if table != "" {
		t.table = strings.Split(table, ".")
	}
	rs := readingsOf(d)
	for i := range rs {
		if ok, why := t.check(cond, &rs[i]); !ok {
			return false, why
		}
	}
	return true, ""
}

// target is the column a guard must compare.
type target struct {
	column string
	table  []string // the table's name, split at its dot; nil for none
}

// maxDepth bounds the nesting of parentheses read; deeper is no guard.
const maxDepth = 64

// check reads cond in one reading.
func (t *target) check(cond string, r *reading) (bool, string) {
	toks, why := lex(cond, r)
	if why != "" {
		return false, why
	}
	if why := balanced(toks); why != "" {
		return false, why
	}
	a := analysis{target: t, r: r}
	if ok, why := a.guards(toks, 0); !ok {
		if why == "" {
			why = "no equality on " + t.column + " joined by AND at the top level"
		}
		return false, why
	}
	return true, ""
}

// balanced checks that the parentheses and brackets pair up.
func balanced(toks []token) string {
	var stack []kind
	for _, t := range toks {
		switch t.kind {
		case open, openSq:
			if len(stack) >= maxDepth {
				return "parentheses nested too deep"
			}
			stack = append(stack, t.kind)
		case closing, closeSq:
			want := open
			if t.kind == closeSq {
				want = openSq
			}
			if len(stack) == 0 || stack[len(stack)-1] != want {
				return "unbalanced parentheses"
			}
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) > 0 {
		return "unbalanced parentheses"
	}
	return ""
}

// analysis reads one condition's tokens in one reading.
type analysis struct {
	*target
	r *reading
}

// guards reports whether the boolean expression toks has a guard among
// the conditions its top level joins by AND; why is set when something
// rules every guard out (an OR at the top level).
func (a *analysis) guards(toks []token, depth int) (ok bool, why string) {
	if len(toks) == 0 {
		return false, "an empty condition"
	}
	found := false
	start, nest, cases, between := 0, 0, 0, false
	end := func(i int) bool { // the condition toks[start:i] ends at i
		c := toks[start:i]
		start = i + 1
		if len(c) == 0 {
			return false
		}
		found = found || a.conjunct(c, depth)
		return true
	}
	for i, t := range toks {
		switch t.kind {
		case open, openSq:
			nest++
			continue
		case closing, closeSq:
			nest--
			continue
		}
		if nest > 0 {
			continue
		}
		if t.kind == op && a.r.pipesOr && strings.Contains(t.text, "||") && cases == 0 {
			return false, "|| (MySQL's OR) at the top level"
		}
		if t.kind != word {
			continue
		}
		switch {
		case strings.EqualFold(t.text, "CASE"):
			cases++
		case strings.EqualFold(t.text, "END"):
			if cases--; cases < 0 {
				return false, "an END without CASE"
			}
		case cases > 0:
		case strings.EqualFold(t.text, "OR") || strings.EqualFold(t.text, "XOR"):
			return false, "OR at the top level"
		case strings.EqualFold(t.text, "BETWEEN"):
			between = true
		case strings.EqualFold(t.text, "AND"):
			if between {
				between = false // a BETWEEN's own AND
			} else if !end(i) {
				return false, "an empty condition"
			}
		}
	}
	if cases != 0 {
		return false, "a CASE without END"
	}
	if !end(len(toks)) {
		return false, "an empty condition"
	}
	return found, ""
}

// conjunct reports whether c, one condition the top level joins by AND,
// is a guard: column = value, value = column, column IN (value), or a
// parenthesised boolean group with a guard.
func (a *analysis) conjunct(c []token, depth int) bool {
	if c[0].kind == open && matching(c, 0) == len(c)-1 {
		inner := c[1 : len(c)-1]
		if depth >= maxDepth || isQuery(inner) {
			return false
		}
		ok, _ := a.guards(inner, depth+1)
		return ok
	}
	lhs, n := a.operand(c)
	if n == 0 || n >= len(c) {
		return false
	}
	rest := c[n:]
	switch {
	case rest[0].kind == op && (rest[0].text == "=" || rest[0].text == "=="):
		rhs, m := a.operand(rest[1:])
		return m > 0 && 1+m == len(rest) && (lhs.column && rhs.value || lhs.value && rhs.column)
	case rest[0].kind == word && strings.EqualFold(rest[0].text, "IN") && lhs.column:
		if len(rest) < 2 || rest[1].kind != open {
			return false
		}
		rhs, m := a.operand(rest[1:])
		return m > 0 && 1+m == len(rest) && rhs.value
	}
	return false
}

// operandOf is what one operand of a comparison is.
type operandOf struct {
	column bool // the target column
	value  bool // one value: a placeholder or a literal
}

// operand reads the operand at the start of c: a name (qualified or not),
// a value, or one of those in parentheses; n is how many tokens it takes,
// 0 when c starts with none of them.
func (a *analysis) operand(c []token) (o operandOf, n int) {
	if len(c) == 0 {
		return operandOf{}, 0
	}
	switch c[0].kind {
	case open:
		end := matching(c, 0)
		if end < 0 {
			return operandOf{}, 0
		}
		inner, m := a.operand(c[1:end])
		if m == 0 || m != end-1 {
			return operandOf{}, 0
		}
		return inner, end + 1
	case param, number, str:
		return operandOf{value: true}, 1
	case word, ident:
		n = 1
		for n+1 < len(c) && c[n].kind == dot && (c[n+1].kind == word || c[n+1].kind == ident) {
			n += 2
		}
		if n < len(c) && c[n].kind == dot {
			return operandOf{}, 0
		}
		return operandOf{column: a.isColumn(c[:n])}, n
	}
	return operandOf{}, 0
}

// isColumn reports whether the name ref (names joined by dots) is the
// target column: its last name the column's, and the names before it, if
// any, the table's (the last of them, or all).
func (a *analysis) isColumn(ref []token) bool {
	if !a.r.same(ref[len(ref)-1], a.column) {
		return false
	}
	quals := (len(ref) - 1) / 2
	if quals > len(a.table) {
		return false
	}
	tab := a.table[len(a.table)-quals:]
	for i := 0; i < quals; i++ {
		if !a.r.same(ref[2*i], tab[i]) {
			return false
		}
	}
	return true
}

// same reports whether the name token t names name.
func (r *reading) same(t token, name string) bool {
	if !r.foldLower {
		return strings.EqualFold(t.text, name)
	}
	if t.kind == ident {
		return t.text == name
	}
	if len(t.text) != len(name) {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := t.text[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != name[i] {
			return false
		}
	}
	return true
}

// queryWords are the words that make a parenthesised group a query
// rather than a boolean expression.
var queryWords = []string{"SELECT", "FROM", "WHERE", "WITH", "VALUES", "TABLE", "UNION", "INTERSECT", "EXCEPT",
	"GROUP", "HAVING", "ORDER", "LIMIT", "OFFSET", "FETCH", "WINDOW", "RETURNING", "INTO"}

// isQuery reports whether toks, the inside of parentheses, holds a query
// word at its own level.
func isQuery(toks []token) bool {
	nest := 0
	for _, t := range toks {
		switch t.kind {
		case open, openSq:
			nest++
		case closing, closeSq:
			nest--
		case word:
			if nest == 0 {
				for _, q := range queryWords {
					if strings.EqualFold(t.text, q) {
						return true
					}
				}
			}
		}
	}
	return false
}

// matching returns the index of the token that closes the one opening at
// i, or -1.
func matching(toks []token, i int) int {
	nest := 0
	for j := i; j < len(toks); j++ {
		switch toks[j].kind {
		case open, openSq:
			nest++
		case closing, closeSq:
			if nest--; nest == 0 {
				return j
			}
		}
	}
	return -1
}

// The readings of each Dialect.
var (
	postgresReading = reading{escapeStrings: true, dollarQuotes: true, dollarParams: true, nested: true, foldLower: true}
	mysqlReading    = reading{backticks: true, hashComments: true, dashSpace: true, execComments: true, pipesOr: true, question: true}
	sqliteReading   = reading{backticks: true, brackets: true, question: true, numbered: true, named: ":@$"}

	readings = func() [4][]reading {
		var rs [4][]reading
		pgOff := postgresReading
		pgOff.backslash = true // standard_conforming_strings off
		rs[Postgres] = []reading{postgresReading, pgOff}
		for _, backslash := range []bool{true, false} {
			for _, doubleString := range []bool{true, false} {
				m := mysqlReading
				m.backslash, m.doubleString = backslash, doubleString
				rs[MySQL] = append(rs[MySQL], m)
			}
		}
		rs[SQLite] = []reading{sqliteReading}
		for _, d := range []Dialect{Postgres, MySQL, SQLite} {
			for _, r := range rs[d] {
				r.question, r.numbered, r.named, r.gormNames = true, false, "@", true
				rs[GORM] = append(rs[GORM], r)
			}
		}
		return rs
	}()
)

// readingsOf returns d's readings; an unknown Dialect reads as GORM.
func readingsOf(d Dialect) []reading {
	if int(d) < len(readings) {
		return readings[d]
	}
	return readings[GORM]
}
