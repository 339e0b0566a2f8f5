package repository

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestTurns(t *testing.T) {
	var tu turns
	ctx := context.Background()
	held, err := tu.take(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}

	// Another key is free; the same key waits until the holder is done.
	other, err := tu.take(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	tu.give(other)

	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	_, err = tu.take(short, "a")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting ends with ctx: %v", err)
	}

	got := make(chan struct{})
	go func() {
		r, err := tu.take(ctx, "a")
		if err == nil {
			close(got)
			tu.give(r)
		}
	}()
	select {
	case <-got:
		t.Fatal("the second caller got the turn while the first held it")
	case <-time.After(20 * time.Millisecond):
	}
	tu.give(held)
	<-got
	eventually(t, func() bool { return tu.size() == 0 }, "no entry is left behind")

	// Many callers, one at a time.
	var mu sync.Mutex
	inside, most := 0, 0
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := tu.take(ctx, "hot")
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			inside++
			most = max(most, inside)
			mu.Unlock()
			time.Sleep(time.Millisecond)
			mu.Lock()
			inside--
			mu.Unlock()
			tu.give(r)
		}()
	}
	wg.Wait()
	if most != 1 || tu.size() != 0 {
		t.Fatalf("at most %d callers at once (want 1), %d entries left (want 0)", most, tu.size())
	}
}

// A waiter that gives up just as the turn is handed to it must neither keep
// the turn nor lose it: the next waiter gets it, or with none the record is
// free again.
func TestTurnsHandOffRacesCancellation(t *testing.T) {
	var tu turns
	ctx := context.Background()
	for i := range 500 {
		holder, err := tu.take(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		bctx, cancel := context.WithCancel(ctx)
		bDone := make(chan *turn, 1)
		go func() {
			b, _ := tu.take(bctx, "k")
			bDone <- b
		}()
		withC := i%2 == 0
		cDone := make(chan struct{})
		if withC {
			go func() {
				c, err := tu.take(ctx, "k")
				if err == nil {
					tu.give(c)
				}
				close(cDone)
			}()
		} else {
			close(cDone)
		}
		eventually(t, func() bool {
			tu.mu.Lock()
			defer tu.mu.Unlock()
			return tu.m["k"].waiters == 2+map[bool]int{true: 1}[withC]
		}, "the waiters queue")
		go cancel()
		tu.give(holder)
		if b := <-bDone; b != nil {
			tu.give(b)
		}
		select {
		case <-cDone:
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: the other waiter never got the turn", i)
		}
		short, stop := context.WithTimeout(ctx, time.Second)
		again, err := tu.take(short, "k")
		stop()
		if err != nil {
			t.Fatalf("round %d: the turn was lost: %v", i, err)
		}
		tu.give(again)
		if n := tu.size(); n != 0 {
			t.Fatalf("round %d: %d entries left", i, n)
		}
	}
}

// The same race, set up directly: the turn is in next for a waiter when a
// caller whose context is already done arrives. Whichever way its select
// goes, the turn must still be there for the waiter.
func TestTurnsCancelledCallerLeavesTheTurn(t *testing.T) {
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 200 {
		var tu turns
		next := make(chan struct{}, 1)
		next <- struct{}{} // handed on, not yet received by the one waiter
		tu.m = map[string]*turn{"k": {key: "k", waiters: 1, next: next}}
		got, err := tu.take(done, "k")
		if err == nil {
			// It took the turn: giving it back hands it on again.
			tu.give(got)
		}
		select {
		case <-next:
		default:
			t.Fatalf("round %d: the waiter's turn was lost", i)
		}
		if n := tu.size(); n != 1 {
			t.Fatalf("%d entries, want 1", n)
		}
	}
}

// eventually fails the test unless cond holds within a second.
func eventually(t *testing.T, cond func() bool, what string) {
	t.Helper()
	for end := time.Now().Add(time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("not within a second: %s", what)
		}
		time.Sleep(10 * time.Microsecond)
	}
}
