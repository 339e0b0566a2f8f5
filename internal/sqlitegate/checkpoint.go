package sqlitegate

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gormlock/gormlock/locking"
)

// Checkpoints off the writer's turn.
//
// In WAL mode SQLite copies the log back into the database file (a
// checkpoint) in the connection whose COMMIT finds the log longer than
// wal_autocheckpoint pages (1,000 by default), inside that COMMIT: with
// synchronous=NORMAL it first writes the log out to disk (the pages every
// commit since the last checkpoint appended: 4 MB by default), then the
// database file. SQLite has let the write lock go by then, but the gormlock
// writer whose COMMIT it is still holds the gate's turn (and the
// cross-process lock) until its statement returns, so every writer of
// every process waited for it: 2-3 ms on a VM's disk, every few dozen
// milliseconds with 32 writers on one hot row, and 2 ms of p99.
//
// So the gate's writer connection (see "The writer connection") runs with
// wal_autocheckpoint = 0 while the gate keeps it, and the gate checkpoints
// instead, in two steps:
//
//   - when about three quarters of wal_autocheckpoint pages of log have
//     been written (reckoned from the commits made on the writer
//     connection and the log's length each checkpoint reports), a
//     goroutine runs the PASSIVE checkpoint SQLite would have run, on
//     another connection of the pool, while the writers go on: it writes
//     the log out and copies it, all of it but the commits made meanwhile;
//   - the writer that next has the turn, after its statement, runs a
//     PASSIVE checkpoint on the writer connection: it writes out and
//     copies what was committed during the first, and completes, since no
//     other gormlock writer can commit while it has the turn. The log
//     restarts from its beginning at the next write only after a
//     checkpoint that completed (SQLite's rule): without this second step,
//     writers that never pause would grow the log without bound.
//
// When the first step gets no connection within ckptConnWait (a pool the
// application keeps busy) or fails, the second does it all, with the turn
// held, as SQLite's own checkpoint did. When another connection was
// checkpointing (another process's gate), that one completes its own.
//
// When the connection goes back to the pool, or a transaction of the
// application takes it over, its wal_autocheckpoint is restored: the
// value the gate read from the first connection it kept (the connections
// of one pool are opened alike; a value one connection was given with a
// PRAGMA of its own is not kept). Nothing changes for a database not in
// WAL mode, or whose connections were opened with wal_autocheckpoint <= 0
// (the application checkpoints itself), or for connections the gate does
// not keep: they checkpoint in their COMMIT, as they would without
// gormlock.

// ckptConnWait bounds a checkpoint's wait for a connection of the pool,
// and ckptTimeout the checkpoint. A checkpoint that gets no connection
// within ckptConnWait (a pool the application keeps busy) is left whole
// to the writer with the next turn: the log never goes unchecked.
const (
	ckptConnWait = 50 * time.Millisecond
	ckptTimeout  = 10 * time.Second
)

// walPages returns the wal_autocheckpoint the gate checkpoints by, read
// from conn the first time (the connections of one pool are opened alike,
// and a connection the gate gives back gets this value back): 0 when the
// gate leaves checkpoints to SQLite — not WAL mode, wal_autocheckpoint <=
// 0, or, this time only, when conn could not tell (it is asked again with
// the next connection the gate keeps).
func (g *sqliteGate) walPages(ctx context.Context, conn *sql.Conn) int64 {
	if n := g.ckptPages.Load(); n >= 0 {
		return n
	}
	var mode string
	if err := conn.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return 0
	}
	var n int64
	if strings.EqualFold(mode, "wal") {
		if err := conn.QueryRowContext(ctx, "PRAGMA wal_autocheckpoint").Scan(&n); err != nil {
			return 0
		}
	}
	n = max(n, 0)
	g.ckptPages.Store(n)
	return n
}

// committed counts a write on the gate's writer connection, whose
// wal_autocheckpoint is 0, and starts a checkpoint when about
// wal_autocheckpoint pages of log have been written since the last one
// and none runs. It is called with hmu held.
func (g *sqliteGate) committed(sqlDB *sql.DB) {
	pages := g.ckptPages.Load()
	if pages <= 0 {
		return
	}
	g.ckptCommits++
	if g.ckptEvery == 0 {
		// A commit writes a page of the table and one of each index
		// it changes, at least: start from a guess, corrected by the
		// log's length at each checkpoint.
		g.ckptEvery = max(1, pages/4)
	}
	if g.ckptCommits < g.ckptEvery || g.ckptRunning {
		return
	}
	g.ckptRunning = true
	g.ckptCommits = 0
	g.ckptStarted.Add(1)
	go g.checkpoint(sqlDB)
}

// checkpoint runs a PASSIVE checkpoint on a connection of sqlDB's pool (it
// never waits for a lock: it copies what no reader still needs), asks the
// writer with the next turn to complete it (catchUpDue), and adjusts how
// many commits the next one waits for, so that the log is about
// wal_autocheckpoint pages long when it runs.
func (g *sqliteGate) checkpoint(sqlDB *sql.DB) {
	logPages := int64(-1)
	elsewhere := false // another connection was checkpointing
	defer func() {
		g.hmu.Lock()
		defer g.hmu.Unlock()
		g.ckptRunning = false
		// The writer with the next turn completes it, or does it all
		// when it could not run here (no connection to be had, or an
		// error). Not when another connection was checkpointing: that is
		// another process's gate, which completes its own.
		if !elsewhere {
			g.ckptCatchUp, g.ckptTries = true, 0
		}
		pages := g.ckptPages.Load()
		switch {
		case logPages < 0:
		case logPages > pages:
			// Aim at three quarters: the log grows on while the
			// checkpoint runs and until the writer with the next turn
			// completes it.
			g.ckptEvery = max(1, g.ckptEvery*(pages*3/4)/logPages)
		case logPages < pages/3:
			g.ckptEvery = min(pages, 2*g.ckptEvery)
		}
	}()
	cctx, ccancel := context.WithTimeout(context.Background(), ckptConnWait)
	conn, err := sqlDB.Conn(cctx)
	ccancel()
	if err != nil {
		return // the pool is busy, or the database was closed
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), ckptTimeout)
	defer cancel()
	var busy, done int64
	err = conn.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &logPages, &done)
	elsewhere = err == nil && busy != 0
	if err != nil || busy != 0 {
		logPages = -1
	}
}

// catchUpDue reports that the writer with the turn is to complete the
// last checkpoint the gate ran (see "Checkpoints off the writer's turn"),
// and clears the mark: caughtUp sets it again when it did not complete.
func (g *sqliteGate) catchUpDue() bool {
	g.hmu.Lock()
	defer g.hmu.Unlock()
	due := g.ckptCatchUp
	g.ckptCatchUp = false
	return due
}

// caughtUp records the outcome of a catch-up: one that did not complete is
// tried again by the next writer (which costs little when another
// checkpoint runs), maxCatchUpTries times at most.
func (g *sqliteGate) caughtUp(ok bool) {
	g.hmu.Lock()
	defer g.hmu.Unlock()
	if ok {
		// The log starts over with the next write: the commits made
		// while the checkpoint ran are in the log just copied.
		g.ckptCommits = 0
		return
	}
	g.ckptTries++
	g.ckptCatchUp = g.ckptTries < maxCatchUpTries
}

// maxCatchUpTries bounds the writers that try to complete one checkpoint:
// readers that keep older pages in use one after another would otherwise
// have every write copy a few pages and sync the files with the turn
// held. The next checkpoint tries again.
const maxCatchUpTries = 8

// catchUp completes the gate's last checkpoint on the writer connection,
// while its writer has the turn, and reports whether it did. It does not
// when another connection runs a checkpoint (another process's gate), or a
// reader still reads frames it would copy: the next writer tries again,
// which costs little (nothing to write out), until one completes. A
// connection found closed is not kept.
func (w *Writer) catchUp() bool {
	var busy, logPages, done int64
	err := w.conn.QueryRowContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &logPages, &done)
	w.check(err)
	return err == nil && busy == 0 && done >= logPages
}

// Checkpoints returns how many checkpoints the gate of the database behind
// sqlDB started for its writer connection in this process. Tests use it to
// see that gormlock's writes to a WAL database are checkpointed.
func Checkpoints(sqlDB *sql.DB) int64 { return gateOf(sqlDB).ckptStarted.Load() }

// autocheckpointOff sets the wal_autocheckpoint of conn, a connection the
// gate keeps as its writer, to 0, and returns the value to restore when
// it goes back to the pool; -1 when it was left alone (see walPages).
func (g *sqliteGate) autocheckpointOff(ctx context.Context, conn *sql.Conn) (int64, error) {
	pages := g.walPages(ctx, conn)
	if pages == 0 {
		return -1, nil
	}
	if _, err := conn.ExecContext(ctx, "PRAGMA wal_autocheckpoint = 0"); err != nil {
		return -1, fmt.Errorf("setting wal_autocheckpoint: %w", locking.Classify(err))
	}
	return pages, nil
}

// restoreAutocheckpoint gives conn its wal_autocheckpoint of pages back.
func restoreAutocheckpoint(conn *sql.Conn, pages int64) error {
	_, err := conn.ExecContext(context.Background(), "PRAGMA wal_autocheckpoint = "+strconv.FormatInt(pages, 10))
	return err
}
