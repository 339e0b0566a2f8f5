// Package sqltext reads the raw SQL an application passes to GORM and
// database/sql, as far as gormlockvet needs it: which statements update or
// delete rows of which table, with which WHERE text (whether that WHERE
// guards the write is internal/sqlguard's to decide, as for strict mode),
// and whether an assignment's expression is an increment.
//
// It tokenizes; it does not parse SQL. A string literal, a quoted
// identifier and a comment are one token each (or none), so a word inside
// them is never taken for a column or a keyword; parentheses are counted.
package sqltext

import "strings"

type kind int

const (
	word   kind = iota // an unquoted identifier or keyword
	quoted             // a quoted identifier: "x", `x`, [x]
	str                // a string literal
	number
	param // ?, $1, :name, @name
	punct // an operator, a parenthesis, a comma, a dot, a semicolon
)

type token struct {
	kind       kind
	text       string // a quoted identifier's name without its quotes
	start, end int    // where it is in the text
}

// is reports whether t is the keyword kw (in any case).
func (t token) is(kw string) bool { return t.kind == word && strings.EqualFold(t.text, kw) }

// names reports whether t is the identifier name (in any case).
func (t token) names(name string) bool {
	return (t.kind == word || t.kind == quoted) && strings.EqualFold(t.text, name)
}

// tokenize splits s into tokens, dropping spaces and comments (--, #, /* */).
// An unterminated literal or comment runs to the end of s.
func tokenize(s string) []token {
	var out []token
	for i := 0; i < len(s); {
		at, n := i, len(out)
		i = next(s, i, &out)
		for k := n; k < len(out); k++ {
			out[k].start, out[k].end = at, i
		}
	}
	return out
}

// next reads the token (or the space or comment) at s[i] into out and
// returns the index after it.
func next(s string, i int, out *[]token) int {
	{
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case c == '-' && i+1 < len(s) && s[i+1] == '-', c == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				return len(s)
			}
			i += end + 4
		case c == '\'':
			j := closing(s, i, '\'', true)
			*out = append(*out, token{kind: str, text: s[i:j]})
			i = j
		case c == '"' || c == '`':
			j := closing(s, i, c, false)
			*out = append(*out, token{kind: quoted, text: unquote(s[i:j], c)})
			i = j
		case c == '[':
			j := strings.IndexByte(s[i:], ']')
			if j < 0 {
				j = len(s) - i - 1
			}
			*out = append(*out, token{kind: quoted, text: s[i+1 : i+j]})
			i += j + 1
		case c == '$' && i+1 < len(s) && s[i+1] == '$':
			// a PostgreSQL dollar-quoted string: $$...$$ (or $tag$...$tag$ below)
			end := strings.Index(s[i+2:], "$$")
			j := len(s)
			if end >= 0 {
				j = i + 2 + end + 2
			}
			*out = append(*out, token{kind: str, text: s[i:j]})
			i = j
		case c == '?':
			*out = append(*out, token{kind: param, text: "?"})
			i++
		case (c == '$' || c == ':' || c == '@') && i+1 < len(s) && isIdent(s[i+1]):
			if c == ':' && i > 0 && s[i-1] == ':' {
				*out = append(*out, token{kind: punct, text: ":"}) // a PostgreSQL cast, x::bigint
				i++
				return i
			}
			j := i + 1
			for j < len(s) && isIdent(s[j]) {
				j++
			}
			if c == '$' && j < len(s) && s[j] == '$' { // $tag$ ... $tag$
				tag := s[i : j+1]
				end := strings.Index(s[j+1:], tag)
				k := len(s)
				if end >= 0 {
					k = j + 1 + end + len(tag)
				}
				*out = append(*out, token{kind: str, text: s[i:k]})
				i = k
				return i
			}
			*out = append(*out, token{kind: param, text: s[i:j]})
			i = j
		case c >= '0' && c <= '9':
			j := i
			for j < len(s) && (isIdent(s[j]) || s[j] == '.') {
				j++
			}
			*out = append(*out, token{kind: number, text: s[i:j]})
			i = j
		case isIdent(c):
			j := i
			for j < len(s) && isIdent(s[j]) {
				j++
			}
			*out = append(*out, token{kind: word, text: s[i:j]})
			i = j
		default:
			j := i + 1
			if j < len(s) && strings.Contains("<>!=:|", string(c)) && strings.ContainsRune("=>|:", rune(s[j])) {
				j++
			}
			*out = append(*out, token{kind: punct, text: s[i:j]})
			i = j
		}
	}
	return i
}

// closing returns the index just past the literal opened by quote at s[i]:
// a doubled quote stays inside, and so does a backslash escape when
// backslash is true (MySQL's strings).
func closing(s string, i int, quote byte, backslash bool) int {
	for j := i + 1; j < len(s); j++ {
		switch {
		case backslash && s[j] == '\\':
			j++
		case s[j] == quote:
			if j+1 < len(s) && s[j+1] == quote {
				j++
				continue
			}
			return j + 1
		}
	}
	return len(s)
}

func unquote(lit string, quote byte) string {
	lit = strings.TrimPrefix(lit, string(quote))
	lit = strings.TrimSuffix(lit, string(quote))
	return strings.ReplaceAll(lit, string([]byte{quote, quote}), string(quote))
}

func isIdent(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

func isColumn(toks []token, column string) bool {
	// [schema .] [table .] column
	if len(toks) == 0 || len(toks)%2 == 0 || len(toks) > 5 {
		return false
	}
	for i := 1; i < len(toks); i += 2 {
		if toks[i].kind != punct || toks[i].text != "." || (toks[i-1].kind != word && toks[i-1].kind != quoted) {
			return false
		}
	}
	return toks[len(toks)-1].names(column)
}

// Write is one UPDATE or DELETE statement of an SQL text.
type Write struct {
	Op    string // "UPDATE" or "DELETE"
	Table string // the table written, without schema or quotes
	// Where is the text of its WHERE clause, without the word, up to a
	// RETURNING, ORDER BY or LIMIT; "" when it has none.
	Where string
	// Sets is the list of columns an UPDATE assigns.
	Sets []string
}

// Writes returns the UPDATE and DELETE statements of the SQL text s, one
// per statement that writes a single named table (a multi-table MySQL
// DELETE is not read).
func Writes(s string) []Write {
	var out []Write
	text := s
	toks := tokenize(s)
	depth, start := 0, 0
	for i := 0; i <= len(toks); i++ {
		if i < len(toks) {
			t := toks[i]
			if t.kind != punct {
				continue
			}
			switch {
			case t.text == "(":
				depth++
				continue
			case t.text == ")":
				depth--
				continue
			case t.text != ";" || depth != 0:
				continue
			}
		}
		if w, ok := write(text, toks[start:i]); ok {
			out = append(out, w)
		}
		start = i + 1
	}
	return out
}

// write reads one statement.
func write(text string, toks []token) (Write, bool) {
	// The statement's verb: the first top-level UPDATE or DELETE, after a
	// WITH and its common table expressions.
	i, depth := 0, 0
	for ; i < len(toks); i++ {
		t := toks[i]
		if t.kind == punct && t.text == "(" {
			depth++
		} else if t.kind == punct && t.text == ")" {
			depth--
		} else if depth == 0 && (t.is("UPDATE") || t.is("DELETE")) {
			break
		} else if depth == 0 && (t.is("SELECT") || t.is("INSERT") || t.is("REPLACE") || t.is("MERGE")) {
			return Write{}, false
		}
	}
	if i == len(toks) || i > 0 && !toks[0].is("WITH") {
		return Write{}, false
	}
	w := Write{Op: strings.ToUpper(toks[i].text)}
	i++
	skip := func(words ...string) {
		for i < len(toks) {
			found := false
			for _, kw := range words {
				if toks[i].is(kw) {
					found = true
				}
			}
			if !found {
				return
			}
			i++
		}
	}
	if w.Op == "UPDATE" {
		skip("LOW_PRIORITY", "IGNORE", "ONLY")
		if i+1 < len(toks) && toks[i].is("OR") { // SQLite: UPDATE OR REPLACE
			i += 2
		}
	} else {
		skip("LOW_PRIORITY", "QUICK", "IGNORE")
		if i == len(toks) || !toks[i].is("FROM") {
			return Write{}, false
		}
		i++
		skip("ONLY")
	}
	// [schema .] table
	name := -1
	for i < len(toks) && (toks[i].kind == word || toks[i].kind == quoted) {
		name = i
		if i+1 < len(toks) && toks[i+1].kind == punct && toks[i+1].text == "." {
			i += 2
			continue
		}
		i++
		break
	}
	if name < 0 {
		return Write{}, false
	}
	w.Table = toks[name].text
	// SET's columns, and the top-level WHERE up to the clauses after it.
	depth = 0
	whereAt := -1
	for j := i; j < len(toks); j++ {
		t := toks[j]
		switch {
		case t.kind == punct && t.text == "(":
			depth++
		case t.kind == punct && t.text == ")":
			depth--
		case depth != 0:
		case t.kind == punct && t.text == "=" && w.Op == "UPDATE" && whereAt < 0 && j > 0 && (toks[j-1].kind == word || toks[j-1].kind == quoted):
			w.Sets = append(w.Sets, toks[j-1].text)
		case t.is("WHERE") && whereAt < 0:
			whereAt = j + 1
		case whereAt >= 0 && (t.is("RETURNING") || t.is("ORDER") || t.is("LIMIT")):
			if whereAt < j {
				w.Where = text[toks[whereAt].start:toks[j-1].end]
			}
			return w, true
		}
	}
	if whereAt >= 0 && whereAt < len(toks) {
		w.Where = text[toks[whereAt].start:toks[len(toks)-1].end]
	}
	return w, true
}

// StartsWithWrite reports whether s holds an UPDATE or DELETE statement at
// all, of any table.
func StartsWithWrite(s string) bool { return len(Writes(s)) > 0 }

// Increment reports whether expr is `column + ?` or `column - ?` (the
// column possibly qualified or quoted), and which sign it has.
func Increment(expr, column string) (sign byte, ok bool) {
	toks := tokenize(expr)
	if len(toks) < 3 {
		return 0, false
	}
	last := toks[len(toks)-1]
	op := toks[len(toks)-2]
	if last.kind != param || last.text != "?" || op.kind != punct || (op.text != "+" && op.text != "-") {
		return 0, false
	}
	if !isColumn(toks[:len(toks)-2], column) {
		return 0, false
	}
	return op.text[0], true
}
