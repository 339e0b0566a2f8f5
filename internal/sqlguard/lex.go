package sqlguard

import (
	"strings"
)

// kind is the kind of a token.
type kind uint8

const (
	word    kind = iota // an unquoted name or keyword
	ident               // a quoted name, its text unquoted
	str                 // a string literal
	number              // a numeric literal
	param               // a placeholder: ?, $1, @name, ...
	op                  // an operator: =, <>, ||, ...
	open                // (
	closing             // )
	openSq              // [ (a PostgreSQL array subscript)
	closeSq             // ]
	dot                 // .
	comma               // ,
)

// token is one token of a condition.
type token struct {
	kind kind
	text string
}

// reading is one way a database reads SQL text: where the databases (or
// one database's settings) differ, a condition is read each way, and it
// guards only if it guards in every reading.
type reading struct {
	backslash     bool // '...' strings take backslash escapes (MySQL's default sql_mode)
	escapeStrings bool // E'...' strings take backslash escapes (PostgreSQL)
	dollarQuotes  bool // $tag$...$tag$ strings (PostgreSQL)
	dollarParams  bool // $1 is a placeholder (PostgreSQL)
	doubleString  bool // "..." is a string (MySQL without ANSI_QUOTES), else a name
	backticks     bool // `...` names (MySQL, SQLite)
	brackets      bool // [...] names (SQLite), else [ ] subscripts
	hashComments  bool // # starts a comment (MySQL)
	dashSpace     bool // -- starts a comment only before a space (MySQL)
	nested        bool // /* */ comments nest (PostgreSQL)
	execComments  bool // /*! ... */ and /*M! ... */ run their text (MySQL, MariaDB)
	pipesOr       bool // || is OR (MySQL without PIPES_AS_CONCAT)
	foldLower     bool // unquoted names fold to lower case, quoted ones match exactly (PostgreSQL); else names match in any case
	question      bool // ? is a placeholder
	numbered      bool // ?NNN is a placeholder (SQLite)
	// named lists the bytes that start a named placeholder: "@" for
	// GORM's @name, ":@$" for SQLite's.
	named     string
	gormNames bool // a named placeholder ends where GORM's NamedExpr ends one
}

// lex splits s into tokens as r reads it. A comment that could hide
// what follows it (a line comment, an unterminated or executable one), an
// unterminated literal, a semicolon, or a character the reading does not
// know, makes s unreadable: why says which, and the tokens are nil. A
// closed block comment is skipped.
func lex(s string, r *reading) (toks []token, why string) {
	toks = make([]token, 0, 16)
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case c < 0x20 || c == 0x7f:
			return nil, "a control character"
		case c == '\'':
			end, ok := quoted(s, i, '\'', r.backslash)
			if !ok {
				return nil, "an unterminated string"
			}
			toks = append(toks, token{str, s[i:end]})
			i = end
		case c == '"':
			end, ok := quoted(s, i, '"', r.doubleString && r.backslash)
			if !ok {
				return nil, "an unterminated quoted name or string"
			}
			if r.doubleString {
				toks = append(toks, token{str, s[i:end]})
			} else {
				toks = append(toks, token{ident, unquote(s[i+1:end-1], '"')})
			}
			i = end
		case c == '`':
			if !r.backticks {
				return nil, "a backtick"
			}
			end, ok := quoted(s, i, '`', false)
			if !ok {
				return nil, "an unterminated quoted name"
			}
			toks = append(toks, token{ident, unquote(s[i+1:end-1], '`')})
			i = end
		case c == '[' && r.brackets:
			j := strings.IndexByte(s[i+1:], ']')
			if j < 0 {
				return nil, "an unterminated quoted name"
			}
			toks = append(toks, token{ident, s[i+1 : i+1+j]})
			i += j + 2
		case c == '[':
			toks = append(toks, token{openSq, "["})
			i++
		case c == ']':
			toks = append(toks, token{closeSq, "]"})
			i++
		case c == '(':
			toks = append(toks, token{open, "("})
			i++
		case c == ')':
			toks = append(toks, token{closing, ")"})
			i++
		case c == ',':
			toks = append(toks, token{comma, ","})
			i++
		case c == ';':
			return nil, "a semicolon"
		case c == '.' && i+1 < len(s) && isDigit(s[i+1]) && !afterName(toks):
			end, ok := numberEnd(s, i)
			if !ok {
				return nil, "a malformed number"
			}
			toks = append(toks, token{number, s[i:end]})
			i = end
		case c == '.':
			toks = append(toks, token{dot, "."})
			i++
		case isDigit(c):
			end, ok := numberEnd(s, i)
			if !ok {
				return nil, "a malformed number"
			}
			toks = append(toks, token{number, s[i:end]})
			i = end
		case c == '$' && r.dollarQuotes:
			end, t, why := r.dollar(s, i)
			if why != "" {
				return nil, why
			}
			toks = append(toks, t)
			i = end
		case c == '?' && r.question:
			j := i + 1
			if r.numbered {
				for j < len(s) && isDigit(s[j]) {
					j++
				}
			}
			toks = append(toks, token{param, s[i:j]})
			i = j
		case strings.IndexByte(r.named, c) >= 0 && i+1 < len(s) && isNameByte(s[i+1]):
			j := i + 1
			if r.gormNames {
				// GORM's NamedExpr takes every byte up to one of these as
				// the name.
				for j < len(s) && strings.IndexByte(" ,)\"'`\r\n;", s[j]) < 0 {
					j++
				}
			} else {
				for j < len(s) && isNameByte(s[j]) {
					j++
				}
			}
			toks = append(toks, token{param, s[i:j]})
			i = j
		case isNameStart(c) || c == '$':
			j := i + 1
			for j < len(s) && isNameByte(s[j]) {
				j++
			}
			if j < len(s) && s[j] == '\'' {
				// A prefixed string: E'...', N'...', X'...', _utf8mb4'...'.
				escapes := r.backslash || r.escapeStrings && (j-i == 1 && (c == 'e' || c == 'E'))
				end, ok := quoted(s, j, '\'', escapes)
				if !ok {
					return nil, "an unterminated string"
				}
				toks = append(toks, token{str, s[i:end]})
				i = end
				continue
			}
			toks = append(toks, token{word, s[i:j]})
			i = j
		case c == '-' && i+1 < len(s) && s[i+1] == '-' && r.lineComment(s, i):
			return nil, "a line comment"
		case c == '#' && r.hashComments:
			return nil, "a line comment"
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			end, why := r.blockComment(s, i)
			if why != "" {
				return nil, why
			}
			i = end
		case strings.IndexByte(opBytes, c) >= 0:
			j := i + 1
			for j < len(s) && strings.IndexByte(opBytes, s[j]) >= 0 && !r.startsOther(s, j) {
				j++
			}
			toks = append(toks, token{op, s[i:j]})
			i = j
		default:
			return nil, "the character " + strconvQuote(c)
		}
	}
	return toks, ""
}

// opBytes are the bytes an operator is made of.
const opBytes = "+-*/<>=~!@#%^&|?:\\"

// startsOther reports whether the byte at i ends an operator: a comment or
// a placeholder starts there.
func (r *reading) startsOther(s string, i int) bool {
	c := s[i]
	switch {
	case c == '-' && i+1 < len(s) && s[i+1] == '-':
		return r.lineComment(s, i)
	case c == '/' && i+1 < len(s) && s[i+1] == '*':
		return true
	case c == '#':
		return r.hashComments
	case c == '?':
		return r.question
	}
	return strings.IndexByte(r.named, c) >= 0 && i+1 < len(s) && isNameByte(s[i+1])
}

// lineComment reports whether the -- at i starts a comment.
func (r *reading) lineComment(s string, i int) bool {
	if !r.dashSpace {
		return true
	}
	return i+2 >= len(s) || s[i+2] <= ' ' || s[i+2] == 0x7f
}

// blockComment skips the comment that starts at i, returning where it
// ends; why is set when it runs to the end or runs its text.
func (r *reading) blockComment(s string, i int) (end int, why string) {
	if r.execComments && (strings.HasPrefix(s[i+2:], "!") || strings.HasPrefix(s[i+2:], "M!")) {
		return 0, "an executable comment"
	}
	depth := 1
	for j := i + 2; j+1 < len(s); j++ {
		switch {
		case s[j] == '*' && s[j+1] == '/':
			depth--
			j++
			if depth == 0 || !r.nested {
				return j + 1, ""
			}
		case r.nested && s[j] == '/' && s[j+1] == '*':
			depth++
			j++
		}
	}
	return 0, "an unterminated comment"
}

// dollar reads what starts with $ at i in PostgreSQL: a placeholder ($1)
// or a dollar-quoted string ($$...$$, $tag$...$tag$).
func (r *reading) dollar(s string, i int) (end int, t token, why string) {
	j := i + 1
	if j < len(s) && isDigit(s[j]) {
		for j < len(s) && isDigit(s[j]) {
			j++
		}
		if !r.dollarParams || j < len(s) && isNameByte(s[j]) {
			return 0, token{}, "a malformed placeholder"
		}
		return j, token{param, s[i:j]}, ""
	}
	for j < len(s) && isNameByte(s[j]) && s[j] != '$' {
		j++
	}
	if j >= len(s) || s[j] != '$' {
		return 0, token{}, "a stray $"
	}
	tag := s[i : j+1]
	k := strings.Index(s[j+1:], tag)
	if k < 0 {
		return 0, token{}, "an unterminated dollar-quoted string"
	}
	end = j + 1 + k + len(tag)
	return end, token{str, s[i:end]}, ""
}

// quoted returns the end of the literal or quoted name that starts with
// the quote q at i: a doubled quote stands for itself and, with escapes, a
// backslash takes the next byte.
func quoted(s string, i int, q byte, escapes bool) (end int, ok bool) {
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			if escapes {
				j++
			}
		case q:
			if j+1 < len(s) && s[j+1] == q {
				j++
				continue
			}
			return j + 1, true
		}
	}
	return 0, false
}

// unquote undoes the doubling of q in a quoted name.
func unquote(s string, q byte) string {
	d := string([]byte{q, q})
	if !strings.Contains(s, d) {
		return s
	}
	return strings.ReplaceAll(s, d, d[:1])
}

// numberEnd returns the end of the number that starts at i: digits, a
// fraction, an exponent, or a 0x hexadecimal. A name right after it (1abc)
// is refused: MySQL reads it as one name, PostgreSQL as a number and a
// name.
func numberEnd(s string, i int) (int, bool) {
	j := i
	if strings.HasPrefix(s[i:], "0x") || strings.HasPrefix(s[i:], "0X") {
		j += 2
		for j < len(s) && isHex(s[j]) {
			j++
		}
	} else {
		for j < len(s) && isDigit(s[j]) {
			j++
		}
		if j < len(s) && s[j] == '.' {
			j++
			for j < len(s) && isDigit(s[j]) {
				j++
			}
		}
		if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
			k := j + 1
			if k < len(s) && (s[k] == '+' || s[k] == '-') {
				k++
			}
			if k < len(s) && isDigit(s[k]) {
				j = k
				for j < len(s) && isDigit(s[j]) {
					j++
				}
			}
		}
	}
	if j < len(s) && (isNameByte(s[j]) || s[j] == '.') {
		return 0, false
	}
	return j, true
}

// afterName reports whether the last token is one a dot after it
// qualifies: a name, or a closing parenthesis.
func afterName(toks []token) bool {
	if len(toks) == 0 {
		return false
	}
	switch toks[len(toks)-1].kind {
	case word, ident, closing, closeSq:
		return true
	}
	return false
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isHex(c byte) bool   { return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func isNameStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

func isNameByte(c byte) bool { return isNameStart(c) || isDigit(c) || c == '$' }

func strconvQuote(c byte) string {
	const hex = "0123456789abcdef"
	if c >= 0x20 && c < 0x7f {
		return "'" + string(c) + "'"
	}
	return "0x" + string([]byte{hex[c>>4], hex[c&15]})
}
