package migrations

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
)

// Script is one of gormlock's migrations as plain SQL, for an application
// that creates gormlock's tables with a migration tool of its own instead
// of Up.
type Script struct {
	Version int64  // gormlock's version of it: 1, 2, ...
	Name    string // what it creates, as in its file name: "leases", "operations"
	// Up creates the table and its indexes: the migration's comments, then
	// its statements, each ending in a semicolon.
	Up string
	// Down drops what Up created.
	Down string
}

// UpStatements returns the statements of Up without their comments, one
// per element and without the semicolon, for db.Exec one at a time. On MySQL
// and MariaDB, run them so: go-sql-driver/mysql sends Up as a whole only
// with multiStatements=true.
func (s Script) UpStatements() []string { return splitStatements(s.Up) }

// DownStatements returns the statements of Down as UpStatements does.
func (s Script) DownStatements() []string { return splitStatements(s.Down) }

// Scripts returns gormlock's migrations for a dialect ("sqlite", "postgres"
// or "mysql"), oldest first: the SQL of the files FS returns, without goose's
// annotations. Another dialect is an error matching
// locking.ErrNotSupported.
func Scripts(dialect string) ([]Script, error) {
	fsys, err := FS(dialect)
	if err != nil {
		return nil, err
	}
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, fmt.Errorf("migrations: %s: %w", dialect, err)
	}
	scripts := make([]Script, 0, len(names))
	for _, name := range names {
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("migrations: %s/%s: %w", dialect, name, err)
		}
		s, err := parseScript(name, string(body))
		if err != nil {
			return nil, fmt.Errorf("migrations: %s/%s: %w", dialect, name, err)
		}
		scripts = append(scripts, s)
	}
	return scripts, nil
}

const (
	upMark   = "-- +goose Up"
	downMark = "-- +goose Down"
)

// parseScript reads a goose file named NNNNN_name.sql made of a comment, an
// Up section and a Down section, in that order.
func parseScript(file, body string) (Script, error) {
	num, name, ok := strings.Cut(strings.TrimSuffix(file, ".sql"), "_")
	version, err := strconv.ParseInt(num, 10, 64)
	if !ok || err != nil {
		return Script{}, errors.New("file name is not NNNNN_name.sql")
	}
	head, rest, ok := strings.Cut(body, upMark+"\n")
	if !ok {
		return Script{}, fmt.Errorf("no %q line", upMark)
	}
	up, down, ok := strings.Cut(rest, downMark+"\n")
	if !ok {
		return Script{}, fmt.Errorf("no %q line after %q", downMark, upMark)
	}
	if strings.Contains(body, "+goose StatementBegin") {
		return Script{}, errors.New("statement blocks are not supported")
	}
	upSQL := strings.TrimSpace(up) + "\n"
	if head = strings.TrimSpace(head); head != "" {
		upSQL = head + "\n\n" + upSQL
	}
	return Script{Version: version, Name: name, Up: upSQL, Down: strings.TrimSpace(down) + "\n"}, nil
}

// splitStatements splits sql at the semicolons that end its statements,
// dropping "--" and "/* */" comments and blank statements. Semicolons and
// comment marks are kept where they do not end a statement: inside quoted
// strings and identifiers ('...', "...", `...`), inside PostgreSQL's
// dollar-quoted strings ($$...$$, $tag$...$tag$, the usual form of a
// function's body), and inside the BEGIN ... END body of a CREATE TRIGGER
// statement (SQLite's, or MySQL's compound form). Such a body ends, as SQLite's
// own sqlite3_complete reads it, at the first END that follows a semicolon:
// its statements may hold CASE ... END expressions and MySQL's END IF, but no
// BEGIN ... END block of their own.
func splitStatements(sql string) []string {
	var out []string
	var b strings.Builder
	// What the statement read so far is, from its words: its first word,
	// whether it is a CREATE ... TRIGGER (or surely none), whether its
	// BEGIN ... END body has started, and its last two words or semicolons
	// (upper case).
	var first, last, prev string
	var trigger, other, body bool
	flush := func() {
		if s := strings.TrimSpace(b.String()); s != "" {
			out = append(out, s)
		}
		b.Reset()
		first, last, prev = "", "", ""
		trigger, other, body = false, false, false
	}
	token := func(t string) {
		switch {
		case first == "":
			first = t
			other = t != "CREATE"
		case !trigger && !other:
			// CREATE [OR REPLACE] [TEMP] [DEFINER = user] TRIGGER
			trigger = t == "TRIGGER"
			other = !trigger && !triggerLead[t]
		case trigger && t == "BEGIN":
			body = true
		}
		prev, last = last, t
	}
	for i := 0; i < len(sql); i++ {
		c := sql[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			// Up to and with the closing quote. A doubled quote in a
			// string ('it''s') ends one part and starts the next.
			j := i + 1
			for j < len(sql) && sql[j] != c {
				j++
			}
			j = min(j+1, len(sql))
			b.WriteString(sql[i:j])
			i = j - 1
		case c == '$' && dollarQuoted(sql[i:]) > 0:
			n := dollarQuoted(sql[i:])
			b.WriteString(sql[i : i+n])
			i += n - 1
		case wordByte(c):
			j := i + 1
			for j < len(sql) && wordByte(sql[j]) {
				j++
			}
			b.WriteString(sql[i:j])
			token(strings.ToUpper(sql[i:j]))
			i = j - 1
		case c == '-' && strings.HasPrefix(sql[i:], "--"):
			if end := strings.IndexByte(sql[i:], '\n'); end >= 0 {
				i += end - 1
			} else {
				i = len(sql)
			}
		case c == '/' && strings.HasPrefix(sql[i:], "/*"):
			b.WriteByte(' ')
			if end := strings.Index(sql[i+2:], "*/"); end >= 0 {
				i += end + 3
			} else {
				i = len(sql)
			}
		case c == ';' && body && !(last == "END" && prev == ";"):
			b.WriteByte(c) // inside a trigger's body
			token(";")
		case c == ';':
			flush()
		default:
			b.WriteByte(c)
		}
	}
	flush()
	return out
}

// triggerLead are the words that may come between CREATE and TRIGGER.
var triggerLead = map[string]bool{"OR": true, "REPLACE": true, "TEMP": true, "TEMPORARY": true,
	"DEFINER": true, "CURRENT_USER": true, "CONSTRAINT": true}

// wordByte reports whether c belongs to a word: a keyword, an unquoted
// identifier or a number. A '$' inside a word (MySQL's a$b, PostgreSQL's
// $1) starts no dollar quote.
func wordByte(c byte) bool {
	return c == '_' || c == '$' || c >= 0x80 || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// dollarQuoted returns the length of the dollar-quoted string sql starts
// with ($$...$$ or $tag$...$tag$, the tag made of a word's characters
// but '$', and not starting with a digit), or 0 when sql starts with none or
// it is not closed.
func dollarQuoted(sql string) int {
	end := strings.IndexByte(sql[1:], '$') + 1
	if end < 1 {
		return 0
	}
	for k := 1; k < end; k++ {
		c := sql[k]
		if !wordByte(c) || k == 1 && '0' <= c && c <= '9' {
			return 0
		}
	}
	tag := sql[:end+1]
	closing := strings.Index(sql[len(tag):], tag)
	if closing < 0 {
		return 0
	}
	return len(tag) + closing + len(tag)
}
