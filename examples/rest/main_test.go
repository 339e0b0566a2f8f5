package main

import (
	"context"
	"errors"
	"io/fs"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gormlock/gormlock/internal/tests/testdb"
)

// guide is the HTTP guide, relative to this directory, and marker the line
// that precedes its curl session, a ```console block.
const (
	guide  = "../../docs/http.md"
	marker = "<!-- session: checked by examples/rest -->"
)

// guideSession returns the commands of the HTTP guide's curl session and
// the output shown after each.
func guideSession(t *testing.T) (cmds []string, want []string) {
	t.Helper()
	b, err := os.ReadFile(guide)
	if errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s does not exist: the curl session this test replays lives there, as a ```console block after the line %s", guide, marker)
	}
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(b), marker+"\n```console\n")
	require.True(t, ok, "%s has no line %s followed by a ```console block", guide, marker)
	block, _, ok := strings.Cut(rest, "\n```")
	require.True(t, ok, "%s: the session block after %s is not closed", guide, marker)
	for _, line := range strings.Split(block, "\n") {
		if cmd, ok := strings.CutPrefix(line, "$ "); ok {
			cmds = append(cmds, cmd)
			want = append(want, "")
			continue
		}
		require.NotEmpty(t, cmds, "output before the first command: %q", line)
		want[len(want)-1] += strings.TrimRight(line, " ") + "\n"
	}
	return cmds, want
}

// versionRE matches a version (a clock reading in microseconds).
var versionRE = regexp.MustCompile(`\d{13,}`)

// nameVersions replaces the versions in s by v1, v2, ... in the order they
// first appear, so a session's output compares with the guide's although
// the versions themselves differ on every run: the same version must come
// back wherever the guide repeats it, and a new one wherever it shows one.
func nameVersions(s string) string {
	names := map[string]string{}
	return versionRE.ReplaceAllStringFunc(s, func(v string) string {
		if _, ok := names[v]; !ok {
			names[v] = "v" + strconv.Itoa(len(names)+1)
		}
		return names[v]
	})
}

// The HTTP guide's curl session, run with curl against the example server
// on each database, prints exactly what the guide shows, up to the
// versions' values (see nameVersions).
func TestGuideSession(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("curl is needed to replay the HTTP guide's session")
		}
		t.Skip("curl is not installed")
	}
	cmds, want := guideSession(t)
	require.GreaterOrEqual(t, len(cmds), 8)
	for _, d := range testdb.Dialects {
		t.Run(d, func(t *testing.T) {
			dsn := filepath.Join(t.TempDir(), "rest.db")
			switch d {
			case "postgres":
				dsn = testdb.PostgresSchema(t)
			case "mariadb":
				dsn = testdb.MariaDBDatabase(t)
			}
			db, closeDB, err := open(dsn)
			require.NoError(t, err)
			t.Cleanup(func() { _ = closeDB() })
			h, err := newHandler(context.Background(), db)
			require.NoError(t, err)
			srv := httptest.NewServer(h)
			defer srv.Close()
			host := strings.TrimPrefix(srv.URL, "http://")

			var script strings.Builder
			for _, c := range cmds {
				script.WriteString(strings.ReplaceAll(c, "localhost:8080", host) + "\necho '@@@'\n")
			}
			out, err := exec.Command("bash", "-c", script.String()).CombinedOutput()
			require.NoError(t, err, string(out))
			got := strings.Split(nameVersions(string(out)), "@@@\n")
			require.Len(t, got, len(cmds)+1, string(out))
			want := strings.Split(nameVersions(strings.Join(want, "@@@\n")), "@@@\n")
			for i := range cmds {
				var norm strings.Builder
				for _, line := range strings.SplitAfter(got[i], "\n") {
					if line != "" {
						norm.WriteString(strings.TrimRight(line, " \n") + "\n")
					}
				}
				// curl -w and a JSON body may lack a final newline.
				require.Equal(t, want[i], norm.String(), "after $ %s", cmds[i])
			}
		})
	}
}
