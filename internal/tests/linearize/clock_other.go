//go:build !linux

package linearize

import "time"

// now returns the wall-clock time in nanoseconds: outside Linux there is no
// system-wide monotonic clock to read, so histories merged from several
// processes are only as consistent as the wall clock.
func now() int64 { return time.Now().UnixNano() }
