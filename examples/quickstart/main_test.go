package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gormlock/gormlock/internal/tests/testdb"
)

// want is the whole output of run; %s is the dialect.
const want = `gormlock quickstart: the two-writer "CAS flow" on %s
(versions are clock readings; shown as v1, v2, ... in the order they appear)

Act 1: plain read-modify-write (no version guard)
  writer 1 reads:   map[a_field:a_value] (version v1)
  writer 2 reads:   map[a_field:a_value] (version v1)
  writer 1 sets field1=value1, plain write: ok (1 row updated)
  writer 2 sets field2=value2, plain write: ok (1 row updated)
  re-read:          map[a_field:a_value field2:value2] (version v1)
  => field1 LOST: writer 2 wrote back its copy, read before writer 1's write;
     the version was ignored and is still v1

Act 2: guarded Update (UPDATE ... WHERE id = ? AND version = ?)
  writer 1 reads:   map[a_field:a_value] (version v2)
  writer 2 reads:   map[a_field:a_value] (version v2)
  writer 1 sets field1=value1, Update: ok, now at version v3
  writer 2 sets field2=value2, Update: refused
    errors.Is(err, locking.ErrStaleData) = true
    *locking.StaleDataError: Expected version v2, Actual version v3
    writer 2's entity is left as it was: still at version v2
  re-read:          map[a_field:a_value field1:value1] (version v3)
  => field1 kept, field2 not written: writer 2 must re-read and retry (act 3)

Act 3: Mutate (retrying read-modify-write), two concurrent writers
  writer 1 Mutate sets field1=value1: ok
  writer 2 Mutate sets field2=value2: ok
  attempts in all: 3 (both first attempts read the same version; the one that lost re-read and retried)
  re-read:          map[a_field:a_value field1:value1 field2:value2] (version v4)
  => both field1 and field2 kept; final version v4
`

// keyLines are the lines that carry the story, checked one by one so that a
// failure names what went wrong before the whole output is compared.
var keyLines = []struct{ act, line string }{
	{"act 1: field1 lost", "  re-read:          map[a_field:a_value field2:value2] (version v1)"},
	{"act 2: ErrStaleData", "    errors.Is(err, locking.ErrStaleData) = true"},
	{"act 2: versions", "    *locking.StaleDataError: Expected version v2, Actual version v3"},
	{"act 2: field1 kept", "  re-read:          map[a_field:a_value field1:value1] (version v3)"},
	{"act 3: both fields", "  re-read:          map[a_field:a_value field1:value1 field2:value2] (version v4)"},
	{"act 3: retried once", "  attempts in all: 3 (both first attempts read the same version; the one that lost re-read and retried)"},
}

// check runs run on dsn and compares its output with want.
func check(t *testing.T, dsn, dialect string) {
	t.Helper()
	var buf bytes.Buffer
	if err := run(context.Background(), &buf, dsn); err != nil {
		t.Fatalf("run: %v\noutput so far:\n%s", err, buf.String())
	}
	got := buf.String()
	lines := map[string]bool{}
	for _, l := range strings.Split(got, "\n") {
		lines[l] = true
	}
	for _, k := range keyLines {
		if !lines[k.line] {
			t.Errorf("%s: missing line\n%s", k.act, k.line)
		}
	}
	if w := fmt.Sprintf(want, dialect); got != w {
		t.Errorf("output differs\n--- got:\n%s--- want:\n%s", got, w)
	}
}

// noneLeft checks that no documents are left in the database target names.
func noneLeft(t *testing.T, target string) {
	t.Helper()
	db, closeDB, err := open(target)
	if err != nil {
		t.Fatal(err)
	}
	defer closeDB()
	var n int64
	if err := db.Model(&Document{}).Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d documents left behind, want 0", n)
	}
}

func TestRunSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "quickstart.db")
	check(t, path, "sqlite")
	// A second run on the same file (-db FILE twice) finds the table
	// created and its own ids free.
	check(t, path, "sqlite")
	noneLeft(t, path)
}

func TestRunDefaultTempFile(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // os.MkdirTemp("", ...) creates under it on Unix
	check(t, "", "sqlite")
	left, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("left behind in the temporary directory: %s", e.Name())
	}
}

func TestRunPostgres(t *testing.T) {
	// run creates its table in the database it is given: give it a schema
	// of its own instead of the shared database's public schema.
	dsn := testdb.PostgresSchema(t)
	check(t, dsn, "postgres")
	check(t, dsn, "postgres") // a rerun does not collide
	noneLeft(t, dsn)
}

func TestRunMariaDB(t *testing.T) {
	// run creates its table in the database it is given: give it a
	// database of its own.
	dsn := testdb.MariaDBDatabase(t)
	check(t, dsn, "mysql")
	check(t, dsn, "mysql") // a rerun does not collide
	noneLeft(t, dsn)
}

// The -dsn flag takes PostgreSQL and MySQL DSNs in the forms the package
// comment shows, and nothing else.
func TestServer(t *testing.T) {
	for dsn, want := range map[string]string{
		"postgres://postgres@127.0.0.1:5432/test?sslmode=disable": "postgres",
		"postgresql://app@db/app":                                 "postgres",
		"mysql://root@127.0.0.1:3306/test":                        "mysql",
		"root@tcp(127.0.0.1:3306)/test?parseTime=true":            "mysql",
		"app:secret@unix(/run/mysqld/mysqld.sock)/app":            "mysql",
		"demo.db":            "",
		"/tmp/quickstart.db": "",
	} {
		if got := server(dsn); got != want {
			t.Errorf("server(%q) = %q, want %q", dsn, got, want)
		}
	}
}
