package rest

import (
	"errors"
	"strconv"
	"strings"
)

// ETag returns the strong entity tag of a record at version: the version in
// double quotes, e.g. "3".
func ETag(version int64) string { return `"` + strconv.FormatInt(version, 10) + `"` }

// entityTag is one parsed entity-tag of an If-Match or If-None-Match field.
type entityTag struct {
	weak   bool
	opaque string // between the quotes
}

// condition is a parsed If-Match or If-None-Match: "*" or a list of tags.
type condition struct {
	present bool
	any     bool // "*"
	tags    []entityTag
}

var errBadETag = errors.New("malformed entity-tag list")

// parseCondition parses the field values of If-Match or If-None-Match
// (RFC 9110, section 13.1): "*" or a comma-separated list of entity-tags,
// each `"opaque"` or `W/"opaque"`, where opaque is any visible ASCII but
// the double quote (and obs-text). Several field lines are one list; empty
// list elements are allowed and ignored.
func parseCondition(values []string) (condition, error) {
	var c condition
	for _, v := range values {
		c.present = true
		s := strings.Trim(v, " \t")
		if s == "*" {
			c.any = true
			continue
		}
		for s != "" {
			s = strings.TrimLeft(s, " \t")
			if s == "" {
				break
			}
			if s[0] == ',' { // empty element
				s = s[1:]
				continue
			}
			var t entityTag
			if strings.HasPrefix(s, "W/") {
				t.weak = true
				s = s[2:]
			}
			if s == "" || s[0] != '"' {
				return condition{}, errBadETag
			}
			end := strings.IndexByte(s[1:], '"')
			if end < 0 {
				return condition{}, errBadETag
			}
			t.opaque = s[1 : 1+end]
			for i := 0; i < len(t.opaque); i++ {
				if b := t.opaque[i]; b != 0x21 && (b < 0x23 || b == 0x7f) {
					return condition{}, errBadETag
				}
			}
			c.tags = append(c.tags, t)
			s = strings.TrimLeft(s[2+end:], " \t")
			if s != "" {
				if s[0] != ',' {
					return condition{}, errBadETag
				}
				s = s[1:]
			}
		}
	}
	if c.any && len(c.tags) > 0 {
		return condition{}, errors.New(`"*" cannot be combined with entity-tags`)
	}
	return c, nil
}

// matchStrong reports whether the list names version with strong
// comparison (If-Match): weak tags never match.
func (c condition) matchStrong(version int64) bool {
	want := strconv.FormatInt(version, 10)
	for _, t := range c.tags {
		if !t.weak && t.opaque == want {
			return true
		}
	}
	return false
}

// matchWeak reports whether the list names version with weak comparison
// (If-None-Match): W/"3" matches "3".
func (c condition) matchWeak(version int64) bool {
	want := strconv.FormatInt(version, 10)
	for _, t := range c.tags {
		if t.opaque == want {
			return true
		}
	}
	return false
}
