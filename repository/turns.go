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
type turns struct {
	mu sync.Mutex
	m  map[string]*turn
}

type turn struct {
	token   chan struct{} // holds a value while a caller has the turn
	waiters int           // callers holding or waiting for it
}

// take waits for the turn on key, or for ctx to end. The returned function
// gives the turn back.
func (t *turns) take(ctx context.Context, key string) (func(), error) {
	t.mu.Lock()
	if t.m == nil {
		t.m = make(map[string]*turn)
	}
	tu := t.m[key]
	if tu == nil {
		tu = &turn{token: make(chan struct{}, 1)}
		t.m[key] = tu
	}
	tu.waiters++
	t.mu.Unlock()
	select {
	case tu.token <- struct{}{}:
		return func() {
			<-tu.token
			t.leave(key, tu)
		}, nil
	case <-ctx.Done():
		t.leave(key, tu)
		return nil, ctx.Err()
	}
}

func (t *turns) leave(key string, tu *turn) {
	t.mu.Lock()
	tu.waiters--
	if tu.waiters == 0 {
		delete(t.m, key)
	}
	t.mu.Unlock()
}

// size is the number of records with callers holding or waiting for a turn.
func (t *turns) size() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}
