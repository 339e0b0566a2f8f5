package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The mirrors in the repository are what examplemirror makes of the public
// packages' Examples now: each test of a mirror runs the very code of its
// package's Example, and checks what its Prints comment says.
func TestMirrorsAreCurrent(t *testing.T) {
	files, err := generate("../../../..")
	if err != nil {
		t.Fatal(err)
	}
	if problems := compare("../../../..", files); len(problems) > 0 {
		t.Fatal(strings.Join(problems, "\n"))
	}
}

const exampleSrc = `package thing_test

import "fmt"

var db *int

// A compiled-only Example.
func ExampleDo() {
	fmt.Println(*db + 1)
	// Prints:
	// 2
}

func ExampleRun() {
	fmt.Println("runs")
	// Output:
	// runs
}
`

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The mirror holds the example file as it is, and a test only for the
// compiled-only Example, expecting what its Prints comment says; an edit
// of the Example makes the mirror out of date, and so does a copy whose
// source is gone.
func TestMirrorOfAPackage(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "thing", "example_test.go"), exampleSrc)
	m := mirror{"thing", "mirror/thing"}
	files := map[string][]byte{}
	if err := generateMirror(root, m, files); err != nil {
		t.Fatal(err)
	}
	copied := string(files[filepath.Join("mirror", "thing", "example_test.go")])
	if want := generatedBy + " from thing/example_test.go; DO NOT EDIT.\n\n" + exampleSrc; copied != want {
		t.Fatalf("the copy is\n%s\nwant\n%s", copied, want)
	}
	tests := string(files[filepath.Join("mirror", "thing", wrappers)])
	if !strings.Contains(tests, `mirror.Run(t, setup, ExampleDo, "2\n")`) || strings.Contains(tests, "ExampleRun") {
		t.Fatalf("the tests are\n%s", tests)
	}
	if err := write(root, files); err != nil {
		t.Fatal(err)
	}
	if problems := compare(root, files); len(problems) > 0 {
		t.Fatalf("just written, yet: %v", problems)
	}

	writeFile(t, filepath.Join(root, "thing", "example_test.go"), strings.Replace(exampleSrc, "// 2", "// 3", 1))
	again := map[string][]byte{}
	if err := generateMirror(root, m, again); err != nil {
		t.Fatal(err)
	}
	problems := compare(root, again)
	if len(problems) != 2 || !strings.Contains(problems[0], "mirror/thing/example_test.go is not what examplemirror makes") ||
		!strings.Contains(problems[1], "mirror/thing/mirror_test.go is not what examplemirror makes") {
		t.Fatalf("after an edit: %q", problems)
	}
}

// A public package with a compiled-only Example needs a mirror; one in
// internal/ does not.
func TestEveryPackageNeedsAMirror(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "internal", "thing", "example_test.go"), exampleSrc)
	if err := everyPackageMirrored(root); err != nil {
		t.Fatalf("internal/: %v", err)
	}
	writeFile(t, filepath.Join(root, "thing", "example_test.go"), exampleSrc)
	err := everyPackageMirrored(root)
	if err == nil || !strings.Contains(err.Error(), "thing has Examples go test only compiles (ExampleDo ...) and no mirror") {
		t.Fatalf("got %v", err)
	}
}

// minShown is the least number of Examples pkg.go.dev shows for a public
// package: one, and for repository, the package a newcomer opens first,
// one for each family of calls.
func minShown(dir string) int {
	if dir == "repository" {
		return 30
	}
	return 1
}

// Every public package shows its Examples on pkg.go.dev, and each Example
// is shown: its name names the package, or a function, type or method of
// it.
func TestEveryPublicPackageShowsItsExamples(t *testing.T) {
	dirs, err := publicPackages("../../../..")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(dirs, "repository") || !slices.Contains(dirs, "opendb/mysql") || !slices.Contains(dirs, "otelgormlock") {
		t.Fatalf("public packages: %v", dirs)
	}
	for _, dir := range dirs {
		s, err := shown("../../../..", dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.shown) < minShown(dir) {
			t.Errorf("%s: pkg.go.dev would show %d Examples, want at least %d", dir, len(s.shown), minShown(dir))
		}
		if len(s.orphaned) > 0 {
			t.Errorf("%s: pkg.go.dev would not show %v: the name of an Example must name the package (Example, Example_suffix) or one of its functions, types or methods", dir, s.orphaned)
		}
	}
}
