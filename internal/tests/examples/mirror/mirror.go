// Package mirror runs the Examples of gormlock's public packages that go
// test only compiles there: they take their database from a package-level
// variable (db), which only a test can fill. The command examplemirror
// copies each package's example files, unchanged, into a directory under
// internal/tests/examples (otelgormlock's under otelgormlock/internal/tests),
// and writes a test per such Example that calls Run; a hand-written
// harness in that directory fills the variables.
//
// What an Example prints is written in its last comment, after "Prints:",
// as go test reads "Output:"; Run compares the two the same way.
package mirror

//go:generate go run ../../cmd/examplemirror -root ../../../..

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
)

// stdout serialises the Examples' use of os.Stdout.
var stdout sync.Mutex

// Run calls setup, which fills the variables the Examples use for this
// test (a fresh database, ...), then example, and fails the test when
// example panics or prints other than want (both trimmed of surrounding
// space, as go test compares an Example's output).
func Run(t *testing.T, setup func(t *testing.T), example func(), want string) {
	t.Helper()
	setup(t)
	got, panicked := capture(example)
	if panicked != "" {
		t.Fatalf("the example panicked: %s\nit printed:\n%s", panicked, got)
	}
	if g, w := strings.TrimSpace(got), strings.TrimSpace(want); g != w {
		t.Fatalf("the example printed:\n%s\nits comment says it prints:\n%s", g, w)
	}
}

// capture runs fn with os.Stdout going to a pipe, and returns what fn
// wrote there, and the value and stack of a panic of fn ("" when none).
func capture(fn func()) (out string, panicked string) {
	stdout.Lock()
	defer stdout.Unlock()
	r, w, err := os.Pipe()
	if err != nil {
		return "", fmt.Sprintf("os.Pipe: %v", err)
	}
	saved := os.Stdout
	os.Stdout = w
	read := make(chan string)
	go func() {
		var b bytes.Buffer
		_, _ = io.Copy(&b, r)
		_ = r.Close()
		read <- b.String()
	}()
	func() {
		defer func() {
			if p := recover(); p != nil {
				panicked = fmt.Sprintf("%v\n%s", p, debug.Stack())
			}
		}()
		fn()
	}()
	os.Stdout = saved
	_ = w.Close()
	return <-read, panicked
}
