//go:build unix

package reliability_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	mrand "math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	mysqlopen "github.com/gormlock/gormlock/opendb/mysql"
	pgopen "github.com/gormlock/gormlock/opendb/postgres"
	sqliteopen "github.com/gormlock/gormlock/opendb/sqlite"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/gormlock/gormlock/internal/tests/fixtures"
	"github.com/gormlock/gormlock/internal/tests/testdb"
	"github.com/gormlock/gormlock/repository"
)

// Crash durability.
//
// TestCrash runs this test binary again as a child process (TestCrashChild)
// whose goroutines increment a few accounts with Mutate and, each time
// Mutate returns nil, print "ack <id> <balance> <version>\n" in one write.
// The parent kills it with SIGKILL at a random moment after its first
// acknowledgement, again and again, and after every kill, on a fresh
// connection, checks that
//
//   - no acknowledged write is missing: each account's stored balance and
//     version are at least the largest acknowledged;
//   - the balance counts the increments: every acknowledged balance is new
//     (the same balance twice is a lost update) and above the state before
//     the round, and beyond the acknowledgements at most one write per
//     goroutine (committed, not yet acknowledged at the kill) is stored;
//   - acknowledged versions grow with the balance, across all rounds;
//   - SQLite: PRAGMA integrity_check says exactly "ok";
//   - the database recovers: a Mutate of every account works;
//   - PostgreSQL and MariaDB: the killed client's sessions go away.
//
// A line the kill cut is no acknowledgement and is ignored (the torn child
// makes a real cut). The negative control acknowledges before writing and
// sleeps ackBeforeGap in between, so that kills land there: the same checks
// must find an acknowledged write missing.

// The child's environment.
const (
	crashModeEnv   = "GORMLOCK_CRASH_CHILD"  // the child's mode; unset in the parent
	crashTargetEnv = "GORMLOCK_CRASH_TARGET" // the SQLite file or the server DSN
	crashIDsEnv    = "GORMLOCK_CRASH_IDS"    // the accounts, comma-separated
)

// The child's modes: acknowledge after Mutate returned nil (the contract
// under test); acknowledge before writing (the negative control); torn:
// acknowledge crashTornAcks writes, print the next line without its last
// crashTornCut bytes (the newline and the version's last digits, so the
// rest still looks like an acknowledgement), say so on stderr and wait.
const (
	crashAckAfter  = "ack-after-commit"
	crashAckBefore = "ack-before-commit"
	crashTorn      = "torn"

	crashTornAcks   = 3
	crashTornCut    = 5
	crashTornSignal = "torn line written"
)

const (
	crashAccounts = 4 // accounts per phase
	crashWorkers  = 2 // goroutines per account in the acknowledging child
	// Kills of the acknowledging child per database (crashRoundsLong with
	// GORMLOCK_RELIABILITY=long), and of the negative control.
	crashRounds        = 12
	crashRoundsLong    = 40
	crashControlRounds = 4
	// ackBeforeGap is long beside a write, so most kills of the negative
	// control land between an acknowledgement and its write.
	ackBeforeGap = 50 * time.Millisecond
	// Hang guards, not timing assertions: a child's whole life (it also
	// exits when the parent, holding its stdin, is gone), the wait for its
	// first acknowledgement, and for a killed client's sessions to go.
	crashChildLifetime = 2 * time.Minute
	crashStartWait     = time.Minute
	crashSessionWait   = 10 * time.Second
)

// crashAck is one acknowledged write: account id has balance and version.
type crashAck struct{ id, balance, version int64 }

func (a crashAck) line() string { return fmt.Sprintf("ack %d %d %d\n", a.id, a.balance, a.version) }

// parseCrashAck parses one whole line, newline included: anything but
// "ack <id> <balance> <version>\n" with positive numbers is an error.
func parseCrashAck(line string) (crashAck, error) {
	body, ok := strings.CutSuffix(line, "\n")
	f := strings.Split(body, " ")
	if !ok || len(f) != 4 || f[0] != "ack" {
		return crashAck{}, fmt.Errorf("line %q is not \"ack <id> <balance> <version>\\n\"", line)
	}
	var n [3]int64
	for i, s := range f[1:] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v <= 0 {
			return crashAck{}, fmt.Errorf("line %q: field %d is not a positive integer", body, i+2)
		}
		n[i] = v
	}
	return crashAck{id: n[0], balance: n[1], version: n[2]}, nil
}

// readCrashAcks reads a child's stdout to its end, calling onAck for every
// whole line. What follows the last newline (a line the kill cut) is not an
// acknowledgement: it is returned as partial. A malformed whole line is an
// error, returned after reading on to the end, so the child never blocks on
// a full pipe.
func readCrashAcks(r io.Reader, onAck func(crashAck)) (partial string, err error) {
	br := bufio.NewReader(r)
	for {
		line, rerr := br.ReadString('\n')
		if rerr == io.EOF {
			return line, err
		} else if rerr != nil {
			return line, errors.Join(err, rerr)
		}
		a, perr := parseCrashAck(line)
		if perr != nil {
			if err == nil {
				err = perr
			}
			continue
		}
		onAck(a)
	}
}

func TestCrashAckStream(t *testing.T) {
	var got []crashAck
	collect := func(a crashAck) { got = append(got, a) }
	partial, err := readCrashAcks(strings.NewReader("ack 1 5 1795401280989319\nack 2 7 1795401280989320\nack 1 6 17954"), collect)
	require.NoError(t, err)
	require.Equal(t, []crashAck{{1, 5, 1795401280989319}, {2, 7, 1795401280989320}}, got)
	require.Equal(t, "ack 1 6 17954", partial, "a cut line is left over, not parsed")

	got = nil
	_, err = readCrashAcks(strings.NewReader("ack 1 5 9\nack 1 x 9\nack 1 6\nack 1 6 10\n"), collect)
	require.ErrorContains(t, err, `"ack 1 x 9"`)
	require.Equal(t, []crashAck{{1, 5, 9}, {1, 6, 10}}, got, "whole lines after a bad one are still read")
}

// TestCrashChild is the child process of TestCrash, and runs only when
// TestCrash starts it. Then it never returns: it is killed, or it exits
// with an error on stderr.
func TestCrashChild(t *testing.T) {
	mode := os.Getenv(crashModeEnv)
	if mode == "" {
		t.Skip("the child process of TestCrash; runs only when TestCrash starts it")
	}
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		fmt.Fprintln(os.Stderr, "crash child: stdin closed, the parent is gone")
		os.Exit(4)
	}()
	time.AfterFunc(crashChildLifetime, func() {
		fmt.Fprintln(os.Stderr, "crash child: lifetime over")
		os.Exit(5)
	})
	err := runCrashChild(mode)
	fmt.Fprintf(os.Stderr, "crash child %s: %v\n", mode, err)
	os.Exit(3)
}

func runCrashChild(mode string) error {
	var ids []int64
	for s := range strings.SplitSeq(os.Getenv(crashIDsEnv), ",") {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("%s: %w", crashIDsEnv, err)
		}
		ids = append(ids, id)
	}
	// A SQLite file opens with sqlite.Open: the settings users get.
	db, err := fixtures.OpenDSN(os.Getenv(crashTargetEnv))
	if err != nil {
		return err
	}
	repo, err := repository.New[fixtures.Account](db)
	if err != nil {
		return err
	}
	ctx := context.Background()
	workers, work := crashWorkers, crashAckAfterLoop
	switch mode {
	case crashAckAfter:
	case crashAckBefore:
		workers, work = 1, crashAckBeforeLoop
	case crashTorn:
		return crashTornChild(ctx, repo, ids[0])
	default:
		return fmt.Errorf("unknown mode %q", mode)
	}
	errc := make(chan error, len(ids)*workers)
	for _, id := range ids {
		for range workers {
			go func() { errc <- work(ctx, repo, id) }()
		}
	}
	return <-errc
}

func crashIncrement(a *fixtures.Account) error {
	a.Balance++
	return nil
}

// writeCrashAck prints a's line in one write: a pipe write of less than
// PIPE_BUF bytes is atomic, so the lines of several goroutines never mix.
func writeCrashAck(a crashAck) error {
	_, err := os.Stdout.WriteString(a.line())
	return err
}

func crashMutate(ctx context.Context, repo *repository.Repository[fixtures.Account], id int64) (crashAck, error) {
	a, err := repo.Mutate(ctx, id, crashIncrement)
	if err != nil {
		return crashAck{}, fmt.Errorf("Mutate account %d: %w", id, err)
	}
	return crashAck{a.ID, a.Balance, a.Version}, nil
}

func crashAckAfterLoop(ctx context.Context, repo *repository.Repository[fixtures.Account], id int64) error {
	for {
		a, err := crashMutate(ctx, repo, id)
		if err != nil {
			return err
		}
		if err := writeCrashAck(a); err != nil {
			return err
		}
	}
}

// crashAckBeforeLoop is the broken client of the negative control, the only
// writer of account id: it acknowledges the write it is about to make (the
// balance it will give, a version below the one it will get), sleeps, and
// only then makes it.
func crashAckBeforeLoop(ctx context.Context, repo *repository.Repository[fixtures.Account], id int64) error {
	for {
		cur, err := repo.Get(ctx, id)
		if err != nil {
			return err
		}
		if err := writeCrashAck(crashAck{id, cur.Balance + 1, cur.Version + 1}); err != nil {
			return err
		}
		time.Sleep(ackBeforeGap)
		a, err := crashMutate(ctx, repo, id)
		if err != nil {
			return err
		}
		if a.balance != cur.Balance+1 {
			return fmt.Errorf("account %d: balance %d after incrementing %d: another writer", id, a.balance, cur.Balance)
		}
	}
}

func crashTornChild(ctx context.Context, repo *repository.Repository[fixtures.Account], id int64) error {
	for range crashTornAcks {
		a, err := crashMutate(ctx, repo, id)
		if err != nil {
			return err
		}
		if err := writeCrashAck(a); err != nil {
			return err
		}
	}
	a, err := crashMutate(ctx, repo, id)
	if err != nil {
		return err
	}
	line := a.line()
	if _, err := os.Stdout.WriteString(line[:len(line)-crashTornCut]); err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, crashTornSignal)
	time.Sleep(crashChildLifetime)
	return errors.New("not killed")
}

// crashDB is one database under test, shared by the phases.
type crashDB struct {
	kind   string
	run    string   // random, in owners and application names
	path   string   // SQLite: the file
	dsn    string   // PostgreSQL: the schema's DSN; MariaDB: the database's
	admin  *gorm.DB // servers: the parent's connection, for their session lists
	starts int      // children started
}

func newCrashDB(t *testing.T, kind string) *crashDB {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	c := &crashDB{kind: kind, run: hex.EncodeToString(b)}
	if kind == "sqlite" {
		c.path = filepath.Join(t.TempDir(), "crash.db")
		// The parent holds no connection while the children run.
		require.NoError(t, fixtures.Close(testdb.OpenSQLiteFile(t, c.path)))
		return c
	}
	var db *gorm.DB
	var err error
	if kind == "mariadb" {
		c.dsn = testdb.MariaDBDatabase(t)
		db, err = mysqlopen.Open(c.dsn)
		require.NoError(t, err)
		// One connection: the session list leaves out its own.
		sqlDB, err := db.DB()
		require.NoError(t, err)
		sqlDB.SetMaxOpenConns(1)
	} else {
		c.dsn = testdb.PostgresSchema(t)
		db, err = pgopen.Open(c.dsn)
		require.NoError(t, err)
	}
	t.Cleanup(func() { _ = fixtures.Close(db) })
	require.NoError(t, fixtures.Migrate(testdb.Ctx(t), db))
	c.admin = db
	return c
}

// open opens a fresh connection pool, as a process starting after the crash
// would.
func (c *crashDB) open() (*gorm.DB, error) {
	switch c.kind {
	case "sqlite":
		return sqliteopen.Open(c.path)
	case "mariadb":
		return mysqlopen.Open(c.dsn)
	}
	return pgopen.Open(c.dsn)
}

// createAccounts creates n accounts at balance 0.
func (c *crashDB) createAccounts(t *testing.T, n int) map[int64]fixtures.Account {
	db, err := c.open()
	require.NoError(t, err)
	defer func() { require.NoError(t, fixtures.Close(db)) }()
	repo, err := repository.New[fixtures.Account](db)
	require.NoError(t, err)
	accts := map[int64]fixtures.Account{}
	for i := range n {
		a := fixtures.Account{Owner: fmt.Sprintf("crash-%s-%d", c.run, i)}
		require.NoError(t, repo.Create(testdb.Ctx(t), &a))
		accts[a.ID] = a
	}
	return accts
}

// crashChild is one running child process.
type crashChild struct {
	cmd      *exec.Cmd
	app      string // PostgreSQL: its application_name
	stdin    io.WriteCloser
	firstAck chan struct{}
	torn     chan struct{}
	outDone  chan struct{} // stdout read to its end
	errDone  chan struct{} // stderr read to its end

	mu      sync.Mutex
	acks    []crashAck
	partial string
	readErr error
	stderr  bytes.Buffer
}

func (c *crashDB) start(t *testing.T, mode string, ids []int64) *crashChild {
	c.starts++
	ch := &crashChild{firstAck: make(chan struct{}), torn: make(chan struct{}),
		outDone: make(chan struct{}), errDone: make(chan struct{})}
	target := c.path
	if c.kind == "mariadb" {
		target = c.dsn // the database is the child's alone
	}
	if c.kind == "postgres" {
		ch.app = fmt.Sprintf("gormlock-crash-%s-%d", c.run, c.starts)
		target = crashWithApp(c.dsn, ch.app)
	}
	idStrs := make([]string, len(ids))
	for i, id := range ids {
		idStrs[i] = strconv.FormatInt(id, 10)
	}
	ch.cmd = exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	ch.cmd.Env = append(os.Environ(), crashModeEnv+"="+mode, crashTargetEnv+"="+target,
		crashIDsEnv+"="+strings.Join(idStrs, ","))
	stdout, err := ch.cmd.StdoutPipe()
	require.NoError(t, err)
	stderr, err := ch.cmd.StderrPipe()
	require.NoError(t, err)
	ch.stdin, err = ch.cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, ch.cmd.Start())
	t.Cleanup(func() {
		if ch.cmd.ProcessState == nil { // left running by a failed test
			_ = ch.reap()
		}
	})
	go func() {
		defer close(ch.outDone)
		var once sync.Once
		partial, err := readCrashAcks(stdout, func(a crashAck) {
			ch.mu.Lock()
			ch.acks = append(ch.acks, a)
			ch.mu.Unlock()
			once.Do(func() { close(ch.firstAck) })
		})
		ch.mu.Lock()
		ch.partial, ch.readErr = partial, err
		ch.mu.Unlock()
	}()
	go func() {
		defer close(ch.errDone)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			ch.mu.Lock()
			ch.stderr.WriteString(sc.Text() + "\n")
			ch.mu.Unlock()
			if sc.Text() == crashTornSignal {
				close(ch.torn)
			}
		}
	}()
	return ch
}

// crashWithApp returns dsn with application_name app, so that the child's
// sessions can be found in pg_stat_activity.
func crashWithApp(dsn, app string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		q := u.Query()
		q.Set("application_name", app)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " application_name=" + app
}

// waitFor waits for ready (the first acknowledgement, or the torn line),
// failing the test when the child ends or hangs first.
func (ch *crashChild) waitFor(t *testing.T, ready <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ready:
		return
	case <-ch.outDone:
	case <-time.After(crashStartWait):
	}
	err := ch.reap()
	t.Fatalf("child gave no %s (exit: %v); stderr:\n%s", what, err, ch.stderr.String())
}

// reap kills the child with SIGKILL (kill -9), reads its output to the end
// and waits for it.
func (ch *crashChild) reap() error {
	_ = ch.cmd.Process.Kill()
	<-ch.outDone
	<-ch.errDone
	_ = ch.stdin.Close()
	return ch.cmd.Wait()
}

// kill reaps the child, checks that the kill ended it, and returns its
// acknowledgements and the line the kill cut, if any.
func (ch *crashChild) kill(t *testing.T) (acks []crashAck, partial string) {
	t.Helper()
	err := ch.reap()
	ws, ok := ch.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended by itself, not by the kill (%v); stderr:\n%s", err, ch.stderr.String())
	}
	if ch.readErr != nil {
		t.Errorf("child output: %v", ch.readErr)
	}
	if strings.Contains(ch.stderr.String(), "WARNING: DATA RACE") {
		t.Errorf("the child reported a data race:\n%s", ch.stderr.String())
	}
	return ch.acks, ch.partial
}

// crashViolation is a broken guarantee found after a kill.
type crashViolation struct {
	round     int
	kind, msg string
}

// crashMissing is the violation the negative control must produce.
const crashMissing = "acknowledged write missing"

// crashLedger keeps one phase's acknowledgements and the state the parent's
// last write left, and checks each round against them.
type crashLedger struct {
	workers    int                        // goroutines per account: writes possibly unacknowledged at a kill
	floor      map[int64]fixtures.Account // the state after the parent's last write
	acked      map[int64]map[int64]int64  // id -> acknowledged balance -> version, all rounds
	maxUnacked map[int64]int64            // id -> most writes stored beyond the acknowledgements in a round

	rounds, acks, parentWrites, cutLines int
	violations                           []crashViolation
}

func newCrashLedger(workers int, accts map[int64]fixtures.Account) *crashLedger {
	l := &crashLedger{workers: workers, floor: accts, acked: map[int64]map[int64]int64{}, maxUnacked: map[int64]int64{}}
	for id := range accts {
		l.acked[id] = map[int64]int64{}
	}
	return l
}

func (l *crashLedger) ids() []int64 { return slices.Sorted(maps.Keys(l.floor)) }

func (l *crashLedger) violate(round int, kind, format string, args ...any) {
	l.violations = append(l.violations, crashViolation{round, kind, fmt.Sprintf(format, args...)})
}

// check compares one round's acknowledgements with the stored accounts and
// returns a summary "id:acked/stored ...".
func (l *crashLedger) check(round int, acks []crashAck, stored map[int64]fixtures.Account) string {
	byID := map[int64][]crashAck{}
	for _, a := range acks {
		byID[a.id] = append(byID[a.id], a)
	}
	var summary []string
	for _, id := range l.ids() {
		f, s := l.floor[id], stored[id]
		if _, ok := stored[id]; !ok {
			l.violate(round, crashMissing, "account %d is gone", id)
			continue
		}
		var maxB, maxV int64
		var stale []int64
		for _, a := range byID[id] {
			maxB, maxV = max(maxB, a.balance), max(maxV, a.version)
			if a.balance <= f.Balance {
				stale = append(stale, a.balance)
			}
			if v, dup := l.acked[id][a.balance]; dup {
				l.violate(round, "lost update", "account %d: balance %d acknowledged twice, at versions %d and %d", id, a.balance, v, a.version)
			}
			l.acked[id][a.balance] = a.version
		}
		if len(stale) > 0 {
			l.violate(round, "stale acknowledgement", "account %d: acknowledged balances %v, but it was %d before the round", id, stale, f.Balance)
		}
		if s.Balance < maxB || s.Version < maxV {
			l.violate(round, crashMissing, "account %d: acknowledged balance %d version %d, stored balance %d version %d", id, maxB, maxV, s.Balance, s.Version)
		}
		if s.Balance < f.Balance || s.Version < f.Version {
			l.violate(round, crashMissing, "account %d: the parent's write (balance %d version %d) is gone: stored balance %d version %d", id, f.Balance, f.Version, s.Balance, s.Version)
		}
		high := max(f.Balance, maxB)
		if s.Balance > high+int64(l.workers) {
			l.violate(round, "phantom writes", "account %d: stored balance %d, but at most %d acknowledged or in flight", id, s.Balance, high+int64(l.workers))
		}
		l.maxUnacked[id] = max(l.maxUnacked[id], s.Balance-high)
		summary = append(summary, fmt.Sprintf("%d:%d/%d", id, maxB, s.Balance))
	}
	return strings.Join(summary, " ")
}

// checkVersionOrder checks, across all rounds, that each account's
// acknowledged versions grow with its balance: versions only grow per
// record, and each increment is one write.
func (l *crashLedger) checkVersionOrder() {
	for _, id := range l.ids() {
		bals := slices.Sorted(maps.Keys(l.acked[id]))
		for i := 1; i < len(bals); i++ {
			if v0, v1 := l.acked[id][bals[i-1]], l.acked[id][bals[i]]; v1 <= v0 {
				l.violate(l.rounds, "version order", "account %d: balance %d at version %d, balance %d at version %d", id, bals[i-1], v0, bals[i], v1)
				break
			}
		}
	}
}

// afterKill checks the database after a kill, on a fresh connection, and
// makes the recovery write. It returns the summary "id:acked/stored ..." and
// what it saw of the crash: the SQLite WAL file, or the server sessions.
func (c *crashDB) afterKill(t *testing.T, l *crashLedger, round int, ch *crashChild, acks []crashAck) (summary, seen string) {
	t.Helper()
	ctx := testdb.Ctx(t)
	if c.kind == "sqlite" {
		seen = "no WAL file after the kill"
		if fi, err := os.Stat(c.path + "-wal"); err == nil {
			seen = fmt.Sprintf("WAL file of %d B after the kill", fi.Size())
		}
	} else {
		seen = c.waitSessions(l, round, ch.app)
	}
	db, err := c.open()
	if err != nil {
		l.violate(round, "recovery", "open after the kill: %v", err)
		return "", seen
	}
	defer func() {
		if err := fixtures.Close(db); err != nil {
			l.violate(round, "recovery", "close: %v", err)
		}
	}()
	if c.kind == "sqlite" {
		var res []string
		if err := db.WithContext(ctx).Raw("PRAGMA integrity_check").Scan(&res).Error; err != nil || !slices.Equal(res, []string{"ok"}) {
			l.violate(round, "integrity", "PRAGMA integrity_check: %q, error %v", res, err)
		}
	}
	var rows []fixtures.Account
	if err := db.WithContext(ctx).Where("id IN ?", l.ids()).Find(&rows).Error; err != nil {
		l.violate(round, "recovery", "read the accounts: %v", err)
		return "", seen
	}
	stored := map[int64]fixtures.Account{}
	for _, r := range rows {
		stored[r.ID] = r
	}
	summary = l.check(round, acks, stored)

	// Recovery: the database takes writes again. The parent's write is the
	// next round's floor.
	repo, err := repository.New[fixtures.Account](db)
	require.NoError(t, err)
	for _, id := range l.ids() {
		a, err := repo.Mutate(ctx, id, crashIncrement)
		if err != nil {
			l.violate(round, "recovery", "Mutate account %d after the kill: %v", id, err)
			continue
		}
		if a.Balance != stored[id].Balance+1 {
			l.violate(round, "recovery", "Mutate account %d after the kill: balance %d, stored was %d", id, a.Balance, stored[id].Balance)
		}
		l.floor[id] = *a
		l.parentWrites++
	}
	return summary, seen
}

// waitSessions waits for the killed child's server sessions to go and
// says what it saw; a session still there after crashSessionWait is a
// violation.
func (c *crashDB) waitSessions(l *crashLedger, round int, app string) string {
	type row struct {
		State string
		N     int
	}
	begin, first := time.Now(), ""
	for {
		var rows []row
		var err error
		if c.kind == "mariadb" {
			// MariaDB sessions carry no application name: the child's are
			// those on its database other than the parent's one connection.
			err = c.admin.Raw("SELECT command AS state, count(*) AS n FROM information_schema.processlist WHERE db = DATABASE() AND id <> CONNECTION_ID() GROUP BY 1 ORDER BY 1").Scan(&rows).Error
		} else {
			err = c.admin.Raw("SELECT coalesce(state, '') AS state, count(*) AS n FROM pg_stat_activity WHERE application_name = ? GROUP BY 1 ORDER BY 1", app).Scan(&rows).Error
		}
		if err != nil {
			l.violate(round, "session", "session list: %v", err)
			return "?"
		}
		if first == "" {
			first = fmt.Sprint(rows)
		}
		if len(rows) == 0 {
			return fmt.Sprintf("sessions %s at the first look, none after %v", first, time.Since(begin).Round(time.Millisecond))
		}
		if time.Since(begin) > crashSessionWait {
			l.violate(round, "session", "%s: sessions %v still there %v after the kill", app, rows, crashSessionWait)
			return fmt.Sprintf("sessions %v left", rows)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runCrashRounds starts, kills and checks a child in mode for the given
// number of rounds, on new accounts.
func (c *crashDB) runCrashRounds(t *testing.T, mode string, rounds int) *crashLedger {
	t.Helper()
	workers := crashWorkers
	if mode == crashAckBefore {
		workers = 1
	}
	l := newCrashLedger(workers, c.createAccounts(t, crashAccounts))
	for round := 1; round <= rounds; round++ {
		ch := c.start(t, mode, l.ids())
		ch.waitFor(t, ch.firstAck, "acknowledgement")
		runFor := 100*time.Millisecond + mrand.N(500*time.Millisecond)
		time.Sleep(runFor)
		acks, partial := ch.kill(t)
		l.rounds++
		l.acks += len(acks)
		cut := "none"
		if partial != "" {
			l.cutLines++
			cut = strconv.Quote(partial)
		}
		summary, seen := c.afterKill(t, l, round, ch, acks)
		t.Logf("round %2d: killed %v after the first ack; %4d acks; acked/stored %s; cut line %s; %s",
			round, runFor.Round(time.Millisecond), len(acks), summary, cut, seen)
	}
	l.checkVersionOrder()
	return l
}

func TestCrash(t *testing.T) {
	for _, kind := range testdb.Dialects {
		t.Run(kind, func(t *testing.T) {
			begin := time.Now()
			c := newCrashDB(t, kind)
			t.Run("torn", c.testTorn)
			t.Run("acked", c.testAcked)
			t.Run("negative-control", c.testNegativeControl)
			t.Logf("%s: %d children killed in %v", kind, c.starts, time.Since(begin).Round(time.Millisecond))
		})
	}
}

// testTorn kills a child that has just printed part of a line, and checks
// that the part is not taken for an acknowledgement.
func (c *crashDB) testTorn(t *testing.T) {
	l := newCrashLedger(1, c.createAccounts(t, 1))
	ch := c.start(t, crashTorn, l.ids())
	ch.waitFor(t, ch.torn, "torn line")
	acks, partial := ch.kill(t)
	require.Len(t, acks, crashTornAcks, "the whole lines, and not the cut one")
	_, err := parseCrashAck(partial + "\n")
	require.NoError(t, err, "the cut line %q is meant to look like an acknowledgement", partial)
	summary, _ := c.afterKill(t, l, 1, ch, acks)
	for _, v := range l.violations {
		t.Errorf("%s: %s", v.kind, v.msg)
	}
	// The write whose line was cut committed before it was printed.
	require.Equal(t, acks[len(acks)-1].balance+2, l.floor[l.ids()[0]].Balance,
		"stored: the acknowledged writes, the one whose line was cut, and the parent's")
	t.Logf("%d whole acks; cut line %q ignored; acked/stored %s", len(acks), partial, summary)
}

// testAcked kills the acknowledging child again and again: no violation may
// be found.
func (c *crashDB) testAcked(t *testing.T) {
	rounds := crashRounds
	if long() {
		rounds = crashRoundsLong
	}
	l := c.runCrashRounds(t, crashAckAfter, rounds)
	for _, v := range l.violations {
		t.Errorf("round %d: %s: %s", v.round, v.kind, v.msg)
	}
	var total int64
	for _, id := range l.ids() {
		total += l.floor[id].Balance
	}
	unacked := total - int64(l.acks+l.parentWrites)
	if bound := int64(l.rounds * crashAccounts * l.workers); unacked < 0 || unacked > bound {
		t.Errorf("balances add up to %d: %d acknowledged and %d parent writes, and %d more (at most %d can be in flight at the kills)",
			total, l.acks, l.parentWrites, unacked, bound)
	}
	t.Logf("%s: %d rounds, %d kills, %d acknowledged writes, %d parent writes, %d cut lines, %d violations; "+
		"balances add up to %d = acks + parent writes + %d committed but unacknowledged at the kills; "+
		"most such writes in a round per account %v (bound %d)",
		c.kind, l.rounds, l.rounds, l.acks, l.parentWrites, l.cutLines, len(l.violations),
		total, unacked, l.maxUnacked, l.workers)
}

// testNegativeControl kills the child that acknowledges before writing: the
// checks must find an acknowledged write missing.
func (c *crashDB) testNegativeControl(t *testing.T) {
	l := c.runCrashRounds(t, crashAckBefore, crashControlRounds)
	caught, missing := map[int]bool{}, 0
	for _, v := range l.violations {
		if v.kind == crashMissing {
			caught[v.round] = true
			missing++
		}
	}
	if len(l.violations) > 0 {
		v := l.violations[0]
		t.Logf("as expected, e.g. round %d: %s: %s", v.round, v.kind, v.msg)
	}
	t.Logf("%s: acknowledged writes missing in %d of %d rounds (%d accounts in all; %d violations of any kind)",
		c.kind, len(caught), l.rounds, missing, len(l.violations))
	if len(caught) == 0 {
		t.Errorf("no acknowledged write found missing in %d rounds of a child that acknowledges before writing: the check cannot fail", l.rounds)
	}
}
