package linearize

import (
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
)

// Tags of the effects in a pending multiset.
const (
	effectCreate    = 'c' // create the record with value v
	effectIncrement = 'i' // add v to the value
)

// entryLen is the length of one encoded entry of a pending multiset: the
// tag, the value and how many effects have them.
const entryLen = 13

// pending is the multiset of effects of unknown creates and increments that
// have not happened yet in a state and may still happen. It is encoded as a
// string, so that states stay comparable: one entry per distinct effect, in
// ascending order, each the tag, the value (big-endian with the sign bit
// flipped, so that byte order is numeric order) and the count (big-endian).
type pending string

// effectKey encodes the tag and value of an entry.
func effectKey(tag byte, v int64) string {
	var b [9]byte
	b[0] = tag
	binary.BigEndian.PutUint64(b[1:], uint64(v)^(1<<63))
	return string(b[:])
}

// encodeEntry encodes an entry.
func encodeEntry(k string, n uint32) string {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], n)
	return k + string(b[:])
}

// entries returns the number of distinct effects in p.
func (p pending) entries() int {
	return len(p) / entryLen
}

// at returns the i-th entry: its key, tag, value and count.
func (p pending) at(i int) (k string, tag byte, v int64, n uint32) {
	e := string(p[i*entryLen : (i+1)*entryLen])
	return e[:9], e[0], int64(binary.BigEndian.Uint64([]byte(e[1:9])) ^ (1 << 63)),
		binary.BigEndian.Uint32([]byte(e[9:]))
}

// search returns the index of the first entry whose key is >= k.
func (p pending) search(k string) int {
	return sort.Search(p.entries(), func(i int) bool { return string(p[i*entryLen:i*entryLen+9]) >= k })
}

// adjust returns p with the count of the effect tag, v changed by d, which
// must not make it negative.
func (p pending) adjust(tag byte, v int64, d int) pending {
	k := effectKey(tag, v)
	i := p.search(k)
	at, rest, n := i*entryLen, i*entryLen, d
	if i < p.entries() {
		if ik, _, _, in := p.at(i); ik == k {
			rest, n = at+entryLen, int(in)+d
		}
	}
	switch {
	case n < 0:
		panic(fmt.Sprintf("linearize: removing effect %c%d that is not pending", tag, v))
	case n == 0:
		return p[:at] + p[rest:]
	}
	return p[:at] + pending(encodeEntry(k, uint32(n))) + p[rest:]
}

// add returns p with one more effect tag, v.
func (p pending) add(tag byte, v int64) pending {
	return p.adjust(tag, v, 1)
}

// remove returns p with n effects tag, v fewer. They must be in p.
func (p pending) remove(tag byte, v int64, n int) pending {
	return p.adjust(tag, v, -n)
}

// union returns the multiset with each effect as many times as in p or q,
// whichever has more.
func (p pending) union(q pending) pending {
	if p == q || q == "" {
		return p
	}
	if p == "" {
		return q
	}
	var b strings.Builder
	b.Grow(max(len(p), len(q)))
	i, j := 0, 0
	for i < p.entries() && j < q.entries() {
		pk, _, _, pn := p.at(i)
		qk, _, _, qn := q.at(j)
		switch {
		case pk == qk:
			b.WriteString(encodeEntry(pk, max(pn, qn)))
			i, j = i+1, j+1
		case pk < qk:
			b.WriteString(encodeEntry(pk, pn))
			i++
		default:
			b.WriteString(encodeEntry(qk, qn))
			j++
		}
	}
	b.WriteString(string(p[i*entryLen:]))
	b.WriteString(string(q[j*entryLen:]))
	return pending(b.String())
}

// group is a value that n effects with the same tag have.
type group struct {
	v int64
	n int
}

// groups returns the distinct values of the effects tagged tag, ascending,
// with how many effects have each.
func (p pending) groups(tag byte) []group {
	var gs []group
	for i := range p.entries() {
		if _, t, v, n := p.at(i); t == tag {
			gs = append(gs, group{v, int(n)})
		}
	}
	return gs
}

// String lists the effects in p for the visualization.
func (p pending) String() string {
	parts := make([]string, 0, p.entries())
	for i := range p.entries() {
		_, t, v, n := p.at(i)
		part := fmt.Sprintf("increment(%+d)", v)
		if t == effectCreate {
			part = fmt.Sprintf("create(%d)", v)
		}
		if n > 1 {
			part = fmt.Sprintf("%d×%s", n, part)
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, ", ")
}
