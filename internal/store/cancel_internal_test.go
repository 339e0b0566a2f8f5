package store

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gormlock/gormlock/locking"
)

// fakeAborter is a canceller whose cancel request fails (the server cannot
// be asked), so endOnServer must abort the socket itself; mocked because
// a real server cannot be made to refuse a cancel request on cue.
type fakeAborter struct {
	entered chan struct{} // closed when cancel is first called
	delay   time.Duration // cancel answers after this long
	aborted chan struct{} // closed by the first abort
	aborts  atomic.Int32
}

func newFakeAborter(delay time.Duration) *fakeAborter {
	return &fakeAborter{entered: make(chan struct{}), delay: delay, aborted: make(chan struct{})}
}

func (f *fakeAborter) cancel(context.Context) error {
	select {
	case <-f.entered:
	default:
		close(f.entered)
	}
	time.Sleep(f.delay)
	return errors.New("cancel request refused")
}

func (f *fakeAborter) gone(context.Context) error { return nil }
func (f *fakeAborter) canAbort() bool             { return true }

func (f *fakeAborter) abort() bool {
	if f.aborts.Add(1) == 1 {
		close(f.aborted)
	}
	return true
}

// A statement whose context ends and whose cancel request fails runs
// under a context that cannot end; its socket is aborted, which ends it,
// and the error says so (errSocketAborted in forced, the context's error
// in err).
func TestEndOnServerAbortsTheSocketOfARunningStatement(t *testing.T) {
	f := newFakeAborter(0)
	ctx, cancel := context.WithCancel(context.Background())
	sent, forced, err := endOnServer(ctx, f, false, func(sctx context.Context) error {
		if sctx.Done() != nil {
			t.Error("the statement's context can end: the drivers would watch it")
		}
		cancel()
		select {
		case <-f.aborted:
			return errors.New("read tcp: i/o timeout")
		case <-time.After(10 * time.Second):
			return errors.New("never aborted")
		}
	})
	if !sent {
		t.Error("sent = false, want true")
	}
	if !errors.Is(forced, errSocketAborted) {
		t.Errorf("forced = %v, want errSocketAborted", forced)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if n := f.aborts.Load(); n != 1 {
		t.Errorf("aborts = %d, want 1", n)
	}
}

// A statement that answered before the failed cancel request came back
// keeps its socket: aborting it then would fail the connection's next
// statement (a transaction's COMMIT) unsent. Nothing was forced: the
// statement's own answer is its outcome — a success, or the server's
// error, which says for certain that it was not applied.
func TestEndOnServerLeavesTheSocketOfAnEndedStatement(t *testing.T) {
	duplicate := &pgError{code: "23505"}
	for _, tc := range []struct {
		name   string
		answer error
	}{{"success", nil}, {"server error", duplicate}} {
		t.Run(tc.name, func(t *testing.T) {
			// The refused cancel answers 1 s after the statement did:
			// long past its end, even under -race on a loaded machine.
			f := newFakeAborter(time.Second)
			ctx, cancel := context.WithCancel(context.Background())
			sent, forced, err := endOnServer(ctx, f, false, func(context.Context) error {
				cancel()
				<-f.entered // the cancel request is on its way
				return tc.answer
			})
			if !sent {
				t.Error("sent = false, want true (the failed cancel may have reached the server)")
			}
			if forced != nil {
				t.Errorf("forced = %v, want nil (the socket was left alone)", forced)
			}
			if n := f.aborts.Load(); n != 0 {
				t.Errorf("aborts = %d, want 0", n)
			}
			if tc.answer == nil {
				if err != nil {
					t.Errorf("err = %v, want nil (the statement answered)", err)
				}
				return
			}
			if !errors.Is(err, duplicate) || !errors.Is(err, context.Canceled) {
				t.Errorf("err = %v, want the server's error and context.Canceled", err)
			}
			if !strings.Contains(err.Error(), "cancel request refused") {
				t.Errorf("err = %v, want the cancel request's failure named", err)
			}
			if got := locking.ClassifyWrite(err); errors.Is(got, locking.ErrCommitUnknown) {
				t.Errorf("ClassifyWrite(err) = %v, want a definite error (the server refused the statement)", got)
			}
		})
	}
}

// pgError is an error with a SQLSTATE, as pgconn.PgError reports it.
type pgError struct{ code string }

func (e *pgError) Error() string    { return "ERROR: duplicate key value (SQLSTATE " + e.code + ")" }
func (e *pgError) SQLState() string { return e.code }
