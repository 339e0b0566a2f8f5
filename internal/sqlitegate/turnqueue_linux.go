//go:build linux

package sqlitegate

import (
	"context"
	"errors"
	"math"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// The processes' queue for the lock file, on Linux.
//
// flock serves its waiters in no order: when a process lets the lock go,
// the kernel wakes the other processes' waiters, but the releasing process
// is still running and its next writer takes the lock again before they
// are scheduled, so processes hold it in streaks and a writer of another
// process waits out whole streaks. On Linux the lock file's first pages
// therefore hold a ticket queue that every process maps (mmap, MAP_SHARED):
//
//   - the writer at the head of a process's gate takes the next ticket (an
//     atomic add on the shared page) and sleeps on a futex word of its
//     ticket until the ticket served is its own, then takes the flock,
//     which is free by then (it still excludes writers that take only the
//     flock: an older gormlock sharing the file);
//   - the writer done lets the flock go and serves the next ticket, waking
//     its holder and nobody else. Its own process's next writer takes a
//     new ticket, behind the ones other processes hold: the heads of the
//     processes' gates take turns first come, first served.
//
// A process killed while it holds a ticket cannot pass it on, so each
// process owns a slot, marked by an OFD byte-range lock on the lock file
// that the kernel lets go with the process, and writes its slot (and the
// slot's generation, advanced by every new owner) next to each ticket it
// takes. A waiter that has seen the same ticket served for queueCheck
// looks at that ticket's holder: when its slot lock is gone or the slot
// has a newer owner, the holder is dead and the waiter serves the next
// ticket in its place. A ticket whose holder wrote no slot (killed between
// taking it and writing its slot, or descheduled there) is passed over
// once it has been served for twice queueCheck; a live holder that finds
// its ticket passed over takes a new one. Passing a live holder over costs
// order, never exclusion: the flock still excludes. Waits for a live
// holder end only as they do today: with the waiter's bound (NoWait,
// LockTimeout, the busy timeout) or its context.

// queueCheck is how long a waiter lets the served ticket stand before it
// looks whether its holder is alive. A dead process holds the queue up
// for two of them at most (three when it had not written its slot), plus
// the time the waiter takes to be scheduled.
const queueCheck = 5 * time.Millisecond

// The shared pages' layout: the magic word (which names the layout), the
// ticket counters on cache lines of their own, a ring of ticket records
// (ticket<<32 | (slot+1)<<16 | generation), a ring of futex words (the
// waiters of ticket t sleep on wake[t%ringLen]), and the slots'
// generations. Slot i's lock is byte slotLockBase+i of the file, past the
// mapped pages.
const (
	queueMagic   = 0x676d6c6b_00000001 // "gmlk", layout 1
	offNext      = 64
	offServing   = 128
	offRing      = 256
	ringLen      = 256
	offWake      = offRing + 8*ringLen
	offGen       = 4096
	slotCount    = 1024
	queueBytes   = offGen + 4*slotCount
	slotLockBase = queueBytes
)

// The OFD lock commands, the same on every Linux architecture.
const (
	fOFDGetLk = 36
	fOFDSetLk = 37
)

// turnQueue is one process's view of a lock file's ticket queue.
type turnQueue struct {
	fd   int
	mem  []byte
	maps *mapping // mem's, unmapped when the queue is collected
	slot uint32   // the slot this process owns
	// ident is the slot and its generation as ticket records hold them.
	ident uint64

	next    *atomic.Uint32 // the next ticket to hand out
	serving *atomic.Uint32 // the ticket whose turn it is
}

func (q *turnQueue) record(t uint32) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&q.mem[offRing+8*(t%ringLen)]))
}

func (q *turnQueue) wake(t uint32) *atomic.Uint32 {
	return (*atomic.Uint32)(unsafe.Pointer(&q.mem[offWake+4*(t%ringLen)]))
}

func (q *turnQueue) gen(slot uint32) *atomic.Uint32 {
	return (*atomic.Uint32)(unsafe.Pointer(&q.mem[offGen+4*slot]))
}

// openTurnQueue maps f's queue, creating it in a new (or empty) file, and
// takes a slot in it. It returns nil where there is none to use: a file
// gormlock may not write, one of another layout, a kernel without OFD
// locks, or every slot taken; the lock file is then locked with flock
// alone.
func openTurnQueue(f *os.File) *turnQueue {
	fi, err := f.Stat()
	if err != nil {
		return nil
	}
	if fi.Size() < queueBytes {
		if f.Truncate(queueBytes) != nil {
			return nil
		}
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, queueBytes, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil
	}
	q := &turnQueue{fd: int(f.Fd()), mem: mem}
	q.next = (*atomic.Uint32)(unsafe.Pointer(&mem[offNext]))
	q.serving = (*atomic.Uint32)(unsafe.Pointer(&mem[offServing]))
	magic := (*atomic.Uint64)(unsafe.Pointer(&mem[0]))
	if !magic.CompareAndSwap(0, queueMagic) && magic.Load() != queueMagic {
		_ = syscall.Munmap(mem)
		return nil
	}
	q.maps = &mapping{mem: mem}
	runtime.AddCleanup(q, (*mapping).unmap, q.maps)
	for i := range uint32(slotCount) {
		ok, err := ofdTryLock(q.fd, slotLockBase+int64(i))
		if err != nil {
			break // no OFD locks here
		}
		if ok {
			q.slot = i
			g := q.gen(i).Add(1)
			q.ident = uint64(i+1)<<16 | uint64(g&0xffff)
			return q
		}
	}
	return nil
}

// mapping is a queue's mapped pages.
type mapping struct {
	mu  sync.Mutex
	mem []byte
}

// unmap unmaps the pages, once.
func (m *mapping) unmap() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mem != nil {
		_ = syscall.Munmap(m.mem)
		m.mem = nil
	}
}

// take takes the next ticket.
func (q *turnQueue) take() uint32 {
	t := q.next.Add(1) - 1
	q.record(t).Store(uint64(t)<<32 | q.ident)
	return t
}

// tryTake takes a ticket only if it is served at once: nobody holds the
// turn or waits for it.
func (q *turnQueue) tryTake() (uint32, bool) {
	s := q.serving.Load()
	if !q.next.CompareAndSwap(s, s+1) {
		return 0, false
	}
	q.record(s).Store(uint64(s)<<32 | q.ident)
	return s, true
}

// wait blocks until ticket t is served and returns the ticket the turn was
// taken with: t, or a later one when t was passed over.
func (q *turnQueue) wait(t uint32) uint32 {
	t, _ = q.waitUntil(context.Background(), t, time.Time{})
	return t
}

// waitUntil is wait that gives up at deadline (never, when zero) or when
// ctx ends. It reports whether the turn came, and returns the ticket held
// either way.
func (q *turnQueue) waitUntil(ctx context.Context, t uint32, deadline time.Time) (uint32, bool) {
	// held is the ticket the end of ctx wakes the waiter of: t, or the
	// one taken when t was passed over.
	var held atomic.Uint32
	held.Store(t)
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, func() { q.wakeTicket(held.Load()) })
		defer stop()
	}
	var stuck uint32    // the served ticket
	var since time.Time // when this waiter first saw stuck served
	for {
		w := q.wake(t).Load()
		s := q.serving.Load()
		if s == t {
			return t, true
		}
		if int32(s-t) > 0 {
			t = q.take() // passed over: queue again
			held.Store(t)
			continue
		}
		if ctx.Err() != nil {
			return t, false
		}
		now := time.Now()
		if s != stuck || since.IsZero() {
			stuck, since = s, now
		} else if stalled := now.Sub(since); stalled >= queueCheck {
			switch q.holder(s) {
			case holderDead:
				q.skip(s)
				continue
			case holderUnknown:
				if stalled >= 2*queueCheck {
					q.skip(s)
					continue
				}
			}
		}
		d := queueCheck
		if !deadline.IsZero() {
			if d = min(d, deadline.Sub(now)); d <= 0 {
				return t, false
			}
		}
		futexWait(q.wake(t), w, d)
	}
}

type holderState int

const (
	holderAlive holderState = iota
	holderDead
	holderUnknown // no slot written for the ticket
)

// holder says whether the process holding ticket s is alive.
func (q *turnQueue) holder(s uint32) holderState {
	rec := q.record(s).Load()
	id := rec >> 16 & 0xffff
	if uint32(rec>>32) != s || id == 0 {
		return holderUnknown
	}
	slot := uint32(id - 1)
	switch {
	case slot >= slotCount || q.gen(slot).Load()&0xffff != uint32(rec&0xffff):
		return holderDead // the slot's owner since is not the holder
	case slot == q.slot:
		return holderAlive
	}
	held, err := ofdHeld(q.fd, slotLockBase+int64(slot))
	if err != nil || !held {
		return holderDead
	}
	return holderAlive
}

// skip serves the ticket after s in place of s's dead holder.
func (q *turnQueue) skip(s uint32) {
	if q.serving.CompareAndSwap(s, s+1) {
		q.wakeTicket(s + 1)
	}
}

// pass ends ticket t's turn and serves the next ticket.
func (q *turnQueue) pass(t uint32) {
	if q.serving.CompareAndSwap(t, t+1) && q.next.Load() != t+1 {
		q.wakeTicket(t + 1)
	}
}

func (q *turnQueue) wakeTicket(t uint32) {
	w := q.wake(t)
	w.Add(1)
	futexWake(w)
}

// queued returns the tickets taken and not yet passed on: the holder's
// and the waiters'.
func (q *turnQueue) queued() int { return int(q.next.Load() - q.serving.Load()) }

const (
	futexWaitOp = 0 // FUTEX_WAIT, shared: the word is in a file mapping
	futexWakeOp = 1 // FUTEX_WAKE
)

// futexWait sleeps while *w holds val, for at most d, or until a wake or
// a signal.
func futexWait(w *atomic.Uint32, val uint32, d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	_, _, _ = syscall.Syscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWaitOp, uintptr(val),
		uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// futexWake wakes every sleeper on w.
func futexWake(w *atomic.Uint32) {
	_, _, _ = syscall.Syscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(w)), futexWakeOp, math.MaxInt32, 0, 0, 0)
}

// ofdTryLock takes an OFD write lock on byte off of the file, if free. The
// lock is the open file's: the kernel lets it go when the file is closed,
// which a process's death does.
func ofdTryLock(fd int, off int64) (bool, error) {
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: 0, Start: off, Len: 1}
	for {
		err := syscall.FcntlFlock(uintptr(fd), fOFDSetLk, &lk)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EACCES):
			return false, nil
		}
		return false, err
	}
}

// ofdHeld reports whether another open file holds a lock on byte off.
func ofdHeld(fd int, off int64) (bool, error) {
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: 0, Start: off, Len: 1}
	for {
		err := syscall.FcntlFlock(uintptr(fd), fOFDGetLk, &lk)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return false, err
		}
		return lk.Type != syscall.F_UNLCK, nil
	}
}

// QueuedTurns returns how many turns are taken and not yet passed on in the
// queue of the SQLite file at dbPath: the holder's, if any, and the
// waiters'. Tests use it to see that a writer of another process waits.
func QueuedTurns(dbPath string) (int, error) {
	q, done, err := readQueue(dbPath)
	if err != nil {
		return 0, err
	}
	defer done()
	return q.queued(), nil
}

// TurnsTaken returns how many turns were ever taken in the queue of the
// SQLite file at dbPath (modulo 2^32). Tests use it to see which writers
// queued and which took the lock file with flock alone.
func TurnsTaken(dbPath string) (uint32, error) {
	q, done, err := readQueue(dbPath)
	if err != nil {
		return 0, err
	}
	defer done()
	return q.next.Load(), nil
}

// readQueue maps the queue of the SQLite file at dbPath for reading; done
// unmaps it.
func readQueue(dbPath string) (_ *turnQueue, done func(), _ error) {
	f, err := os.Open(dbPath + "-gormlock")
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || fi.Size() < queueBytes {
		return nil, nil, errors.New("sqlitegate: " + f.Name() + " holds no turn queue")
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, queueBytes, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	done = func() { _ = syscall.Munmap(mem) }
	if (*atomic.Uint64)(unsafe.Pointer(&mem[0])).Load() != queueMagic {
		done()
		return nil, nil, errors.New("sqlitegate: " + f.Name() + " holds no turn queue")
	}
	q := &turnQueue{next: (*atomic.Uint32)(unsafe.Pointer(&mem[offNext])), serving: (*atomic.Uint32)(unsafe.Pointer(&mem[offServing]))}
	return q, done, nil
}
