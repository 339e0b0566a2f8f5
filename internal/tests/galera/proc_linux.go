package galera

import (
	"bytes"
	"os"
	"runtime"
	"strconv"
	"syscall"
)

// attr is how a node's process starts: as the runner's user; detached in a
// session of its own, or else in its own process group (a ^C to the
// launcher's terminal is the launcher's to handle) and killed when the
// launcher dies.
func (r *runner) attr(detached bool) *syscall.SysProcAttr {
	if detached {
		return &syscall.SysProcAttr{Credential: r.cred, Setsid: true}
	}
	return &syscall.SysProcAttr{Credential: r.cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// lockThread keeps the calling goroutine on its OS thread for good: the
// parent-death signal of a child follows the thread that started it.
func lockThread() { runtime.LockOSThread() }

// isNode reports whether process pid is node n's mariadbd (and not another
// process that got the pid after it ended).
func isNode(pid int, n *Node) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	return bytes.Contains(b, []byte("--defaults-file="+n.Config()+"\x00"))
}
