package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestCommand builds the command and runs it on the test application, both
// standalone and as go vet's tool: the same findings, as
// file:line:col: message, and go vet's exit status (1 with findings, 0
// without).
func TestCommand(t *testing.T) {
	if testing.Short() || raceEnabled {
		// It runs the built command (never race-instrumented): -race
		// checks nothing here; CI runs it without -race on the newer Go.
		t.Skip("builds and runs the command four times; run without -short and -race")
	}
	bin := filepath.Join(t.TempDir(), "gormlockvet")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	app, err := filepath.Abs("../../testdata/app")
	if err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = app
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		switch {
		case errors.As(err, &exit):
			return string(out), exit.ExitCode()
		case err != nil:
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return string(out), 0
	}
	finding := regexp.MustCompile(`(?m)^(?:.*/)?(shop/\w+\.go):(\d+):(\d+): (unguarded .*)$`)
	findings := func(out string) []string {
		var got []string
		for _, m := range finding.FindAllStringSubmatch(out, -1) {
			got = append(got, strings.Join(m[1:], ":"))
		}
		return got
	}

	out, code := run(bin, "./shop/")
	standalone := findings(out)
	if code != 1 || len(standalone) < 40 {
		t.Fatalf("gormlockvet ./shop/: exit %d, %d findings, want exit 1 and the test application's findings:\n%s", code, len(standalone), out)
	}
	out, code = run("go", "vet", "-vettool="+bin, "./shop/")
	vet := findings(out)
	if code != 1 || strings.Join(vet, "\n") != strings.Join(standalone, "\n") {
		t.Fatalf("go vet -vettool: exit %d, findings:\n%s\nwant exit 1 and the standalone findings:\n%s", code, strings.Join(vet, "\n"), strings.Join(standalone, "\n"))
	}
	if out, code := run(bin, "./model/"); code != 0 || out != "" {
		t.Fatalf("gormlockvet ./model/ (no writes): exit %d, output %q; want 0 and nothing", code, out)
	}
	if out, code := run(bin, "-guard-gorm-updates", "./shop/"); code != 1 || len(findings(out)) != len(standalone)-3 {
		t.Fatalf("-guard-gorm-updates: exit %d, %d findings; want 1 and the three writes through a record (Model(t), Save(t), Updates(a)) fewer than %d", code, len(findings(out)), len(standalone))
	}
}
