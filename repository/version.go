package repository

import (
	"math"
	"sync/atomic"
	"time"
)

// Versions.
//
// A version must never name two different states of a record — not after
// the record is deleted and created again under the same key, not after a
// database failover that lost the last writes, not in an HTTP ETag. Counting
// from 1 breaks all three: a re-created record starts at 1 again, and a copy
// (or an ETag) read from the old record passes the new record's guard.
//
// So a version is a hybrid logical clock reading, as Couchbase's CAS is:
// every write (Create included) sets the version to
//
//	max(previous version + 1, now in microseconds since the Unix epoch)
//
// where "now" is the database's clock on PostgreSQL, MySQL and MariaDB
// (dialect.Caps.NextVersion: one clock for every writer, read by the
// guarded statement itself, which returns the version it set), and on
// SQLite this process's clock, read once the write holds the database's
// write lock, that never repeats within the process (nextVersion below:
// two writes in the same microsecond get consecutive numbers). Versions
// still only grow per record, and a guarded write stays one statement with
// no extra round trip. A record created again after a delete starts above
// every version its earlier incarnation had, because those were all issued
// before the delete; and the writes a failover lost are not re-issued,
// because the writes after it carry later times.
//
// What this asks of the deployment: that clock (on SQLite, the clocks of
// the processes writing the file) does not go back by more than the time
// between deleting a key and creating it again (NTP keeps them to
// milliseconds). A version is about 1.8e15 today:
// it needs a 64-bit column and fits a JSON number exactly (below 2^53) until
// the year 2255.

// versionClock is the last "now" handed out, in microseconds.
var versionClock atomic.Int64

// nextVersion returns the version a write of a record now at version prev
// gives it (prev is 0 for a new record). ok is false when prev is so large
// that no larger version exists.
func nextVersion(prev int64) (v int64, ok bool) {
	if prev >= math.MaxInt64-1 {
		return 0, false
	}
	for {
		last := versionClock.Load()
		now := max(time.Now().UnixMicro(), last+1)
		if versionClock.CompareAndSwap(last, now) {
			return max(now, prev+1), true
		}
	}
}
