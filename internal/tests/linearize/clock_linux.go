package linearize

import (
	"syscall"
	"unsafe"
)

// now returns the time on the system-wide monotonic clock, in nanoseconds.
// Histories from several processes are merged by these times, so they must
// come from one clock that never steps: CLOCK_MONOTONIC is the same for
// every process on the machine. (The wall clock is not enough: on virtual
// machines it is stepped and slewed by milliseconds, and an operation's
// times on it can then contradict another process's.)
func now() int64 {
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 1 /* CLOCK_MONOTONIC */, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		panic("linearize: clock_gettime(CLOCK_MONOTONIC): " + errno.Error())
	}
	return ts.Nano()
}
