// Package textedit applies the text edits of the analyzer's suggested
// fixes to a file: the command's -fix and the tests' golden files share it.
package textedit

import (
	"go/format"
	"go/token"
	"slices"

	"golang.org/x/tools/go/analysis"
)

// Edit replaces the bytes [Start, End) of a file with New.
type Edit struct {
	File       string
	Start, End int
	New        []byte
}

// Of returns the edits of the first suggested fix of each diagnostic.
func Of(fset *token.FileSet, diags []analysis.Diagnostic) []Edit {
	var out []Edit
	for _, d := range diags {
		if len(d.SuggestedFixes) == 0 {
			continue
		}
		for _, e := range d.SuggestedFixes[0].TextEdits {
			tf := fset.File(e.Pos)
			end := e.End
			if !end.IsValid() {
				end = e.Pos
			}
			out = append(out, Edit{File: tf.Name(), Start: tf.Offset(e.Pos), End: tf.Offset(end), New: e.NewText})
		}
	}
	return out
}

// ByFile groups edits by their file.
func ByFile(edits []Edit) map[string][]Edit {
	out := map[string][]Edit{}
	for _, e := range edits {
		out[e.File] = append(out[e.File], e)
	}
	return out
}

// Apply returns src with the edits applied, formatted as gofmt formats it
// (as it is when it does not parse). An edit out of src's bounds, or that
// overlaps one applied (the same finding seen in a package and in its
// test variant), is skipped.
func Apply(src []byte, edits []Edit) []byte {
	edits = slices.Clone(edits)
	slices.SortStableFunc(edits, func(a, b Edit) int { return b.Start - a.Start })
	out := slices.Clone(src)
	limit := len(src) + 1
	for _, e := range edits {
		if e.Start < 0 || e.End < e.Start || e.End > len(src) || e.End > limit {
			continue
		}
		out = slices.Concat(out[:e.Start], e.New, out[e.End:])
		limit = e.Start
	}
	if formatted, err := format.Source(out); err == nil {
		return formatted
	}
	return out
}
