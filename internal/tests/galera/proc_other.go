//go:build unix && !linux

package galera

import (
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// attr is how a node's process starts: as the runner's user, detached in a
// session of its own or in its own process group. Only Linux can have the
// nodes killed when the launcher dies; elsewhere Main's Stop, or the next
// launch's sweep, ends them.
func (r *runner) attr(detached bool) *syscall.SysProcAttr {
	if detached {
		return &syscall.SysProcAttr{Credential: r.cred, Setsid: true}
	}
	return &syscall.SysProcAttr{Credential: r.cred, Setpgid: true}
}

// lockThread does nothing where there is no parent-death signal.
func lockThread() {}

// isNode reports whether process pid is node n's mariadbd.
func isNode(pid int, n *Node) bool {
	out, err := exec.Command("ps", "-o", "command=", "-p", strconv.Itoa(pid)).Output()
	return err == nil && strings.Contains(string(out), "--defaults-file="+n.Config())
}
