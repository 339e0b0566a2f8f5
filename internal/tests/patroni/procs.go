//go:build linux

package patroni

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// proc is a process the cluster started itself (etcd, or a Patroni node):
// a child of the test process, in a process group of its own.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and been reaped
}

// running reports whether the process has not exited.
func (p *proc) running() bool {
	if p == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// pid returns the process id.
func (p *proc) pid() int { return p.cmd.Process.Pid }

// startProc starts path with args as cred (nil: as the test's own user), in
// dir, in a new process group, with stdout and stderr appended to logPath,
// and sent sig when the test process dies (PR_SET_PDEATHSIG: strictly, when
// the OS thread that started it exits, which Go does only for a goroutine
// that locked its thread; the cluster never starts one from such a
// goroutine).
func startProc(name, dir, logPath string, cred *syscall.Credential, sig syscall.Signal, env []string, path string, args ...string) (*proc, error) {
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	defer func() { _ = log.Close() }()
	cmd := exec.Command(path, args...)
	cmd.Env = env
	cmd.Dir = dir
	// A file, not a pipe: the postmaster Patroni starts inherits it and
	// outlives Patroni, and Wait would wait for a pipe's last writer.
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: sig, Credential: cred}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// kill sends SIGKILL to the process and its process group (the helpers it
// runs, pg_rewind or pg_basebackup, say) and waits, at most stopTimeout, for
// it to be reaped.
func (p *proc) kill() error {
	if !p.running() {
		return nil
	}
	_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
	_ = syscall.Kill(p.pid(), syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(stopTimeout):
		return fmt.Errorf("%s (pid %d) survived SIGKILL for %v", p.name, p.pid(), stopTimeout)
	}
}

// stop sends sig to the process and waits, at most stopTimeout, for it to
// exit; then it kills it.
func (p *proc) stop(sig syscall.Signal) error {
	if !p.running() {
		return nil
	}
	_ = syscall.Kill(p.pid(), sig)
	select {
	case <-p.done:
		return nil
	case <-time.After(stopTimeout):
	}
	return errors.Join(fmt.Errorf("%s (pid %d) did not exit within %v of %v", p.name, p.pid(), stopTimeout, sig), p.kill())
}

// procStat returns the parent and the state of process pid, from
// /proc/<pid>/stat.
func procStat(pid int) (ppid int, state byte, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %q", pid, b)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 || len(f[0]) != 1 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %q", pid, b)
	}
	ppid, err = strconv.Atoi(f[1])
	return ppid, f[0][0], err
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	_, state, err := procStat(pid)
	return err == nil && state != 'Z' && state != 'X'
}

// cmdline returns process pid's arguments, or nil when it is gone.
func cmdline(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// children returns the processes whose parent is pid.
func children(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var kids []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, _, err := procStat(child); err == nil && ppid == pid {
			kids = append(kids, child)
		}
	}
	return kids
}

// postmasterPID returns the pid of the postmaster running on dataDir: the
// first line of its postmaster.pid, checked against the process's own
// arguments (Patroni starts it as "postgres -D <dataDir> ..."), so a stale
// file whose pid was reused names no process. 0 means none runs.
func postmasterPID(dataDir string) int {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 || !alive(pid) {
		return 0
	}
	args := cmdline(pid)
	for i, a := range args {
		if (a == "-D" && i+1 < len(args) && args[i+1] == dataDir) || a == "-D"+dataDir {
			return pid
		}
	}
	return 0
}

// killTree kills a postmaster and its children at once, as a crash of the
// machine would: the postmaster is stopped first (SIGSTOP, so it forks no new
// child), its children are listed and stopped, then all get SIGKILL. It
// waits, at most stopTimeout, until they are gone.
func killTree(pid int) error {
	_ = syscall.Kill(pid, syscall.SIGSTOP)
	kids := children(pid)
	for _, k := range kids {
		_ = syscall.Kill(k, syscall.SIGSTOP)
	}
	all := append([]int{pid}, kids...)
	for _, p := range all {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	return waitGone(all, stopTimeout)
}

// quitPostmaster stops a postmaster at once, as pg_ctl stop -m immediate
// does (SIGQUIT: its children exit, and it removes its shared memory), and
// kills it and its children (killTree) when it has not exited within
// stopTimeout.
func quitPostmaster(pid int) error {
	kids := children(pid)
	_ = syscall.Kill(pid, syscall.SIGQUIT)
	if waitGone([]int{pid}, stopTimeout) == nil {
		// Children exit before their postmaster does; any left (a backend
		// reparented already) get SIGKILL.
		for _, k := range kids {
			if alive(k) {
				_ = syscall.Kill(k, syscall.SIGKILL)
			}
		}
		return waitGone(kids, stopTimeout)
	}
	return errors.Join(fmt.Errorf("postmaster %d did not exit within %v of SIGQUIT", pid, stopTimeout), killTree(pid))
}

// waitGone waits until every process in pids has exited (or is a zombie
// about to be reaped by its parent), at most limit.
func waitGone(pids []int, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	for {
		var left []int
		for _, p := range pids {
			if alive(p) {
				left = append(left, p)
			}
		}
		if len(left) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("processes %v still running after %v", left, limit)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// removeStaleShm removes the System V shared memory segment a killed
// postmaster of dataDir left behind (a clean shutdown removes it, and so does
// the next start of the same data directory; a killed node that is never
// restarted would leak it). The segment is named by the last line of the
// stale postmaster.pid, "key id", and removed only when it still has that key
// and nothing is attached.
func removeStaleShm(dataDir string) error {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return nil // a clean shutdown removed the file, and the segment
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) < 7 {
		return nil
	}
	f := strings.Fields(lines[6])
	if len(f) != 2 {
		return nil
	}
	key, err1 := strconv.ParseInt(f[0], 10, 64)
	id, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil {
		return nil
	}
	var desc unix.SysvShmDesc
	if _, err := unix.SysvShmCtl(id, unix.IPC_STAT, &desc); err != nil {
		return nil // gone already
	}
	if int64(desc.Perm.Key) != key || desc.Nattch != 0 {
		return nil // not ours any more, or still in use
	}
	if _, err := unix.SysvShmCtl(id, unix.IPC_RMID, nil); err != nil {
		return fmt.Errorf("remove shared memory segment %d (key %d) of %s: %w", id, key, dataDir, err)
	}
	return nil
}
