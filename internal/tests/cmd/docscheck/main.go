// Command docscheck fails when the project's documents disagree with each
// other or with the repository: a link, an anchor or a file a document
// names that does not exist, or a figure stated in a document that is not
// its home. make test runs it from the repository's root:
//
//	go run ./internal/tests/cmd/docscheck
//
// The documents are README.md, CONTRIBUTING.md, CHANGELOG.md, docs/*.md,
// bench/README.md and the comments of the Makefile. It checks:
//
//   - links: every relative link names a file or directory that exists,
//     and its #anchor a heading of that document (as GitHub makes anchors
//     of headings); in the Makefile, every document named and every
//     section quoted after it (README.md "Try it");
//   - paths: every path in backquotes that starts at a top-level entry of
//     the repository (`internal/tests/galera`, `.ci/run`) exists;
//   - the example programs: README.md and CONTRIBUTING.md name each
//     directory of examples/ (in backquotes);
//   - releases: the CHANGELOG names a release (## [0.1.0] - date) only
//     when a git tag (v0.1.0) marks it; until then its changes are under
//     Unreleased;
//   - facts stated once (facts, below): a figure or statement that was
//     made in several documents and drifted apart is made in its home
//     only; the others link there. The measurement log (bench/README.md)
//     and the CHANGELOG, which keep what was measured when, are exempt;
//   - ranges of ratios (0.43–0.46×; not targets such as ≥0.8×), which are
//     measurements: one stated in two documents is stated on a line that
//     links to the other one, so that the copy is seen to be one.
//
// A failure names the document and line, what is wrong, and what to do.
package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode"
)

// documents are the documents checked, as globs relative to the root.
var documents = []string{"README.md", "CONTRIBUTING.md", "CHANGELOG.md", "docs/*.md", "bench/README.md"}

// A fact is a figure or statement the documents make in one place only:
// a paragraph (or table row) of a document other than its home that
// matches pattern fails, and says to link to home instead.
type fact struct {
	what    string
	pattern *regexp.Regexp
	home    string // document#anchor
}

// facts are the figures that were stated in several documents and drifted
// apart. Add one when a figure starts to be repeated.
var facts = []fact{
	{"the time of a first, cold build with cgo (the quickstart)", regexp.MustCompile(`(?i)(cold|first)[^.|]*build[^.|]*\b\d+ ?(s|min)\b|\d+ ?s wall`), "docs/coming-from-gorm.md#cgo"},
	{"how long make test takes", regexp.MustCompile(`(?i)make test[^.|]*\b\d+ ?min`), "CONTRIBUTING.md#how-long-make-test-takes"},
	{"until when a version is exact as a JSON number", regexp.MustCompile(`until 2255`), "docs/getting-started.md#versions"},
	{"what an importer downloads", regexp.MustCompile(`(?i)downloads \d+ modules`), "README.md#install"},
	{"the throughput of leases against raw", regexp.MustCompile(`(?i)\bleases?\b[^|]*?\d+(\.\d+)?([–-]\d+(\.\d+)?)?× raw`), "docs/performance.md#figures"},
}

// exempt are the documents that record what was measured when, and may
// state a fact again.
var exempt = []string{"bench/README.md", "CHANGELOG.md"}

// known are problems another change in progress is fixing, as
// "document: what" (a fact's what, or a ratio), with who fixes them. An
// entry that no longer occurs is itself a problem: remove it.
var known = map[string]string{}

func main() {
	problems, err := check(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "docscheck:", err)
		os.Exit(1)
	}
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, p)
	}
	if len(problems) > 0 {
		fmt.Fprintf(os.Stderr, "docscheck: %d problems in the documents\n", len(problems))
		os.Exit(1)
	}
}

// A doc is one document, split into lines, with what is in fenced code
// blocks marked.
type doc struct {
	path    string // relative to the root, with slashes
	lines   []string
	inCode  []bool
	anchors map[string]bool
}

// check returns the problems of the documents under root.
func check(root string) ([]string, error) {
	var paths []string
	for _, g := range documents {
		m, err := filepath.Glob(filepath.Join(root, g))
		if err != nil {
			return nil, err
		}
		for _, p := range m {
			rel, _ := filepath.Rel(root, p)
			paths = append(paths, filepath.ToSlash(rel))
		}
	}
	sort.Strings(paths)
	docs := map[string]*doc{}
	for _, p := range paths {
		d, err := readDoc(root, p)
		if err != nil {
			return nil, err
		}
		docs[p] = d
	}
	var problems []string
	used := map[string]bool{}
	for _, p := range paths {
		d := docs[p]
		problems = append(problems, checkLinks(root, d, docs)...)
		problems = append(problems, checkPaths(root, d)...)
		problems = append(problems, checkRatios(d, docs, used)...)
		problems = append(problems, checkFacts(d, used)...)
	}
	mk, err := checkMakefile(root, docs)
	if err != nil {
		return nil, err
	}
	problems = append(problems, mk...)
	problems = append(problems, checkReleases(root, docs)...)
	problems = append(problems, checkExamplesListed(root, docs)...)
	for _, f := range facts {
		if p := checkTarget(root, "README.md", f.home, docs); p != "" {
			problems = append(problems, fmt.Sprintf("docscheck: the home of %s: %s", f.what, p))
		}
	}
	for _, k := range sortedKnown() {
		if !used[k] {
			problems = append(problems, fmt.Sprintf("docscheck: %q (known, for %s) no longer occurs: remove it from known", k, known[k]))
		}
	}
	return problems, nil
}

func readDoc(root, path string) (*doc, error) {
	b, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		return nil, err
	}
	d := &doc{path: path, anchors: map[string]bool{}}
	fenced := false
	seen := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		fence := strings.HasPrefix(strings.TrimSpace(line), "```")
		d.lines = append(d.lines, line)
		d.inCode = append(d.inCode, fenced || fence)
		if fence {
			fenced = !fenced
			continue
		}
		if !fenced && strings.HasPrefix(line, "#") {
			text := strings.TrimSpace(strings.TrimLeft(line, "#"))
			slug := anchor(text)
			if n := seen[slug]; n > 0 {
				d.anchors[fmt.Sprintf("%s-%d", slug, n)] = true
			} else {
				d.anchors[slug] = true
			}
			seen[slug]++
		}
	}
	return d, sc.Err()
}

// anchor is the anchor GitHub gives a heading: lower case, spaces as
// hyphens, without punctuation other than hyphens and underscores.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.M, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

var (
	linkRE     = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	refLinkRE  = regexp.MustCompile(`^\s*\[[^\]]+\]:\s+(\S+)`)
	codeSpanRE = regexp.MustCompile("`([^`]+)`")
)

// prose returns the line without its code spans, for the checks of text.
func prose(line string) string { return codeSpanRE.ReplaceAllString(line, "``") }

func checkLinks(root string, d *doc, docs map[string]*doc) []string {
	var problems []string
	for i, line := range d.lines {
		if d.inCode[i] {
			continue
		}
		var targets []string
		for _, m := range linkRE.FindAllStringSubmatch(prose(line), -1) {
			targets = append(targets, m[1])
		}
		if m := refLinkRE.FindStringSubmatch(line); m != nil {
			targets = append(targets, m[1])
		}
		for _, t := range targets {
			if p := checkTarget(root, d.path, t, docs); p != "" {
				problems = append(problems, fmt.Sprintf("%s:%d: %s", d.path, i+1, p))
			}
		}
	}
	return problems
}

// checkTarget returns what is wrong with the link target t of the
// document from, or "".
func checkTarget(root, from, t string, docs map[string]*doc) string {
	if strings.Contains(t, "://") || strings.HasPrefix(t, "mailto:") {
		return ""
	}
	file, frag, _ := strings.Cut(t, "#")
	target := from
	if file != "" {
		target = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(from), file)))
		if strings.HasPrefix(target, "../") {
			return fmt.Sprintf("link %s leaves the repository", t)
		}
		if _, err := os.Stat(filepath.Join(root, target)); err != nil {
			return fmt.Sprintf("link %s: %s does not exist; link to a file that does", t, target)
		}
	}
	if frag == "" || !strings.HasSuffix(target, ".md") {
		return ""
	}
	td, ok := docs[target]
	if !ok {
		var err error
		if td, err = readDoc(root, target); err != nil {
			return fmt.Sprintf("link %s: %v", t, err)
		}
		docs[target] = td
	}
	if !td.anchors[frag] {
		return fmt.Sprintf("link %s: %s has no heading whose anchor is #%s; link to one of its headings (%s)", t, target, frag, strings.Join(sortedAnchors(td), ", "))
	}
	return ""
}

func sortedAnchors(d *doc) []string {
	out := make([]string, 0, len(d.anchors))
	for a := range d.anchors {
		out = append(out, "#"+a)
	}
	sort.Strings(out)
	return out
}

// pathRE matches a repository path in backquotes: a name, a slash, more.
var pathRE = regexp.MustCompile(`^\.?[A-Za-z0-9_-][A-Za-z0-9_.-]*(/[A-Za-z0-9_.*-]+)+/?$`)

// ignored returns the root-anchored entries of root's .gitignore (/bench/out/),
// without their slashes: what the programs write, not the repository.
func ignored(root string) []string {
	b, _ := os.ReadFile(filepath.Join(root, ".gitignore"))
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "/") {
			out = append(out, strings.Trim(line, "/"))
		}
	}
	return out
}

func checkPaths(root string, d *doc) []string {
	top := map[string]bool{}
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		top[e.Name()] = true
	}
	skip := ignored(root)
	var problems []string
	for i, line := range d.lines {
		if d.inCode[i] {
			continue
		}
		for _, m := range codeSpanRE.FindAllStringSubmatch(line, -1) {
			p := strings.TrimSuffix(strings.TrimSuffix(m[1], "/..."), "/")
			first, _, _ := strings.Cut(p, "/")
			if !pathRE.MatchString(p) || !top[first] || !strings.Contains(p, "/") ||
				slices.ContainsFunc(skip, func(g string) bool { return p == g || strings.HasPrefix(p, g+"/") }) {
				continue
			}
			if matches, _ := filepath.Glob(filepath.Join(root, p)); len(matches) == 0 {
				problems = append(problems, fmt.Sprintf("%s:%d: `%s` does not exist in the repository; name a path that does", d.path, i+1, m[1]))
			}
		}
	}
	return problems
}

// ratioRE matches a range of ratios, and what precedes it.
var ratioRE = regexp.MustCompile(`(^|[^0-9.])(\d+(?:\.\d+)?[–-]\d+(?:\.\d+)?×)`)

// ratios returns the ranges of ratios of a line that are measurements:
// not targets (≥0.8–1×).
func ratios(line string) []string {
	var out []string
	text := prose(line)
	for _, m := range ratioRE.FindAllStringSubmatchIndex(text, -1) {
		before := strings.TrimRight(text[:m[4]], " ")
		if strings.HasSuffix(before, "≥") || strings.HasSuffix(before, "≤") || strings.HasSuffix(before, ">") ||
			strings.HasSuffix(before, "<") || strings.HasSuffix(before, "~") {
			continue
		}
		out = append(out, text[m[4]:m[5]])
	}
	return out
}

func isExempt(path string) bool { return slices.Contains(exempt, path) }

func checkRatios(d *doc, docs map[string]*doc, used map[string]bool) []string {
	if isExempt(d.path) {
		return nil
	}
	var problems []string
	for i, line := range d.lines {
		if d.inCode[i] {
			continue
		}
		for _, r := range ratios(line) {
			others := statedElsewhere(d.path, r, docs)
			if len(others) == 0 || linksToOneOf(d.path, line, others) || copiedFrom(d.path, r, others, docs) {
				continue
			}
			if k := d.path + ": " + r; known[k] != "" {
				used[k] = true
				continue
			}
			problems = append(problems, fmt.Sprintf("%s:%d: the measurement %s is also stated in %s: state it in one document, and where it is repeated link to that one on the same line",
				d.path, i+1, r, strings.Join(others, ", ")))
		}
	}
	return problems
}

// copiedFrom reports whether every document of others states r on a line
// that links to from: from is the home, the others quote it.
func copiedFrom(from, r string, others []string, docs map[string]*doc) bool {
	for _, o := range others {
		od := docs[o]
		quoted := false
		for i, line := range od.lines {
			if !od.inCode[i] && slices.Contains(ratios(line), r) && linksToOneOf(o, line, []string{from}) {
				quoted = true
			}
		}
		if !quoted {
			return false
		}
	}
	return true
}

// statedElsewhere returns the documents other than from and the record
// that state the ratio r.
func statedElsewhere(from, r string, docs map[string]*doc) []string {
	var out []string
	for path, d := range docs {
		if path == from || isExempt(path) {
			continue
		}
		for i, line := range d.lines {
			if !d.inCode[i] && slices.Contains(ratios(line), r) {
				out = append(out, path)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// linksToOneOf reports whether line, of the document from, links to one
// of the documents paths.
func linksToOneOf(from, line string, paths []string) bool {
	for _, m := range linkRE.FindAllStringSubmatch(prose(line), -1) {
		file, _, _ := strings.Cut(m[1], "#")
		if file == "" {
			continue
		}
		target := filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(from), file)))
		if slices.Contains(paths, target) {
			return true
		}
	}
	return false
}

// paragraphs returns the prose of d by paragraph (a table row is one),
// each with the number of its first line.
func paragraphs(d *doc) (texts []string, starts []int) {
	var cur []string
	start := 0
	flush := func() {
		if len(cur) > 0 {
			texts = append(texts, strings.Join(cur, " "))
			starts = append(starts, start)
		}
		cur = nil
	}
	for i, line := range d.lines {
		trimmed := strings.TrimSpace(line)
		switch {
		case d.inCode[i] || trimmed == "" || strings.HasPrefix(trimmed, "#"):
			flush()
		case strings.HasPrefix(trimmed, "|"), strings.HasPrefix(trimmed, "- "), strings.HasPrefix(trimmed, "* "):
			flush()
			cur, start = []string{prose(line)}, i+1
			if strings.HasPrefix(trimmed, "|") {
				flush()
			}
		default:
			if len(cur) == 0 {
				start = i + 1
			}
			cur = append(cur, prose(line))
		}
	}
	flush()
	return texts, starts
}

func checkFacts(d *doc, used map[string]bool) []string {
	if isExempt(d.path) {
		return nil
	}
	texts, starts := paragraphs(d)
	var problems []string
	for _, f := range facts {
		home, _, _ := strings.Cut(f.home, "#")
		if d.path == home {
			continue
		}
		for j, text := range texts {
			if !f.pattern.MatchString(text) {
				continue
			}
			if k := d.path + ": " + f.what; known[k] != "" {
				used[k] = true
				continue
			}
			problems = append(problems, fmt.Sprintf("%s:%d: states %s, which is stated once, in %s: link there instead", d.path, starts[j], f.what, f.home))
		}
	}
	return problems
}

func sortedKnown() []string {
	out := make([]string, 0, len(known))
	for k := range known {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

var (
	mkDocRE     = regexp.MustCompile(`((?:[A-Za-z0-9_.-]+/)*[A-Za-z0-9_.-]+\.md)(?:\s+"([^"]+)")?`)
	mkPathRE    = regexp.MustCompile(`(?:^|[\s(])(\.?[A-Za-z0-9_-]+(?:/[A-Za-z0-9_.-]+)+)`)
	mkCommentRE = regexp.MustCompile(`^\s*#`)
)

// checkMakefile checks the documents, sections and paths the Makefile's
// comments name.
func checkMakefile(root string, docs map[string]*doc) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	top := map[string]bool{}
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		top[e.Name()] = true
	}
	var problems []string
	for i, line := range strings.Split(string(b), "\n") {
		if !mkCommentRE.MatchString(line) {
			continue
		}
		for _, m := range mkDocRE.FindAllStringSubmatch(line, -1) {
			target := m[1]
			if _, err := os.Stat(filepath.Join(root, target)); err != nil {
				problems = append(problems, fmt.Sprintf("Makefile:%d: names %s, which does not exist", i+1, target))
				continue
			}
			if m[2] == "" {
				continue
			}
			td, ok := docs[target]
			if !ok {
				if td, err = readDoc(root, target); err != nil {
					return nil, err
				}
			}
			if !td.anchors[anchor(m[2])] {
				problems = append(problems, fmt.Sprintf("Makefile:%d: names the section %q of %s, which has no such heading; name one of its headings", i+1, m[2], target))
			}
		}
		for _, m := range mkPathRE.FindAllStringSubmatch(line, -1) {
			p := strings.TrimRight(m[1], ".,;:")
			first, _, _ := strings.Cut(p, "/")
			if !top[first] {
				continue
			}
			if _, err := os.Stat(filepath.Join(root, p)); err != nil {
				problems = append(problems, fmt.Sprintf("Makefile:%d: names %s, which does not exist", i+1, p))
			}
		}
	}
	return problems, nil
}

var releaseRE = regexp.MustCompile(`^## \[(\d+\.\d+\.\d+[^\]]*)\]`)

// checkReleases returns a problem for each release the CHANGELOG names
// that no git tag marks. Outside a git repository it checks nothing.
func checkReleases(root string, docs map[string]*doc) []string {
	d, ok := docs["CHANGELOG.md"]
	if !ok {
		return nil
	}
	out, err := exec.Command("git", "-C", root, "tag", "--list").Output()
	if err != nil {
		return nil
	}
	tags := strings.Fields(string(out))
	var problems []string
	for i, line := range d.lines {
		m := releaseRE.FindStringSubmatch(line)
		if m == nil || slices.Contains(tags, "v"+m[1]) {
			continue
		}
		problems = append(problems, fmt.Sprintf("CHANGELOG.md:%d: names the release %s, which no git tag (v%s) marks: keep its changes under [Unreleased] until the release is tagged", i+1, m[1], m[1]))
	}
	return problems
}

// listsExamples are the documents that list the example programs.
var listsExamples = []string{"README.md", "CONTRIBUTING.md"}

// checkExamplesListed returns a problem for each program under examples/
// a document of listsExamples does not name.
func checkExamplesListed(root string, docs map[string]*doc) []string {
	entries, err := os.ReadDir(filepath.Join(root, "examples"))
	if err != nil {
		return nil
	}
	var problems []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if files, _ := filepath.Glob(filepath.Join(root, "examples", e.Name(), "*.go")); len(files) == 0 {
			continue
		}
		for _, path := range listsExamples {
			d, ok := docs[path]
			if !ok {
				continue
			}
			named := regexp.MustCompile("(`|/)" + regexp.QuoteMeta(e.Name()) + "\\b")
			if !named.MatchString(strings.Join(d.lines, "\n")) {
				problems = append(problems, fmt.Sprintf("%s: does not name the example program examples/%s (as `%s`) with the others", path, e.Name(), e.Name()))
			}
		}
	}
	return problems
}
