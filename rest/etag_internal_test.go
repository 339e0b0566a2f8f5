package rest

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseCondition(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want condition
		bad  bool
	}{
		{in: nil, want: condition{}},
		{in: []string{"*"}, want: condition{present: true, any: true}},
		{in: []string{` * `}, want: condition{present: true, any: true}},
		{in: []string{`"1"`}, want: condition{present: true, tags: []entityTag{{opaque: "1"}}}},
		{in: []string{`W/"1", "2"`, `"3"`}, want: condition{present: true, tags: []entityTag{{true, "1"}, {false, "2"}, {false, "3"}}}},
		{in: []string{`, "1" ,, `}, want: condition{present: true, tags: []entityTag{{opaque: "1"}}}},
		{in: []string{`""`}, want: condition{present: true, tags: []entityTag{{opaque: ""}}}},
		{in: []string{""}, want: condition{present: true}},
		{in: []string{`1`}, bad: true},
		{in: []string{`"1`}, bad: true},
		{in: []string{`"1" "2"`}, bad: true},
		{in: []string{`w/"1"`}, bad: true},
		{in: []string{`W/ "1"`}, bad: true},
		{in: []string{"\"a b\""}, bad: true},
		{in: []string{"\"a\x7f\""}, bad: true},
		{in: []string{`*`, `"1"`}, bad: true},
		{in: []string{`*, "1"`}, bad: true},
	} {
		got, err := parseCondition(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("%q: accepted, want an error", tc.in)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: got %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	c, _ := parseCondition([]string{`W/"3", "4"`})
	if c.matchStrong(3) || !c.matchWeak(3) || !c.matchStrong(4) || c.matchStrong(5) {
		t.Errorf(`W/"3", "4": strong 3 %v (want false), weak 3 %v (want true), strong 4 %v (want true), strong 5 %v (want false)`,
			c.matchStrong(3), c.matchWeak(3), c.matchStrong(4), c.matchStrong(5))
	}
}

// Parsing never panics, and what it accepts prints back to the same list.
func FuzzParseCondition(f *testing.F) {
	for _, s := range []string{`*`, `"1"`, `W/"1", "2"`, `,,`, `"a`, `W/`, "\"\x80\"", `"1",W/"2" , "3"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := parseCondition([]string{s})
		if err != nil || c.any {
			return
		}
		parts := make([]string, len(c.tags))
		for i, tag := range c.tags {
			if strings.Contains(tag.opaque, `"`) {
				t.Fatalf("opaque %q holds a quote", tag.opaque)
			}
			parts[i] = `"` + tag.opaque + `"`
			if tag.weak {
				parts[i] = "W/" + parts[i]
			}
		}
		again, err := parseCondition([]string{strings.Join(parts, ", ")})
		if err != nil {
			t.Fatalf("reprint of %q does not parse: %v", s, err)
		}
		if len(again.tags) != len(c.tags) {
			t.Fatalf("reprint of %q has %d tags, want %d", s, len(again.tags), len(c.tags))
		}
		for i := range c.tags {
			if again.tags[i] != c.tags[i] {
				t.Fatalf("reprint of %q: tag %d is %+v, want %+v", s, i, again.tags[i], c.tags[i])
			}
		}
	})
}
