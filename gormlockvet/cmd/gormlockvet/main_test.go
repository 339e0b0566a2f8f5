package main

import (
	"bytes"
	"errors"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// asCommand, set to 1 in its environment, makes the test binary run as the
// command: the tests run the binary they are in (with the race detector
// when they have it), with no go build of their own.
const asCommand = "GORMLOCKVET_TEST_AS_COMMAND"

func TestMain(m *testing.M) {
	if os.Getenv(asCommand) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestCommand runs the command standalone on the test application: its
// findings as file:line:col: message, go vet's exit status (1 with
// findings, 0 without), and the analyzer's flags.
func TestCommand(t *testing.T) {
	bin, app := command(t)
	out, code := runIn(t, app, bin, "./shop/")
	standalone := findings(out)
	if code != 1 || len(standalone) < 40 {
		t.Fatalf("gormlockvet ./shop/: exit %d, %d findings, want exit 1 and the test application's findings:\n%s", code, len(standalone), out)
	}
	if out, code := runIn(t, app, bin, "./model/"); code != 0 || out != "" {
		t.Fatalf("gormlockvet ./model/ (no writes): exit %d, output %q; want 0 and nothing", code, out)
	}
	if out, code := runIn(t, app, bin, "-guard-gorm-updates", "./shop/"); code != 1 || len(findings(out)) != len(standalone)-3 {
		t.Fatalf("-guard-gorm-updates: exit %d, %d findings; want 1 and the three writes through a record (Model(t), Save(t), Updates(a)) fewer than %d", code, len(findings(out)), len(standalone))
	}
}

// TestVetTool runs the command as go vet's tool on the test application:
// the same findings as standalone, and go vet's exit status.
func TestVetTool(t *testing.T) {
	if raceEnabled {
		// go vet runs the tool on each of the ~150 packages the
		// application imports, to type-check it: minutes with the race
		// detector on the shared machine, for no concurrency (one
		// package per process). The other pass of CI runs it.
		t.Skip("runs the command once per imported package; run without -race")
	}
	bin, app := command(t)
	out, _ := runIn(t, app, bin, "./shop/")
	standalone := findings(out)
	out, code := runIn(t, app, "go", "vet", "-vettool="+bin, "./shop/")
	vet := findings(out)
	if code != 1 || len(vet) == 0 || strings.Join(vet, "\n") != strings.Join(standalone, "\n") {
		t.Fatalf("go vet -vettool: exit %d, findings:\n%s\nwant exit 1 and the standalone findings:\n%s", code, strings.Join(vet, "\n"), strings.Join(standalone, "\n"))
	}
}

// command returns the command to run (the test binary) and the test
// application's directory.
func command(t *testing.T) (bin, app string) {
	t.Helper()
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	app, err = filepath.Abs("../../testdata/app")
	if err != nil {
		t.Fatal(err)
	}
	return bin, app
}

var finding = regexp.MustCompile(`(?m)^(?:.*/)?(shop/\w+\.go):(\d+):(\d+): (unguarded .*)$`)

// findings returns the findings in the command's output, as
// shop/file.go:line:col:message.
func findings(out string) []string {
	var got []string
	for _, m := range finding.FindAllStringSubmatch(out, -1) {
		got = append(got, strings.Join(m[1:], ":"))
	}
	return got
}

// TestFix runs the command with -fix on a copy of the test application's
// billing package: the file becomes its .golden copy.
func TestFix(t *testing.T) {
	if raceEnabled {
		// The copy is a module of its own, compiled anew for go list
		// -export in each pass; -race adds nothing to one package
		// analyzed and rewritten. The other pass of CI runs it.
		t.Skip("compiles a copy of the test application; run without -race")
	}
	bin, app := command(t)
	dir := t.TempDir()
	for _, name := range []string{"go.mod", "go.sum", "model/model.go", "billing/billing.go"} {
		src, err := os.ReadFile(filepath.Join(app, name))
		if err != nil {
			t.Fatal(err)
		}
		if name == "go.mod" { // the copy names the repository by its absolute path
			src = []byte(strings.Replace(string(src), "=> ../../..", "=> "+filepath.Join(app, "..", "..", ".."), 1))
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), src, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, code := runIn(t, dir, bin, "-fix", "./billing/"); code != 1 {
		t.Fatalf("gormlockvet -fix ./billing/: exit %d, want 1 (it found writes to fix):\n%s", code, out)
	}
	got, err := os.ReadFile(filepath.Join(dir, "billing/billing.go"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(app, "billing/billing.go.golden"))
	if err != nil {
		t.Fatal(err)
	}
	if want, err = format.Source(want); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("billing.go after -fix:\n%s\nwant (billing.go.golden, formatted):\n%s", got, want)
	}
}

// runIn runs a command in dir, the test binary as the command, and returns
// its output and exit status.
func runIn(t *testing.T, dir string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", asCommand+"=1")
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
