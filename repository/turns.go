package repository

import (
	"context"
	"sync"
)

// turns lets one Mutate or Upsert at a time work on a record, per
// repository. Concurrent optimistic writers of one record in the same
// process can only take turns at winning anyway: letting them all read and
// race wastes every losing attempt (on PostgreSQL a losing UPDATE even waits
// for the winner's commit before it fails). Queueing them in the process
// keeps the version guard for writers in other processes, and makes a hot
// record's throughput that of one writer after another.
//
// A record nobody else is working on costs one map entry and no channel:
// the channel that hands the turn on is made when a second caller waits.
type turns struct {
	mu sync.Mutex
	m  map[string]*turn
}

// turn is one record's queue. Its fields are guarded by turns.mu.
type turn struct {
	key     string
	waiters int           // the holder and the callers waiting for it
	next    chan struct{} // holds the turn while it passes to a waiter
}

// take waits for the turn on key, or for ctx to end. The caller gives the
// turn back with give.
func (t *turns) take(ctx context.Context, key string) (*turn, error) {
	t.mu.Lock()
	if t.m == nil {
		t.m = make(map[string]*turn)
	}
	tu := t.m[key]
	if tu == nil {
		tu = &turn{key: key, waiters: 1}
		t.m[key] = tu
		t.mu.Unlock()
		return tu, nil
	}
	tu.waiters++
	if tu.next == nil {
		tu.next = make(chan struct{}, 1)
	}
	next := tu.next
	t.mu.Unlock()
	select {
	case <-next:
		return tu, nil
	case <-ctx.Done():
		// If the turn was handed on meanwhile it stays in next for the
		// other waiters; with none left the entry goes, and the turn with it.
		t.leave(tu)
		return nil, ctx.Err()
	}
}

// give passes the turn to the next waiter, or frees the record. There is
// only ever one turn in next: it is sent only by the caller holding it.
func (t *turns) give(tu *turn) {
	t.mu.Lock()
	if t.leaveLocked(tu) {
		t.mu.Unlock()
		return
	}
	next := tu.next
	t.mu.Unlock()
	next <- struct{}{}
}

// leave removes a caller from tu's count.
func (t *turns) leave(tu *turn) {
	t.mu.Lock()
	t.leaveLocked(tu)
	t.mu.Unlock()
}

// leaveLocked removes a caller from tu's count and reports whether it was
// the last, whose leaving frees the record.
func (t *turns) leaveLocked(tu *turn) bool {
	tu.waiters--
	if tu.waiters > 0 {
		return false
	}
	delete(t.m, tu.key)
	return true
}

// size is the number of records with callers holding or waiting for a turn.
func (t *turns) size() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}
