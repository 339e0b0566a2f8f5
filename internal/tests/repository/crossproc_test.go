//go:build linux

package repository_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	sqliteopen "github.com/gormlock/gormlock/opendb/sqlite"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/sqlitegate"
	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/locking"
	"github.com/gormlock/gormlock/repository"
)

// Writers of one SQLite file in several processes queue for their turn on
// the lock file, first come first served (internal/sqlitegate), and a
// process killed with SIGKILL while it holds its turn or waits for it holds
// nobody up. The processes here are real ones (this test binary started
// again, runCrossProcChild) or, where only the order matters, clients of
// the file in this process, each with a pool, gate and queue slot of its
// own, as a process has.

// The child's environment.
const (
	crossModeEnv = "GORMLOCK_CROSSPROC_CHILD" // the child's mode; unset in the parent
	crossPathEnv = "GORMLOCK_CROSSPROC_PATH"  // the SQLite file
	crossIDEnv   = "GORMLOCK_CROSSPROC_ID"    // the account
	crossNEnv    = "GORMLOCK_CROSSPROC_N"     // increments, in the inc-* modes
)

// The child's modes: hold the turn (a MutateRowLocked whose fn never
// returns); wait for it (a MutateRowLocked while the parent holds it);
// increment the account n times through one of gormlock's writes, or
// unguarded (read, write back: the negative control).
const (
	crossHold      = "hold"
	crossWait      = "wait"
	crossMutate    = "inc-mutate"
	crossLocked    = "inc-locked"
	crossApply     = "inc-apply"
	crossUnguarded = "inc-unguarded"
)

const (
	// crossHangGuard bounds waits that the behaviour under test ends:
	// reaching it is a failure (a turn that never came), not slowness.
	crossHangGuard = time.Minute
	// unguardedGap widens the negative control's read-write window, so
	// that its lost updates do not depend on the machine's timing.
	unguardedGap = time.Millisecond
)

func TestSQLiteCrossProcessChild(t *testing.T) {
	mode := os.Getenv(crossModeEnv)
	if mode == "" {
		t.Skip("a child process of the cross-process tests; runs only when they start it")
	}
	time.AfterFunc(2*crossHangGuard, func() {
		fmt.Fprintln(os.Stderr, "cross-process child: lifetime over")
		os.Exit(5)
	})
	if err := runCrossProcChild(mode); err != nil {
		fmt.Fprintf(os.Stderr, "cross-process child %s: %v\n", mode, err)
		os.Exit(3)
	}
	os.Exit(0)
}

func runCrossProcChild(mode string) error {
	id, err := strconv.ParseInt(os.Getenv(crossIDEnv), 10, 64)
	if err != nil {
		return err
	}
	db, err := sqliteopen.Open(os.Getenv(crossPathEnv))
	if err != nil {
		return err
	}
	accounts, err := repository.New[fixtures.Account](db)
	if err != nil {
		return err
	}
	ctx := context.Background()
	stdin := bufio.NewReader(os.Stdin)
	say := func(line string) { fmt.Println(line) }
	say("ready")
	// The start barrier, then stdin's end (the parent is gone) ends the
	// child.
	if _, err := stdin.ReadString('\n'); err != nil {
		return fmt.Errorf("waiting for the start: %w", err)
	}
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		os.Exit(4)
	}()
	inc := func(a *fixtures.Account) error { a.Balance++; return nil }
	switch mode {
	case crossHold:
		_, err := accounts.MutateRowLocked(ctx, id, func(a *fixtures.Account) error {
			a.Owner += "h"
			say("holding")
			select {} // until killed
		})
		return err
	case crossWait:
		_, err := accounts.MutateRowLocked(ctx, id, func(a *fixtures.Account) error { a.Owner += "w"; return nil })
		return err
	}
	n, err := strconv.Atoi(os.Getenv(crossNEnv))
	if err != nil {
		return err
	}
	for range n {
		switch mode {
		case crossMutate:
			_, err = accounts.Mutate(ctx, id, inc)
		case crossLocked:
			_, err = accounts.MutateRowLocked(ctx, id, inc)
		case crossApply:
			_, err = accounts.Apply(ctx, id, []repository.Change{repository.Add("Balance", 1)})
		case crossUnguarded:
			var balance int64
			if err = db.Raw("SELECT balance FROM accounts WHERE id = ?", id).Scan(&balance).Error; err == nil {
				time.Sleep(unguardedGap)
				err = db.Exec("UPDATE accounts SET balance = ? WHERE id = ?", balance+1, id).Error
			}
		default:
			return fmt.Errorf("unknown mode %q", mode)
		}
		if err != nil {
			return err
		}
	}
	say("done")
	return nil
}

// crossChild is a running child process.
type crossChild struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

func startCrossChild(t *testing.T, mode, path string, id int64, n int) *crossChild {
	t.Helper()
	ch := &crossChild{lines: make(chan string, 16)}
	ch.cmd = exec.Command(os.Args[0], "-test.run=^TestSQLiteCrossProcessChild$", "-test.count=1")
	ch.cmd.Env = append(os.Environ(), crossModeEnv+"="+mode, crossPathEnv+"="+path,
		crossIDEnv+"="+strconv.FormatInt(id, 10), crossNEnv+"="+strconv.Itoa(n))
	ch.cmd.Stderr = os.Stderr
	stdout, err := ch.cmd.StdoutPipe()
	require.NoError(t, err)
	ch.stdin, err = ch.cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, ch.cmd.Start())
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
func (ch *crossChild) expect(t *testing.T, want string) {
	t.Helper()
	timeout := time.After(crossHangGuard)
	for {
		select {
		case line, ok := <-ch.lines:
			require.True(t, ok, "the child ended before saying %q", want)
			if line == want {
				return
			}
		case <-timeout:
			t.Fatalf("the child never said %q", want)
		}
	}
}

func (ch *crossChild) start(t *testing.T) {
	t.Helper()
	_, err := io.WriteString(ch.stdin, "go\n")
	require.NoError(t, err)
}

// kill kills the child with SIGKILL and waits until it is gone, its files
// closed and its mappings undone.
func (ch *crossChild) kill(t *testing.T) {
	t.Helper()
	require.NoError(t, ch.cmd.Process.Kill())
	err := ch.cmd.Wait()
	require.Error(t, err, "the child was killed")
	require.Equal(t, "signal: killed", err.Error())
}

// finish waits for the child to say done and exit.
func (ch *crossChild) finish(t *testing.T) {
	t.Helper()
	ch.expect(t, "done")
	require.NoError(t, ch.stdin.Close())
	err := ch.cmd.Wait()
	var ee *exec.ExitError
	if err != nil {
		require.ErrorAs(t, err, &ee)
	}
	require.True(t, err == nil || ee.ExitCode() == 4, "the child exited with %v", err)
}

// requireQueued waits until n turns are taken on path's queue: a writer's
// wait that has begun, seen from outside.
func requireQueued(t *testing.T, path string, n int) {
	t.Helper()
	var got int
	var err error
	deadline := time.Now().Add(crossHangGuard)
	for time.Now().Before(deadline) {
		if got, err = sqlitegate.QueuedTurns(path); err == nil && got == n {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("queued turns on %s: %d (%v), want %d", path, got, err, n)
}

func crossDB(t *testing.T) (string, *gorm.DB, *repository.Repository[fixtures.Account], *fixtures.Account) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "procs.db")
	db := testdb.OpenSQLiteFile(t, path)
	accounts, _ := repos(t, db)
	a := newAccount(t, accounts, "x", 0)
	// The first write opens this client's lock file and queue.
	_, err := accounts.Apply(testdb.Ctx(t), a.ID, []repository.Change{repository.Add("Balance", 0)})
	require.NoError(t, err)
	got, err := accounts.Get(testdb.Ctx(t), a.ID)
	require.NoError(t, err)
	return path, db, accounts, got
}

func accountNow(t *testing.T, accounts *repository.Repository[fixtures.Account], id int64) *fixtures.Account {
	t.Helper()
	got, err := accounts.Get(testdb.Ctx(t), id)
	require.NoError(t, err)
	return got
}

// A process killed while it holds its turn (in a transaction, between
// BEGIN IMMEDIATE and COMMIT) holds up nobody: the writer queued behind it
// gets the turn, the killed transaction is rolled back, and the queue is
// empty afterwards. Without the check for dead holders the writer would
// wait out the busy timeout and fail with ErrLocked.
func TestSQLiteKilledTurnHolderHoldsNobodyUp(t *testing.T) {
	path, _, accounts, a := crossDB(t)
	child := startCrossChild(t, crossHold, path, a.ID, 0)
	child.start(t)
	child.expect(t, "holding")
	requireQueued(t, path, 1)

	done := make(chan error, 1)
	go func() {
		_, err := accounts.MutateRowLocked(testdb.Ctx(t), a.ID, func(b *fixtures.Account) error { b.Balance++; return nil })
		done <- err
	}()
	requireQueued(t, path, 2)
	child.kill(t)
	require.NoError(t, <-done, "the write queued behind a killed process")

	got := accountNow(t, accounts, a.ID)
	require.Equal(t, int64(1), got.Balance)
	require.Equal(t, "x", got.Owner, "the killed process's transaction was rolled back")
	n, err := sqlitegate.QueuedTurns(path)
	require.NoError(t, err)
	require.Equal(t, 0, n)
}

// A process killed while it waits for its turn holds up nobody either:
// when its turn comes, the writer behind it gets it.
func TestSQLiteKilledTurnWaiterHoldsNobodyUp(t *testing.T) {
	path, _, accounts, a := crossDB(t)
	db2 := testdb.OpenSQLiteFile(t, path)
	accounts2, _ := repos(t, db2)

	release := make(chan struct{})
	held := make(chan struct{})
	holder := make(chan error, 1)
	go func() {
		_, err := accounts.MutateRowLocked(testdb.Ctx(t), a.ID, func(b *fixtures.Account) error {
			b.Balance++
			b.Owner += "A"
			close(held)
			<-release
			return nil
		})
		holder <- err
	}()
	<-held
	requireQueued(t, path, 1)
	child := startCrossChild(t, crossWait, path, a.ID, 0)
	child.start(t)
	requireQueued(t, path, 2)
	behind := make(chan error, 1)
	go func() {
		_, err := accounts2.MutateRowLocked(testdb.Ctx(t), a.ID, func(b *fixtures.Account) error {
			b.Balance++
			b.Owner += "B"
			return nil
		})
		behind <- err
	}()
	requireQueued(t, path, 3)
	child.kill(t)
	close(release)
	require.NoError(t, <-holder)
	require.NoError(t, <-behind, "the write queued behind a killed process")

	got := accountNow(t, accounts, a.ID)
	require.Equal(t, int64(2), got.Balance)
	require.Equal(t, "xAB", got.Owner)
	n, err := sqlitegate.QueuedTurns(path)
	require.NoError(t, err)
	require.Equal(t, 0, n)
}

// Processes take turns in the order they asked, and a process that had
// its turn and writes again goes behind the ones waiting: with flock
// alone, its next write would take the lock again before they run.
func TestSQLiteProcessesTakeTurnsInOrder(t *testing.T) {
	path, _, accounts, a := crossDB(t)
	clients := map[string]*repository.Repository[fixtures.Account]{"A": accounts}
	for _, name := range []string{"B", "C"} {
		clients[name], _ = repos(t, testdb.OpenSQLiteFile(t, path))
	}
	write := func(name string, wait <-chan struct{}, held chan<- struct{}) error {
		_, err := clients[strings.ToUpper(name)].MutateRowLocked(testdb.Ctx(t), a.ID, func(b *fixtures.Account) error {
			b.Owner += name
			if held != nil {
				close(held)
				<-wait
			}
			return nil
		})
		return err
	}

	release := make(chan struct{})
	held := make(chan struct{})
	errs := make(chan error, 3)
	go func() {
		err := write("A", release, held)
		if err == nil {
			err = write("a", nil, nil) // A again, at once
		}
		errs <- err
	}()
	<-held
	requireQueued(t, path, 1)
	go func() { errs <- write("B", nil, nil) }()
	requireQueued(t, path, 2)
	go func() { errs <- write("C", nil, nil) }()
	requireQueued(t, path, 3)
	close(release)
	for range 3 {
		require.NoError(t, <-errs)
	}
	require.Equal(t, "xABCa", accountNow(t, accounts, a.ID).Owner)
}

// Writers in four processes, each through one of gormlock's writes, lose
// no increment of one hot record; the same workload unguarded (read, then
// write back) does.
func TestSQLiteProcessesLoseNothing(t *testing.T) {
	const per = 60
	run := func(t *testing.T, modes []string) (want, got int64) {
		path, _, accounts, a := crossDB(t)
		var children []*crossChild
		for _, m := range modes {
			children = append(children, startCrossChild(t, m, path, a.ID, per))
		}
		for _, ch := range children {
			ch.start(t)
		}
		for _, ch := range children {
			ch.finish(t)
		}
		return int64(len(modes) * per), accountNow(t, accounts, a.ID).Balance
	}
	t.Run("gormlock", func(t *testing.T) {
		want, got := run(t, []string{crossMutate, crossLocked, crossApply, crossMutate})
		require.Equal(t, want, got)
	})
	t.Run("unguarded", func(t *testing.T) {
		want, got := run(t, []string{crossUnguarded, crossUnguarded, crossUnguarded, crossUnguarded})
		require.Less(t, got, want, "the negative control lost no update: the test could not see a loss")
	})
}

// The turns of two SQLite files are apart, in one process as in several:
// while another process holds its turn on one file, this process's writers
// of the other file do not wait for it, and those of the held file do.
func TestSQLiteTurnsOfTwoFilesAreApart(t *testing.T) {
	path1, _, accounts1, a1 := crossDB(t)
	_, _, accounts2, a2 := crossDB(t)
	child := startCrossChild(t, crossHold, path1, a1.ID, 0)
	child.start(t)
	child.expect(t, "holding")
	requireQueued(t, path1, 1)

	inc := func(b *fixtures.Account) error { b.Balance++; return nil }
	_, err := accounts1.MutateRowLocked(testdb.Ctx(t), a1.ID, inc, repository.NoWait())
	require.ErrorIs(t, err, locking.ErrLocked, "a write of the held file")
	_, err = accounts2.MutateRowLocked(testdb.Ctx(t), a2.ID, inc, repository.NoWait())
	require.NoError(t, err, "a write of the other file")
	_, err = accounts2.Apply(testdb.Ctx(t), a2.ID, []repository.Change{repository.Add("Balance", 1)})
	require.NoError(t, err)

	child.kill(t)
	_, err = accounts1.MutateRowLocked(testdb.Ctx(t), a1.ID, inc)
	require.NoError(t, err)
	require.Equal(t, int64(1), accountNow(t, accounts1, a1.ID).Balance)
	require.Equal(t, int64(2), accountNow(t, accounts2, a2.ID).Balance)
}
