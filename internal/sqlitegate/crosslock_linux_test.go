//go:build linux

package sqlitegate

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/gormlock/gormlock/locking"
)

// The cross-process lock between real processes: this test binary started
// again (TestCrossLockChild), each child with a lock file descriptor,
// queue slot and mapping of its own, killed with SIGKILL where the test
// says so.

// The child's environment.
const (
	lockChildModeEnv = "GORMLOCK_SQLITEGATE_CHILD" // the child's mode; unset in the parent
	lockChildPathEnv = "GORMLOCK_SQLITEGATE_PATH"  // the lock file
	lockChildNEnv    = "GORMLOCK_SQLITEGATE_N"     // increments, in the count modes
)

// The child's modes: take the lock and hold it until killed; wait for it
// (queue) and take it; or increment a counter in the file next to the
// lock file n times, read and written back, under the lock or (the
// negative control) without it.
const (
	childHold      = "hold"
	childQueue     = "queue"
	childCount     = "count"
	childUnguarded = "count-unguarded"
)

// countGap widens the read-write window of an increment, so that the
// negative control's lost increments do not depend on the machine's timing.
const countGap = 200 * time.Microsecond

func TestCrossLockChild(t *testing.T) {
	mode := os.Getenv(lockChildModeEnv)
	if mode == "" {
		t.Skip("a child process of the cross-process lock tests; runs only when they start it")
	}
	time.AfterFunc(2*hangGuard, func() {
		fmt.Fprintln(os.Stderr, "sqlitegate child: lifetime over")
		os.Exit(5)
	})
	if err := runLockChild(mode); err != nil {
		fmt.Fprintf(os.Stderr, "sqlitegate child %s: %v\n", mode, err)
		os.Exit(3)
	}
	os.Exit(0)
}

func runLockChild(mode string) error {
	path := os.Getenv(lockChildPathEnv)
	l := openCrossLockFile(path)
	if l == nil || l.q == nil {
		return errors.New("no cross lock with a queue")
	}
	stdin := bufio.NewReader(os.Stdin)
	fmt.Println("ready")
	if _, err := stdin.ReadString('\n'); err != nil {
		return fmt.Errorf("waiting for the start: %w", err)
	}
	go func() { // stdin's end (the parent is gone) ends the child
		_, _ = io.Copy(io.Discard, stdin)
		os.Exit(4)
	}()
	far := time.Now().Add(hangGuard)
	switch mode {
	case childHold:
		if err := l.lock(context.Background(), false, false, far); err != nil {
			return err
		}
		fmt.Println("holding")
		select {} // until killed
	case childQueue:
		if err := l.lock(context.Background(), false, false, far); err != nil {
			return err
		}
		l.unlock()
		fmt.Println("done")
		select {} // until killed or stdin ends
	}
	n, err := strconv.Atoi(os.Getenv(lockChildNEnv))
	if err != nil {
		return err
	}
	counter, err := os.OpenFile(path+"-counter", os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer counter.Close()
	guarded := mode == childCount
	for range n {
		if guarded {
			if err := l.lock(context.Background(), false, false, time.Now().Add(hangGuard)); err != nil {
				return err
			}
		}
		v, err := readCounter(counter)
		if err == nil {
			time.Sleep(countGap)
			err = writeCounter(counter, v+1)
		}
		if guarded {
			l.unlock()
		}
		if err != nil {
			return err
		}
	}
	fmt.Println("done")
	select {} // until stdin ends
}

func readCounter(f *os.File) (uint64, error) {
	var b [8]byte
	if _, err := f.ReadAt(b[:], 0); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

func writeCounter(f *os.File, v uint64) error {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	_, err := f.WriteAt(b[:], 0)
	return err
}

// lockChild is a running child process.
type lockChild struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

func startLockChild(t *testing.T, mode, path string, n int) *lockChild {
	t.Helper()
	ch := &lockChild{lines: make(chan string, 16)}
	ch.cmd = exec.Command(os.Args[0], "-test.run=^TestCrossLockChild$", "-test.count=1")
	ch.cmd.Env = append(os.Environ(), lockChildModeEnv+"="+mode, lockChildPathEnv+"="+path,
		lockChildNEnv+"="+strconv.Itoa(n))
	ch.cmd.Stderr = os.Stderr
	stdout, err := ch.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if ch.stdin, err = ch.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := ch.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if ch.cmd.ProcessState == nil {
			_ = ch.cmd.Process.Kill()
			_ = ch.cmd.Wait()
		}
	})
	go func() {
		defer close(ch.lines)
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			ch.lines <- s.Text()
		}
	}()
	ch.expect(t, "ready")
	return ch
}

// expect waits for the child to print want, skipping the test framework's
// lines.
func (ch *lockChild) expect(t *testing.T, want string) {
	t.Helper()
	timeout := time.After(hangGuard)
	for {
		select {
		case line, ok := <-ch.lines:
			if !ok {
				t.Fatalf("the child ended before saying %q", want)
			}
			if line == want {
				return
			}
		case <-timeout:
			t.Fatalf("the child never said %q", want)
		}
	}
}

func (ch *lockChild) start(t *testing.T) {
	t.Helper()
	if _, err := io.WriteString(ch.stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
}

// kill kills the child with SIGKILL and waits until it is gone, its
// descriptors closed and its mappings undone.
func (ch *lockChild) kill(t *testing.T) {
	t.Helper()
	if err := ch.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := ch.cmd.Wait(); err == nil || err.Error() != "signal: killed" {
		t.Fatalf("the killed child ended with %v", err)
	}
}

// finish waits for the child to say done, then ends it through its stdin.
func (ch *lockChild) finish(t *testing.T) {
	t.Helper()
	ch.expect(t, "done")
	if err := ch.stdin.Close(); err != nil {
		t.Fatal(err)
	}
	var ee *exec.ExitError
	if err := ch.cmd.Wait(); !errors.As(err, &ee) || ee.ExitCode() != 4 {
		t.Fatalf("the child ended with %v, want exit status 4", err)
	}
}

// requireQueued waits until n turns are taken on the queue of the lock
// file at path: a wait that has begun, seen from outside.
func requireQueued(t *testing.T, path string, n int) {
	t.Helper()
	dbPath := path[:len(path)-len("-gormlock")]
	var got int
	var err error
	for deadline := time.Now().Add(hangGuard); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if got, err = QueuedTurns(dbPath); err == nil && got == n {
			return
		}
	}
	t.Fatalf("queued turns: %d (%v), want %d", got, err, n)
}

// Four processes that increment one counter under the lock lose no
// increment; the same processes without it do.
func TestCrossLockExcludesProcesses(t *testing.T) {
	const procs, per = 4, 150
	run := func(t *testing.T, mode string) (uint64, string) {
		path := lockFile(t)
		counter, err := os.Create(path + "-counter")
		if err != nil {
			t.Fatal(err)
		}
		defer counter.Close()
		if err := writeCounter(counter, 0); err != nil {
			t.Fatal(err)
		}
		var children []*lockChild
		for range procs {
			children = append(children, startLockChild(t, mode, path, per))
		}
		for _, ch := range children {
			ch.start(t)
		}
		for _, ch := range children {
			ch.finish(t)
		}
		got, err := readCounter(counter)
		if err != nil {
			t.Fatal(err)
		}
		return got, path
	}
	t.Run("locked", func(t *testing.T) {
		got, path := run(t, childCount)
		if got != procs*per {
			t.Fatalf("counter = %d, want %d", got, procs*per)
		}
		requireQueued(t, path, 0) // every turn was passed on
	})
	t.Run("unguarded", func(t *testing.T) {
		if got, _ := run(t, childUnguarded); got >= procs*per {
			t.Fatalf("counter = %d without the lock: the test could not see a lost increment", got)
		}
	})
}

// A process killed while it holds the lock, or while it waits for it,
// holds nobody up: its flock goes with it, and its ticket is passed over.
func TestCrossLockPassesOverKilledProcesses(t *testing.T) {
	t.Run("holding", func(t *testing.T) {
		path := lockFile(t)
		holder := startLockChild(t, childHold, path, 0)
		holder.start(t)
		holder.expect(t, "holding")
		requireQueued(t, path, 1)

		l := openCrossLockFile(path)
		done := make(chan error, 1)
		go func() { done <- l.lock(context.Background(), false, false, time.Now().Add(hangGuard)) }()
		requireQueued(t, path, 2)
		holder.kill(t)
		if err := receiveErr(t, done, "the lock after a killed holder"); err != nil {
			t.Fatal(err)
		}
		l.unlock()
		requireQueued(t, path, 0)
	})
	t.Run("waiting", func(t *testing.T) {
		path := lockFile(t)
		l := openCrossLockFile(path)
		if err := l.lock(context.Background(), true, false, time.Time{}); err != nil {
			t.Fatal(err)
		}
		waiter := startLockChild(t, childQueue, path, 0)
		waiter.start(t)
		requireQueued(t, path, 2)
		behind := openCrossLockFile(path)
		done := make(chan error, 1)
		go func() { done <- behind.lock(context.Background(), false, false, time.Now().Add(hangGuard)) }()
		requireQueued(t, path, 3)
		waiter.kill(t)
		l.unlock() // to the killed waiter's ticket
		if err := receiveErr(t, done, "the lock after a killed waiter"); err != nil {
			t.Fatal(err)
		}
		behind.unlock()
		requireQueued(t, path, 0)
	})
}

func receiveErr(t *testing.T, ch <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(hangGuard):
		t.Fatalf("%s never came", what)
		return nil
	}
}

// A writer whose context ends while it is queued gets the context's error,
// and the queue stays whole: the ticket it leaves behind is served and
// passed on, and the lock is free afterwards.
func TestCrossLockCancelledWhileQueued(t *testing.T) {
	path := lockFile(t)
	holder := openQueue(t, path)
	th, ok := holder.q.tryTake()
	if !ok {
		t.Fatal("the turn of an empty queue was not free")
	}
	l := openCrossLockFile(path)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.lock(ctx, false, false, time.Now().Add(hangGuard)) }()
	requireQueued(t, path, 2)
	cancel()
	if err := receiveErr(t, done, "the cancelled wait's end"); !errors.Is(err, context.Canceled) {
		t.Fatalf("lock with a context cancelled while queued = %v, want context.Canceled", err)
	}
	if n := holder.q.queued(); n != 2 {
		t.Fatalf("queued = %d, want 2: the holder and the ticket left behind", n)
	}
	holder.q.pass(th)
	requireQueued(t, path, 0)
	if _, ok := holder.q.tryTake(); !ok {
		t.Fatal("the turn was not free after the ticket left behind was served")
	}
}

// The locks of two database files are apart: a writer of one file does
// not wait for the holder of the other's, in one process.
func TestCrossLocksOfTwoFilesAreApart(t *testing.T) {
	dir := t.TempDir()
	pathA, pathB := filepath.Join(dir, "a.db-gormlock"), filepath.Join(dir, "b.db-gormlock")
	a, b := openCrossLockFile(pathA), openCrossLockFile(pathB)
	otherA := openCrossLockFile(pathA) // another client of file a
	if err := otherA.lock(context.Background(), true, false, time.Time{}); err != nil {
		t.Fatal(err)
	}
	var de *locking.DatabaseError
	if err := a.lock(context.Background(), true, false, time.Time{}); !errors.As(err, &de) || de.Kind != locking.ErrLocked {
		t.Fatalf("lock of the held file with nowait = %v, want ErrLocked", err)
	}
	if err := b.lock(context.Background(), true, false, time.Time{}); err != nil {
		t.Fatalf("lock of the other file with nowait = %v, want it free", err)
	}
	requireQueued(t, pathA, 1)
	requireQueued(t, pathB, 1)
	b.unlock()
	otherA.unlock()
	if err := a.lock(context.Background(), true, false, time.Time{}); err != nil {
		t.Fatalf("lock of the file let go = %v", err)
	}
	a.unlock()
	requireQueued(t, pathA, 0)
	requireQueued(t, pathB, 0)
}

// Without a queue (a side file gormlock may not write, another platform)
// the lock is the flock alone: it excludes, a bounded wait ends with the
// bound's error, and the next writer of the process takes over the flock
// call the wait left behind.
func TestCrossLockWithoutAQueue(t *testing.T) {
	path := lockFile(t)
	flockOnly := func() *crossLock {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Close() })
		return &crossLock{f: f, fd: int(f.Fd())}
	}
	a, b := flockOnly(), flockOnly()
	if err := a.lock(context.Background(), true, false, time.Time{}); err != nil {
		t.Fatal(err)
	}
	var de *locking.DatabaseError
	if err := b.lock(context.Background(), true, false, time.Time{}); !errors.As(err, &de) || de.Kind != locking.ErrLocked {
		t.Fatalf("lock with nowait while another holds it = %v, want ErrLocked", err)
	}
	if err := b.lock(context.Background(), false, true, time.Now().Add(2*queueCheck)); !errors.As(err, &de) || de.Kind != locking.ErrLockTimeout {
		t.Fatalf("lock under a timeout while another holds it = %v, want ErrLockTimeout", err)
	}
	done := make(chan error, 1)
	go func() { done <- b.lock(context.Background(), false, false, time.Now().Add(hangGuard)) }()
	a.unlock()
	if err := receiveErr(t, done, "the lock after the holder let it go"); err != nil {
		t.Fatal(err)
	}
	if err := a.lock(context.Background(), true, false, time.Time{}); !errors.As(err, &de) || de.Kind != locking.ErrLocked {
		t.Fatalf("lock with nowait while the waiter holds it = %v, want ErrLocked", err)
	}
	b.unlock()
	if err := a.lock(context.Background(), true, false, time.Time{}); err != nil {
		t.Fatalf("lock of the free file = %v", err)
	}
	a.unlock()
}

// SetTurnQueue(false), which the benchmark's flock-only baseline uses,
// opens side files without the queue: the file is not even given the
// queue's pages, and the flock still excludes writers that do queue. On
// again, the next side file opened has its queue (the control).
func TestSetTurnQueueOffLocksWithFlockAlone(t *testing.T) {
	path := lockFile(t)
	SetTurnQueue(false)
	t.Cleanup(func() { SetTurnQueue(true) })
	off := openCrossLockFile(path)
	if off == nil {
		t.Fatal("no side file")
	}
	t.Cleanup(func() { _ = off.f.Close() })
	if off.q != nil {
		t.Fatal("a side file opened with the turn queue off has a queue")
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != 0 {
		t.Fatalf("side file opened with the turn queue off: %v, %v; want it empty", fi, err)
	}
	SetTurnQueue(true)
	on := openCrossLockFile(path)
	if on == nil || on.q == nil {
		t.Fatal("a side file opened with the turn queue on (the default) has no queue")
	}
	t.Cleanup(func() { _ = on.f.Close() })
	if err := off.lock(context.Background(), true, false, time.Time{}); err != nil {
		t.Fatal(err)
	}
	var de *locking.DatabaseError
	if err := on.lock(context.Background(), true, false, time.Time{}); !errors.As(err, &de) || de.Kind != locking.ErrLocked {
		t.Fatalf("queued lock with nowait while a flock-only writer holds the file = %v, want ErrLocked", err)
	}
	off.unlock()
	if err := on.lock(context.Background(), true, false, time.Time{}); err != nil {
		t.Fatalf("queued lock of the free file = %v", err)
	}
	if err := off.lock(context.Background(), true, false, time.Time{}); !errors.As(err, &de) || de.Kind != locking.ErrLocked {
		t.Fatalf("flock-only lock with nowait while a queued writer holds the file = %v, want ErrLocked", err)
	}
	on.unlock()
}

// A writer that leaves while nobody of its process waits keeps the
// cross-process lock for crossLinger, for a writer of its process that may
// come. The linger of that next writer is its own: the end of an earlier
// linger does not let the lock go (with a timer per linger, the earlier
// write's timer, firing between two later writes, ended the process's turn
// early), and the end of the last one does, serving the other process.
func TestCrossLockLingerEndsOnlyWithTheLastOne(t *testing.T) {
	g, other, ticket := lingeringGate(t)
	first := g.keptUntil
	if !g.kept || first.IsZero() {
		t.Fatalf("after a write with another process waiting: kept=%v until %v, want the lock kept for crossLinger", g.kept, first)
	}
	crossed, err := g.enter(context.Background(), Wait{})
	if err != nil || !crossed {
		t.Fatalf("the next writer's enter = %v, %v; want the kept lock", crossed, err)
	}
	time.Sleep(time.Millisecond) // its linger ends later than the first one's
	g.leave(crossed)
	if !g.kept || !g.keptUntil.After(first) {
		t.Fatalf("after the second write: kept=%v until %v, want kept past %v", g.kept, g.keptUntil, first)
	}

	g.dropKept(first) // the first linger's end
	if !g.kept || other.q.serving.Load() == ticket {
		t.Fatal("the end of the first writer's linger let the lock go while the second writer's lasted")
	}
	if ok, err := tryFlock(int(other.f.Fd())); ok || err != nil {
		t.Fatalf("flock of another open file = %v, %v; want it held", ok, err)
	}
	g.dropKept(g.keptUntil) // the second one's
	if g.kept || other.q.serving.Load() != ticket {
		t.Fatalf("after the last linger's end: kept=%v, serving %d, want the lock let go and ticket %d served", g.kept, other.q.serving.Load(), ticket)
	}
	requireLetGo(t, other, ticket)
}

// A lock kept for a writer that waited is let go when that writer stops
// waiting, also when it stops while a linger's timer holds the turn: its
// giveUp leaves the lock to the turn's holder, and the timer's dropKept,
// finding nobody waiting, lets it go (it kept it, and the other processes
// waited until this one wrote again).
func TestCrossLockKeptForAWaiterThatStopsWhileTheTimerHoldsTheTurn(t *testing.T) {
	g, other, ticket := lingeringGate(t) // the first writer lingers: the timer is armed
	g.turn <- struct{}{}                 // the second writer inherits the lock
	if !g.inherit(false) {
		t.Fatal("the second writer did not inherit the kept lock")
	}
	g.mu.Lock()
	g.waiting++ // a third writer waits
	g.mu.Unlock()
	g.leave(true) // the second leaves, keeping the lock for the third
	if !g.kept || !g.keptUntil.IsZero() {
		t.Fatalf("kept=%v until %v; want kept for the waiter", g.kept, g.keptUntil)
	}
	now := time.Now()
	g.turn <- struct{}{} // the first linger's timer fires and takes the turn,
	g.giveUp()           // the third writer's context ends meanwhile,
	<-g.turn
	g.dropKept(now) // and the timer goes on
	if g.kept || other.q.serving.Load() != ticket {
		t.Fatalf("kept=%v, serving %d: the lock stayed kept with nobody to take or let it go (want ticket %d served)", g.kept, other.q.serving.Load(), ticket)
	}
	requireLetGo(t, other, ticket)
}

// A run of the linger's timer that finds the linger not over yet sets the
// timer for its end: runs of the timer's function can overlap, and a later
// run that found the turn held by an earlier one has returned, so without
// it the lock stayed kept with no timer left to let it go.
func TestCrossLockLingerTimerRunTooEarlySetsItAgain(t *testing.T) {
	g, other, ticket := lingeringGate(t) // lingers, its timer set for an hour
	until := time.Now().Add(50 * time.Millisecond)
	g.mu.Lock()
	g.keptUntil = until // the linger ends sooner than its timer
	g.mu.Unlock()
	g.dropKept(time.Time{}) // a run from before: the linger is not over
	g.mu.Lock()
	kept := g.kept
	g.mu.Unlock()
	if !kept && time.Now().Before(until) {
		t.Fatal("a timer run before the linger's end let the lock go")
	}
	deadline := time.Now().Add(hangGuard)
	for other.q.serving.Load() != ticket {
		if time.Now().After(deadline) {
			t.Fatalf("the lock was still kept %v after the linger's end: no timer left to let it go", hangGuard)
		}
		time.Sleep(5 * time.Millisecond)
	}
	g.mu.Lock()
	kept = g.kept
	g.mu.Unlock()
	if kept {
		t.Fatal("the other process was served while the lock was still kept")
	}
	other.q.pass(ticket)
}

// lingeringGate returns a gate whose process holds the lock file while
// another process (other, with ticket) waits for it, and whose first
// writer has just left: the lock is kept for crossLinger, which the test
// makes an hour, so that no timer fires unless the test says so. The turn
// began now and does not reach crossBatch while the test runs, however
// slow the machine.
func lingeringGate(t *testing.T) (g *sqliteGate, other *view, ticket uint32) {
	t.Helper()
	old := crossLinger
	crossLinger = time.Hour
	t.Cleanup(func() { crossLinger = old })
	path := lockFile(t)
	g = &sqliteGate{turn: make(chan struct{}, 1), cross: openCrossLockFile(path), crossOpened: true}
	if g.cross == nil || g.cross.q == nil {
		t.Fatal("no lock file with a queue on Linux")
	}
	if err := g.cross.lock(context.Background(), true, false, time.Time{}); err != nil {
		t.Fatal(err)
	}
	other = openQueue(t, path)
	ticket = other.q.take()
	g.turn <- struct{}{}
	g.crossSince = time.Now().Add(time.Hour)
	g.leave(true)
	t.Cleanup(func() { g.keptTimer.Stop() })
	return g, other, ticket
}

// requireLetGo checks that the lock file's flock is free for other, and
// ends other's turn (ticket), which the gate passed on.
func requireLetGo(t *testing.T, other *view, ticket uint32) {
	t.Helper()
	if ok, err := tryFlock(int(other.f.Fd())); !ok || err != nil {
		t.Fatalf("flock of another open file after the lock was let go = %v, %v; want it free", ok, err)
	}
	unFlock(int(other.f.Fd()))
	other.q.pass(ticket)
}
