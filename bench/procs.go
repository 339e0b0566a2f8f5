package main

// -procs: a cell's workers in separate processes.
//
// With -procs N above 1, each round of a cell starts min(N, workers) child
// processes: this command again (os.Executable), with childEnv set. Worker
// w runs in child w % N and, as in one process, on node w % nodes. The
// parent and each child talk in JSON lines:
//
//	parent -> child (stdin)   childSpec: the database, the cell, its records, the child's workers
//	child  -> parent (stdout) {"ready":true,"pid":...}: pools open, operations prepared, connections warm
//	parent -> child (stdin)   {"start_unix_ns":...}: every child starts at that instant, stops at start + duration
//	child  -> parent (stdout) {"result":{...}} (a tally) or {"error":"..."}, then the child exits
//
// The DSNs go over stdin, not the command line or the environment, so that
// no password shows in the process list. Any further line on stdin, or its
// end, stops a child's workers: the parent closes stdin when it is done
// with a child, and a child whose parent died sees its stdin end. A child
// also exits by itself once it has lived far longer than its round could
// take. The parent kills a child that does not report in time, or on any
// error or cancellation, and waits for every child it started, each wait
// bounded.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/sqlitegate"
	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/locking"
)

// childEnv, set in a process's environment, makes the bench command a
// child of a -procs run: it reads a childSpec on stdin instead of flags.
const childEnv = "GORMLOCK_BENCH_CHILD"

// Bounds of the parent's waits for its children, and of a child's life.
const (
	// readyTimeout bounds opening a child's pools and warming them up.
	readyTimeout = 30 * time.Second
	// startDelay is how far ahead of now the parent sets the common start,
	// so every child has the start line before it.
	startDelay = 20 * time.Millisecond
	// resultGrace is how long after the round's end the parent waits for a
	// child's result: an operation under way at the end finishes first.
	resultGrace = time.Minute
	// reapTimeout bounds the wait for a child to exit once it was told to
	// stop (stdin closed), and then once it was killed (pipes included).
	reapTimeout = 5 * time.Second
	// childLifetime is added to the round's duration to bound a child's
	// whole life, should its parent stop talking to it without dying.
	childLifetime = 5 * time.Minute
)

// childSpec is what the parent sends a child: everything it needs to run
// its share of one round of a cell.
type childSpec struct {
	DB string `json:"db"` // -db
	// DSNs are the nodes' DSNs (SQLite: "sqlite:" and the file's path);
	// the child opens a pool on each.
	DSNs    []string            `json:"dsns"`
	Policy  locking.RetryPolicy `json:"policy"`
	Cell    Cell                `json:"cell"`
	Owner   string              `json:"owner"`
	IDs     []int64             `json:"ids"`
	Workers []int               `json:"workers"` // global worker indices
	// Duration is the round's measuring time, from the start the parent
	// sends.
	Duration time.Duration `json:"duration_ns"`
}

// childStart is the parent's signal to start, at StartUnixNS.
type childStart struct {
	StartUnixNS int64 `json:"start_unix_ns"`
}

// childMsg is a line a child writes.
type childMsg struct {
	Ready  bool   `json:"ready,omitempty"`
	PID    int    `json:"pid,omitempty"`
	Result *tally `json:"result,omitempty"`
	Error  string `json:"error,omitempty"`
}

// procWorkers splits workers over n processes: worker w in process w % n.
func procWorkers(workers, n int) [][]int {
	out := make([][]int, n)
	for w := range workers {
		out[w%n] = append(out[w%n], w)
	}
	return out
}

// processDSNs returns the DSNs a child process opens for t's nodes: the
// ones given, and for SQLite's temporary file its path, so that the
// children share the file.
func processDSNs(t *target, db string) ([]string, error) {
	dsns := append([]string(nil), t.dsns...)
	if db == dbSQLite && dsns[0] == "" {
		var file string
		if err := t.nodes[0].Raw("SELECT file FROM pragma_database_list WHERE name = 'main'").Row().Scan(&file); err != nil {
			return nil, fmt.Errorf("-procs: finding the SQLite file: %w", err)
		}
		if file == "" {
			return nil, errors.New("-procs: the SQLite database is not a file that other processes can open")
		}
		dsns[0] = "sqlite:" + file
	}
	return dsns, nil
}

// child is a running child process, as the parent sees it.
type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	msgs   chan childMsg // closed after the last message
	stderr *tailWriter
	pid    int
	done   bool // waited for
}

// runProcs runs one round of cell c in min(h.procs, workers) child
// processes, started together, and returns their tallies added up, and
// each child's successful operations. Every child is gone when it returns.
func (h *harness) runProcs(ctx context.Context, c Cell, d time.Duration, ids []int64, owner string) (_ tally, procOps []int64, err error) {
	exe, err := os.Executable()
	if err != nil {
		return tally{}, nil, fmt.Errorf("-procs: %w", err)
	}
	groups := procWorkers(c.Workers, min(h.procs, c.Workers))
	var children []*child
	defer func() {
		// On success the children have reported and are exiting: tell them
		// to stop and wait. On any error kill them first.
		var errs []error
		for _, ch := range children {
			errs = append(errs, ch.reap(err != nil))
		}
		if err == nil {
			err = errors.Join(errs...)
		}
	}()
	for i, ws := range groups {
		spec := childSpec{DB: h.db, DSNs: h.procDSNs, Policy: h.policy, Cell: c, Owner: owner, IDs: ids, Workers: ws, Duration: d}
		ch, err := startChild(exe, spec)
		if err != nil {
			return tally{}, nil, fmt.Errorf("-procs: starting process %d of %d: %w", i+1, len(groups), err)
		}
		children = append(children, ch)
	}
	ready := time.NewTimer(readyTimeout)
	defer ready.Stop()
	for i, ch := range children {
		m, err := ch.next(ctx, ready.C, "to get ready")
		if err == nil && !m.Ready {
			err = errors.New("sent a result before it was started")
		}
		if err != nil {
			return tally{}, nil, ch.fail(i, len(children), err)
		}
		ch.pid = m.PID
	}
	start := time.Now().Add(startDelay)
	line, err := json.Marshal(childStart{StartUnixNS: start.UnixNano()})
	if err != nil {
		return tally{}, nil, err
	}
	for i, ch := range children {
		if _, err := ch.stdin.Write(append(line, '\n')); err != nil {
			return tally{}, nil, ch.fail(i, len(children), fmt.Errorf("sending the start: %w", err))
		}
	}
	reported := time.NewTimer(time.Until(start.Add(d)) + resultGrace)
	defer reported.Stop()
	var sum tally
	for i, ch := range children {
		m, err := ch.next(ctx, reported.C, "to report")
		if err == nil && m.Result == nil {
			err = errors.New("sent no result")
		}
		if err != nil {
			return tally{}, nil, ch.fail(i, len(children), err)
		}
		t := m.Result
		sum.Ops += t.Ops
		sum.Errors += t.Errors
		sum.Attempts += t.Attempts
		sum.Elapsed = max(sum.Elapsed, t.Elapsed)
		sum.CPU += t.CPU
		sum.Lat = append(sum.Lat, t.Lat...)
		for k, n := range t.NodeOps {
			if k == len(sum.NodeOps) {
				sum.NodeOps = append(sum.NodeOps, 0)
			}
			sum.NodeOps[k] += n
		}
		procOps = append(procOps, t.Ops)
	}
	return sum, procOps, nil
}

// startChild starts a child process and sends it spec.
func startChild(exe string, spec childSpec) (_ *child, err error) {
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	ch := &child{cmd: cmd, msgs: make(chan childMsg, 2), stderr: &tailWriter{max: 4096}}
	cmd.Stderr = ch.stderr
	cmd.WaitDelay = reapTimeout
	if ch.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ch.pid = cmd.Process.Pid
	go func() {
		// Two messages at most: ready, then a result or an error.
		defer close(ch.msgs)
		dec := json.NewDecoder(stdout)
		for range 2 {
			var m childMsg
			if err := dec.Decode(&m); err != nil {
				if errors.Is(err, io.EOF) {
					err = errors.New("exited without a word")
				}
				ch.msgs <- childMsg{Error: err.Error()}
				return
			}
			ch.msgs <- m
			if !m.Ready {
				return
			}
		}
	}()
	b, err := json.Marshal(spec)
	if err == nil {
		_, err = ch.stdin.Write(append(b, '\n'))
	}
	if err != nil {
		_ = ch.reap(true)
		return nil, err
	}
	return ch, nil
}

// next waits for the child's next message, until timeout fires or ctx
// ends; a message that carries an error is returned as one.
func (ch *child) next(ctx context.Context, timeout <-chan time.Time, what string) (childMsg, error) {
	if err := ctx.Err(); err != nil {
		return childMsg{}, err
	}
	select {
	case m, ok := <-ch.msgs:
		switch {
		case !ok:
			return m, errors.New("exited")
		case m.Error != "":
			return m, errors.New(m.Error)
		}
		return m, nil
	case <-timeout:
		return childMsg{}, fmt.Errorf("took too long %s", what)
	case <-ctx.Done():
		return childMsg{}, ctx.Err()
	}
}

// fail describes the failure err of the i-th of n children, with the end
// of what it wrote on stderr.
func (ch *child) fail(i, n int, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	msg := fmt.Sprintf("-procs: process %d of %d (pid %d): %v", i+1, n, ch.pid, err)
	if s := strings.TrimSpace(ch.stderr.String()); s != "" {
		msg += "; its stderr ends: " + s
	}
	return errors.New(msg)
}

// reap ends the child and waits for it: it closes its stdin (the child's
// signal to stop), kills it at once when kill is set or when it has not
// exited within reapTimeout, and waits for it. An exit other than 0 is an
// error unless the child was killed.
func (ch *child) reap(kill bool) error {
	if ch.done {
		return nil
	}
	ch.done = true
	_ = ch.stdin.Close()
	if kill {
		_ = ch.cmd.Process.Kill()
	}
	exited := make(chan error, 1)
	go func() { exited <- ch.cmd.Wait() }()
	t := time.NewTimer(reapTimeout)
	defer t.Stop()
	select {
	case err := <-exited:
		if kill || err == nil {
			return nil
		}
		return fmt.Errorf("-procs: process (pid %d): %w", ch.pid, err)
	case <-t.C:
		_ = ch.cmd.Process.Kill()
		<-exited // returns: the process is killed, and WaitDelay bounds its pipes
		return fmt.Errorf("-procs: process (pid %d) did not exit within %v of being told to stop; killed", ch.pid, reapTimeout)
	}
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// runChildIfAsked runs this process as a child of a -procs run and exits,
// when childEnv says it is one; otherwise it returns. main and the tests'
// TestMain call it first.
func runChildIfAsked() {
	if os.Getenv(childEnv) == "" {
		return
	}
	// Stdout carries the messages to the parent and nothing else.
	out := os.Stdout
	os.Stdout = os.Stderr
	if err := runChild(os.Stdin, out); err != nil {
		if !errors.As(err, new(reportedError)) {
			fmt.Fprintln(os.Stderr, "bench: child:", err)
		}
		os.Exit(1)
	}
	os.Exit(0)
}

// runChild is a child's life: read the spec from in, open the pools and
// prepare the workers, say so on out, wait for the start, run the workers
// until the round's end, and write what they did on out. An error is also
// written on out, for the parent to report.
func runChild(in io.Reader, out io.Writer) (err error) {
	dec := json.NewDecoder(in)
	enc := json.NewEncoder(out)
	defer func() {
		if err != nil && enc.Encode(childMsg{Error: err.Error()}) == nil {
			err = reportedError{err}
		}
	}()
	var spec childSpec
	if err := dec.Decode(&spec); err != nil {
		return fmt.Errorf("reading the spec: %w", err)
	}
	// The parent bounds every wait; this bounds a child whose parent no
	// longer does.
	watchdog := time.AfterFunc(spec.Duration+childLifetime, func() {
		fmt.Fprintln(os.Stderr, "bench: child: lived too long; exiting")
		os.Exit(3)
	})
	defer watchdog.Stop()
	if len(spec.DSNs) == 0 || len(spec.Workers) == 0 || len(spec.IDs) == 0 {
		return errors.New("the spec names no database, worker or record")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	if spec.Cell.Mode == ModeMutateFlock {
		sqlitegate.SetTurnQueue(false) // before any pool opens the lock file
	}
	// Each node's pool holds this child's workers on it, and some room.
	perNode := make([]int, len(spec.DSNs))
	for _, w := range spec.Workers {
		perNode[w%len(spec.DSNs)]++
	}
	var nodes []*gorm.DB
	defer func() {
		for _, g := range nodes {
			_ = fixtures.Close(g)
		}
	}()
	for i, dsn := range spec.DSNs {
		g, err := fixtures.OpenDSN(dsn)
		if err != nil {
			return fmt.Errorf("node %d: %w", i+1, err)
		}
		nodes = append(nodes, g)
		sqlDB, err := g.DB()
		if err != nil {
			return err
		}
		sqlDB.SetMaxOpenConns(perNode[i] + 4)
		sqlDB.SetMaxIdleConns(perNode[i] + 4)
		if err := warm(ctx, sqlDB, perNode[i]); err != nil {
			return fmt.Errorf("node %d: %w", i+1, err)
		}
	}
	h, err := newHarness(&target{nodes: nodes, dsns: spec.DSNs}, spec.DB, spec.Policy)
	if err != nil {
		return err
	}
	defer h.close()
	incs := make([]op, len(spec.Workers))
	for i, w := range spec.Workers {
		if incs[i], err = h.op(spec.Cell.Mode, h.nodes[w%len(h.nodes)], spec.Owner); err != nil {
			return err
		}
	}
	if err := enc.Encode(childMsg{Ready: true, PID: os.Getpid()}); err != nil {
		return err
	}
	var start childStart
	if err := dec.Decode(&start); err != nil {
		return fmt.Errorf("waiting for the start: %w", err)
	}
	go func() {
		// Whatever comes next, or the end of stdin, stops the workers.
		var next json.RawMessage
		_ = dec.Decode(&next)
		cancel()
	}()
	t0 := time.Unix(0, start.StartUnixNS)
	t, err := work(ctx, spec.Cell, spec.Workers, incs, len(nodes), spec.IDs, t0, t0.Add(spec.Duration))
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("stopped by the parent: %w", err)
	}
	return enc.Encode(childMsg{Result: &t})
}

// reportedError is a child's error that reached the parent.
type reportedError struct{ error }

func (e reportedError) Unwrap() error { return e.error }

// warm opens n connections of pool at once and returns them to it, so the
// round does not pay for connecting.
func warm(ctx context.Context, pool *sql.DB, n int) error {
	conns := make([]*sql.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for range n {
		c, err := pool.Conn(ctx)
		if err != nil {
			return err
		}
		conns = append(conns, c)
		if err := c.PingContext(ctx); err != nil {
			return err
		}
	}
	return nil
}
