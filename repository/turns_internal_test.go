package repository

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestTurns(t *testing.T) {
	var tu turns
	ctx := context.Background()
	release, err := tu.take(ctx, "a")
	require.NoError(t, err)

	// Another key is free; the same key waits until the holder is done.
	other, err := tu.take(ctx, "b")
	require.NoError(t, err)
	other()

	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	_, err = tu.take(short, "a")
	require.True(t, errors.Is(err, context.DeadlineExceeded), "waiting ends with ctx: %v", err)

	got := make(chan struct{})
	go func() {
		r, err := tu.take(ctx, "a")
		if err == nil {
			close(got)
			r()
		}
	}()
	select {
	case <-got:
		t.Fatal("the second caller got the turn while the first held it")
	case <-time.After(20 * time.Millisecond):
	}
	release()
	<-got
	require.Eventually(t, func() bool { return tu.size() == 0 }, time.Second, time.Millisecond, "no entry is left behind")

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
			r()
		}()
	}
	wg.Wait()
	require.Equal(t, 1, most)
	require.Zero(t, tu.size())
}
