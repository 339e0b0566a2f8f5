//go:build linux

package sqlitegate

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/gormlock/gormlock/locking"
)

// The turn queue's own rules, on a lock file without a database. Every
// openQueue is a process's view of the file: a descriptor of its own, so
// a slot of its own. Closing that descriptor is what the kernel does when
// the process dies: its slot lock goes (and its flock with it).

// hangGuard bounds a wait that the rule under test ends: reaching it
// means the rule does not hold (the queue would wait forever), never that
// something was slow.
const hangGuard = 30 * time.Second

func lockFile(t *testing.T) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "test.db-gormlock")
}

// view is one process's open file and queue.
type view struct {
	f *os.File
	q *turnQueue
}

func openQueue(t *testing.T, path string) *view {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	q := openTurnQueue(f)
	if q == nil {
		t.Fatal("no turn queue on a writable file on Linux")
	}
	return &view{f: f, q: q}
}

// die unmaps the view's queue and closes its descriptor, as the kernel
// does for a killed process: the file's locks go with the last of them.
func (v *view) die(t *testing.T) {
	t.Helper()
	v.q.maps.unmap()
	if err := v.f.Close(); err != nil {
		t.Fatal(err)
	}
}

// waitTurn runs q.wait(ticket) and sends the ticket it got the turn with.
func waitTurn(q *turnQueue, ticket uint32) <-chan uint32 {
	ch := make(chan uint32, 1)
	go func() { ch <- q.wait(ticket) }()
	return ch
}

func receive(t *testing.T, ch <-chan uint32, what string) uint32 {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(hangGuard):
		t.Fatalf("%s never came", what)
		return 0
	}
}

// Turns go in the order the tickets were taken, whatever process holds
// them, and a process that passes the turn on and queues again goes
// behind the processes that wait.
func TestTurnQueueServesTicketsInOrder(t *testing.T) {
	path := lockFile(t)
	a, b, c := openQueue(t, path), openQueue(t, path), openQueue(t, path)
	if a.q.slot == b.q.slot || b.q.slot == c.q.slot || a.q.slot == c.q.slot {
		t.Fatalf("views share a slot: %d, %d, %d", a.q.slot, b.q.slot, c.q.slot)
	}
	ta, ok := a.q.tryTake()
	if !ok {
		t.Fatal("the turn of an empty queue was not free")
	}
	if _, ok := b.q.tryTake(); ok {
		t.Fatal("tryTake got the turn while a held it")
	}
	tb, tc := b.q.take(), c.q.take()
	if got := a.q.queued(); got != 3 {
		t.Fatalf("queued = %d, want 3", got)
	}

	var order []string
	turn := make(chan string)
	for _, w := range []struct {
		name string
		q    *turnQueue
		t    uint32
	}{{"c", c.q, tc}, {"b", b.q, tb}} {
		go func() {
			got := w.q.wait(w.t)
			turn <- w.name
			w.q.pass(got)
		}()
	}
	a.q.pass(ta)
	ta2 := a.q.take() // a's next writer, behind b and c
	aDone := waitTurn(a.q, ta2)
	for range 2 {
		select {
		case name := <-turn:
			order = append(order, name)
		case <-time.After(hangGuard):
			t.Fatalf("after %v the turn never came", order)
		}
	}
	got := receive(t, aDone, "a's second turn")
	order = append(order, "a")
	if want := []string{"b", "c", "a"}; !equal(order, want) {
		t.Fatalf("turns went %v, want %v", order, want)
	}
	a.q.pass(got)
	if n := a.q.queued(); n != 0 {
		t.Fatalf("queued = %d after every turn, want 0", n)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A process that dies holding the turn, or waiting for it, is passed
// over: the next ticket's holder gets the turn.
func TestTurnQueuePassesOverDeadProcesses(t *testing.T) {
	t.Run("holding", func(t *testing.T) {
		path := lockFile(t)
		a, b := openQueue(t, path), openQueue(t, path)
		if _, ok := a.q.tryTake(); !ok {
			t.Fatal("the turn of an empty queue was not free")
		}
		tb := b.q.take()
		a.die(t)
		if got := receive(t, waitTurn(b.q, tb), "the turn after a dead holder"); got != tb {
			t.Fatalf("got the turn with ticket %d, want %d", got, tb)
		}
	})
	t.Run("waiting", func(t *testing.T) {
		path := lockFile(t)
		a, b, c := openQueue(t, path), openQueue(t, path), openQueue(t, path)
		ta, _ := a.q.tryTake()
		b.q.take()
		tc := c.q.take()
		b.die(t)
		a.q.pass(ta) // to b's ticket, whose holder is dead
		if got := receive(t, waitTurn(c.q, tc), "the turn after a dead waiter"); got != tc {
			t.Fatalf("got the turn with ticket %d, want %d", got, tc)
		}
	})
	t.Run("slot taken again", func(t *testing.T) {
		// The dead holder's slot has a new, live owner: the ticket is
		// still the dead one's.
		path := lockFile(t)
		a, b := openQueue(t, path), openQueue(t, path)
		if _, ok := a.q.tryTake(); !ok {
			t.Fatal("the turn of an empty queue was not free")
		}
		tb := b.q.take()
		a.die(t)
		heir := openQueue(t, path)
		if heir.q.slot != a.q.slot {
			t.Fatalf("the new view took slot %d, not the dead one's %d", heir.q.slot, a.q.slot)
		}
		if got := receive(t, waitTurn(b.q, tb), "the turn after a dead holder whose slot was taken again"); got != tb {
			t.Fatalf("got the turn with ticket %d, want %d", got, tb)
		}
	})
	t.Run("ticket without a slot", func(t *testing.T) {
		// Killed between taking the ticket and writing its slot.
		path := lockFile(t)
		a, b := openQueue(t, path), openQueue(t, path)
		a.q.next.Add(1)
		tb := b.q.take()
		if got := receive(t, waitTurn(b.q, tb), "the turn after a ticket nobody wrote a slot for"); got != tb {
			t.Fatalf("got the turn with ticket %d, want %d", got, tb)
		}
	})
}

// A live holder is never passed over, however long it holds the turn:
// the waiter's own bound ends its wait.
func TestTurnQueueWaitsForALiveHolder(t *testing.T) {
	path := lockFile(t)
	a, b := openQueue(t, path), openQueue(t, path)
	ta, _ := a.q.tryTake()
	tb := b.q.take()
	got, served := b.q.waitUntil(context.Background(), tb, time.Now().Add(4*queueCheck))
	if served || got != tb {
		t.Fatalf("waitUntil = %d, %v while the holder lives; want %d, false", got, served, tb)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got, served = b.q.waitUntil(ctx, tb, time.Time{}); served || got != tb {
		t.Fatalf("waitUntil with an ended context = %d, %v; want %d, false", got, served, tb)
	}
	if h := b.q.holder(ta); h != holderAlive {
		t.Fatalf("holder of the live ticket = %d, want alive", h)
	}
	a.q.pass(ta)
	if got := receive(t, waitTurn(b.q, tb), "the turn"); got != tb {
		t.Fatalf("got the turn with ticket %d, want %d", got, tb)
	}
}

// A holder passed over while it was slow (here: it took its ticket and
// had not written its slot) finds out, and queues again.
func TestTurnQueuePassedOverHolderQueuesAgain(t *testing.T) {
	path := lockFile(t)
	a, b := openQueue(t, path), openQueue(t, path)
	slow := a.q.next.Add(1) - 1
	tb := b.q.take()
	got := receive(t, waitTurn(b.q, tb), "b's turn")
	retake := waitTurn(a.q, slow)
	b.q.pass(got)
	ta := receive(t, retake, "the passed-over holder's turn")
	if ta == slow {
		t.Fatalf("the passed-over ticket %d was served", slow)
	}
	a.q.pass(ta)
	if n := a.q.queued(); n != 0 {
		t.Fatalf("queued = %d after every turn, want 0", n)
	}
}

// A file whose first pages hold something else, or that cannot be
// written, has no queue: the lock file is locked with flock alone.
func TestTurnQueueOnlyOnItsOwnLayout(t *testing.T) {
	path := lockFile(t)
	if err := os.WriteFile(path, make([]byte, queueBytes), 0o666); err != nil {
		t.Fatal(err)
	}
	v := openQueue(t, path)
	(*atomic.Uint64)(unsafe.Pointer(&v.q.mem[0])).Store(queueMagic + 1) // a later layout
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if q := openTurnQueue(f); q != nil {
		t.Fatal("a queue on a file of another layout")
	}
	if _, err := QueuedTurns(path[:len(path)-len("-gormlock")]); err == nil {
		t.Fatal("QueuedTurns read a file of another layout")
	}

	for _, size := range []int{0, queueBytes} {
		path := filepath.Join(t.TempDir(), "ro.db-gormlock")
		if err := os.WriteFile(path, make([]byte, size), 0o666); err != nil {
			t.Fatal(err)
		}
		ro, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer ro.Close()
		if q := openTurnQueue(ro); q != nil {
			t.Fatalf("a queue on a file of %d bytes opened read-only", size)
		}
	}
}

// A writer whose bound ends while it waits for the turn gets the bound's
// error; its ticket is passed on when its turn comes, so the processes
// behind it are not held up, and the next writer of its process waits for
// the same ticket rather than a new one.
func TestCrossLockLeavesAnAbandonedTicketBehind(t *testing.T) {
	path := lockFile(t)
	holder := openQueue(t, path)
	l := openCrossLockFile(path)
	if l == nil || l.q == nil {
		t.Fatal("no cross lock with a queue")
	}
	th, _ := holder.q.tryTake()

	err := l.lock(context.Background(), false, true, time.Now().Add(2*queueCheck))
	var de *locking.DatabaseError
	if !errors.As(err, &de) || de.Kind != locking.ErrLockTimeout {
		t.Fatalf("lock under a timeout = %v, want ErrLockTimeout", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.lock(ctx, false, false, time.Now().Add(time.Hour)); !errors.Is(err, context.Canceled) {
		t.Fatalf("lock with an ended context = %v, want context.Canceled", err)
	}
	if err := l.lock(context.Background(), true, false, time.Now().Add(time.Hour)); !errors.As(err, &de) || de.Kind != locking.ErrLocked {
		t.Fatalf("lock with nowait = %v, want ErrLocked", err)
	}
	if n := holder.q.queued(); n != 2 {
		t.Fatalf("queued = %d, want 2: the holder and the abandoned ticket", n)
	}

	// Behind the abandoned ticket, another process.
	other := openQueue(t, path)
	to := other.q.take()
	holder.q.pass(th)
	if got := receive(t, waitTurn(other.q, to), "the turn behind the abandoned ticket"); got != to {
		t.Fatalf("got the turn with ticket %d, want %d", got, to)
	}
	// This process's next writer queues behind it again.
	done := make(chan error, 1)
	go func() { done <- l.lock(context.Background(), false, false, time.Now().Add(hangGuard)) }()
	other.q.pass(to)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(hangGuard):
		t.Fatal("the next writer never got the lock")
	}
	l.unlock()
	if n := holder.q.queued(); n != 0 {
		t.Fatalf("queued = %d after every turn, want 0", n)
	}
}
