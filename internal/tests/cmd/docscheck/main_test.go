package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The repository's own documents pass.
func TestTheDocumentsAgree(t *testing.T) {
	problems, err := check("../../../..")
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Fatal(strings.Join(problems, "\n"))
	}
}

// tree writes files (path: content) under a new directory and returns it.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for path, content := range files {
		full := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// withRules replaces the facts and the known problems for one test.
func withRules(t *testing.T, f []fact, k map[string]string) {
	t.Helper()
	savedFacts, savedKnown := facts, known
	facts, known = f, k
	t.Cleanup(func() { facts, known = savedFacts, savedKnown })
}

// expect checks that the problems of root are exactly those matching
// want, one each.
func expect(t *testing.T, root string, want ...string) {
	t.Helper()
	problems, err := check(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%s", len(problems), len(want), strings.Join(problems, "\n"))
	}
	for i, w := range want {
		if !strings.Contains(problems[i], w) {
			t.Errorf("problem %d is\n%s\nwant it to contain %q", i, problems[i], w)
		}
	}
}

func TestLinksAnchorsAndPaths(t *testing.T) {
	withRules(t, nil, nil)
	root := tree(t, map[string]string{
		"README.md": "# Project\n\n[guide](docs/guide.md#set-up) [gone](docs/gone.md) [bad anchor](docs/guide.md#nope) [here](#project)\n" +
			"Run `internal/tests/galera` and `internal/tests/nowhere`; `examples/*.go` and `bench/out/x.json`.\n\n" +
			"```sh\n[not a link](nowhere.md) `internal/also/nowhere`\n```\n",
		"docs/guide.md":            "# Guide\n\n## Set up\n\n## Set up\n\n[back](../README.md#project) [second](#set-up-1)\n",
		"internal/tests/galera/x":  "",
		"examples/main.go":         "package main\n",
		".gitignore":               "/bench/out/\n",
		"Makefile":                 "# See README.md \"Project\" and CONTRIBUTING.md, and docs/guide.md \"Tear down\"; internal/tests/galera, internal/gone.\nall:\n",
		"docs/not-checked/page.md": "[x](nowhere.md)\n",
	})
	expect(t, root,
		"README.md:3: link docs/gone.md: docs/gone.md does not exist",
		"README.md:3: link docs/guide.md#nope: docs/guide.md has no heading whose anchor is #nope; link to one of its headings (#guide, #set-up, #set-up-1)",
		"README.md:4: `internal/tests/nowhere` does not exist in the repository",
		"Makefile:1: names CONTRIBUTING.md, which does not exist",
		`Makefile:1: names the section "Tear down" of docs/guide.md, which has no such heading`,
		"Makefile:1: names internal/gone, which does not exist",
	)
}

func TestFactsAreStatedInTheirHome(t *testing.T) {
	withRules(t, []fact{{"the answer", regexp.MustCompile(`answer is \d+`), "docs/facts.md#answers"}},
		map[string]string{"docs/old.md: the answer": "someone", "docs/fixed.md: the answer": "someone else"})
	root := tree(t, map[string]string{
		"docs/facts.md": "# Facts\n\n## Answers\n\nThe answer is 42.\n",
		"README.md":     "Our answer\nis 42, as [facts](docs/facts.md#answers) says.\n\n| q | the answer is 41 |\n",
		"docs/old.md":   "The answer is 40.\n",
		"docs/fixed.md": "See [facts](facts.md#answers).\n",
		"CHANGELOG.md":  "- the answer is 39 (then)\n",
	})
	expect(t, root,
		"README.md:1: states the answer, which is stated once, in docs/facts.md#answers: link there instead",
		"README.md:4: states the answer",
		`"docs/fixed.md: the answer" (known, for someone else) no longer occurs: remove it from known`,
	)
}

func TestRangesOfRatiosAreStatedOnce(t *testing.T) {
	withRules(t, nil, nil)
	root := tree(t, map[string]string{
		"docs/performance.md": "Leases: 0.43–0.46× raw; Mutate 1.35×; target ≥0.8–1.0×. Apply 1.25–1.43×.\n",
		"docs/modes.md": "Leases run at 0.43–0.46× raw. Mutate 1.35× (a single ratio is not checked). At least ≥0.8–1.0×.\n" +
			"Apply: 1.25–1.43× ([figures](performance.md)).\n",
		"bench/README.md": "0.43–0.46× and 1.25–1.43× again, in the log.\n",
	})
	expect(t, root,
		"docs/modes.md:1: the measurement 0.43–0.46× is also stated in docs/performance.md",
		"docs/performance.md:1: the measurement 0.43–0.46× is also stated in docs/modes.md",
	)
}

func TestAnchorsAsGitHubMakesThem(t *testing.T) {
	for heading, want := range map[string]string{
		"4. Connection settings when you open the database yourself": "4-connection-settings-when-you-open-the-database-yourself",
		"Time zones and `loc`":                "time-zones-and-loc",
		"How long `make test` takes":          "how-long-make-test-takes",
		"MariaDB and MySQL (one server)":      "mariadb-and-mysql-one-server",
		"Hot rows across processes: issue 14": "hot-rows-across-processes-issue-14",
		"The `\"version\"` JSON field":        "the-version-json-field",
	} {
		if got := anchor(heading); got != want {
			t.Errorf("anchor(%q) = %q, want %q", heading, got, want)
		}
	}
}

// A release the CHANGELOG names needs its git tag.
func TestReleasesAreTagged(t *testing.T) {
	withRules(t, nil, nil)
	root := tree(t, map[string]string{"CHANGELOG.md": "# Changelog\n\n## [Unreleased]\n\n## [0.2.0] - 2027-01-01\n\n## [0.1.0] - 2026-11-24\n"})
	for _, args := range [][]string{{"init", "-q"}, {"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "x"}, {"tag", "v0.1.0"}} {
		if out, err := exec.Command("git", append([]string{"-C", root}, args...)...).CombinedOutput(); err != nil {
			t.Skipf("git %v: %v: %s", args, err, out)
		}
	}
	expect(t, root, "CHANGELOG.md:5: names the release 0.2.0, which no git tag (v0.2.0) marks")
}

// README.md and CONTRIBUTING.md name every example program.
func TestExamplesAreListed(t *testing.T) {
	withRules(t, nil, nil)
	root := tree(t, map[string]string{
		"README.md":                   "Run `quickstart`, `bank`.\n",
		"CONTRIBUTING.md":             "Programs: `quickstart`.\n",
		"examples/quickstart/main.go": "package main\n",
		"examples/bank/main.go":       "package main\n",
		"examples/go.mod":             "module x\n",
	})
	expect(t, root, "CONTRIBUTING.md: does not name the example program examples/bank")
}
