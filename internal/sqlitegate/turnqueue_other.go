//go:build !linux

package sqlitegate

import (
	"context"
	"errors"
	"os"
	"time"
)

// turnQueue is the processes' ticket queue for the lock file, which needs
// futexes and OFD locks: on this platform the lock file is locked with
// flock alone.
type turnQueue struct{}

func openTurnQueue(*os.File) *turnQueue { return nil }

func (*turnQueue) take() uint32            { return 0 }
func (*turnQueue) tryTake() (uint32, bool) { return 0, false }
func (*turnQueue) wait(t uint32) uint32    { return t }
func (*turnQueue) pass(uint32)             {}
func (*turnQueue) queued() int             { return 0 }

func (*turnQueue) waitUntil(_ context.Context, t uint32, _ time.Time) (uint32, bool) {
	return t, false
}

// QueuedTurns returns how many turns are taken and not yet passed on in the
// queue of the SQLite file at dbPath; this platform has no queue.
func QueuedTurns(string) (int, error) { return 0, errors.ErrUnsupported }

// TurnsTaken returns how many turns were ever taken in the queue of the
// SQLite file at dbPath; this platform has no queue.
func TurnsTaken(string) (uint32, error) { return 0, errors.ErrUnsupported }
