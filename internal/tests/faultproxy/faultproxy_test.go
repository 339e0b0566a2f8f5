package faultproxy

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"math/big"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"
)

// Environment variables naming the test servers.
const (
	postgresEnv = "GORMLOCK_POSTGRES_DSN"
	mariaDBEnv  = "GORMLOCK_MARIADB_DSN"
)

// envDSN returns the DSN in the environment variable name, skipping the
// test when it is unset, or failing it under CI=true.
func envDSN(t *testing.T, name, example string) string {
	t.Helper()
	dsn := os.Getenv(name)
	if dsn == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but %s is not set; CI must run the fault-injection tests", name)
		}
		t.Skipf("skipped: set %s=%s to run this test", name, example)
	}
	return dsn
}

// traceLog collects a proxy's trace of client messages.
type traceLog struct {
	mu     sync.Mutex
	events []string
}

func (l *traceLog) add(e string) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

// count returns how many events start with prefix and contain substr.
func (l *traceLog) count(prefix, substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.events {
		if strings.HasPrefix(e, prefix) && strings.Contains(e, substr) {
			n++
		}
	}
	return n
}

func (l *traceLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.events, "\n")
}

// startProxy starts a tracing proxy that the test closes when it ends.
func startProxy(t *testing.T, upstream string, proto Protocol) (*Proxy, *traceLog) {
	t.Helper()
	log := &traceLog{}
	p, err := start(upstream, proto, log.add)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, p.Close())
		require.Zero(t, p.Conns(), "connections left open after Close")
		require.Zero(t, p.Unparsed(), "connections the proxy could not read")
		if t.Failed() || testing.Verbose() {
			t.Logf("client messages:\n%s", log)
		}
	})
	return p, log
}

// uniqueName returns a fresh table name.
func uniqueName(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return "fp_" + hex.EncodeToString(b)
}

// eventually polls cond every 20 ms until it holds or 5 s have passed.
func eventually(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 5s: %s", msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startChopper relays connections to target and re-splits the bytes of
// both directions into writes of 1 to 7 bytes, so that the proxy behind
// or in front of it sees messages torn across many reads. It returns the
// address to dial.
func startChopper(t *testing.T, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	track := func(c net.Conn) {
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
	}
	chop := func(dst, src net.Conn) {
		defer wg.Done()
		defer func() { _ = dst.Close(); _ = src.Close() }()
		buf := make([]byte, 4096)
		for {
			n, err := src.Read(buf)
			for b := buf[:n]; len(b) > 0; {
				k, _ := rand.Int(rand.Reader, big.NewInt(7))
				m := min(int(k.Int64())+1, len(b))
				if _, werr := dst.Write(b[:m]); werr != nil {
					return
				}
				b = b[m:]
			}
			if err != nil {
				return
			}
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			track(c)
			track(s)
			wg.Add(2)
			go chop(s, c)
			go chop(c, s)
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// pgFixture is a table with one row (id 1, v 0), a connection straight to
// the server to check outcomes, and one through a proxy.
type pgFixture struct {
	direct *sql.DB
	via    *sql.DB
	proxy  *Proxy
	trace  *traceLog
	table  string
}

// newPGFixture sets up a pgFixture; with chop, a chopper sits on both
// sides of the proxy.
func newPGFixture(t *testing.T, chop bool) *pgFixture {
	t.Helper()
	dsn := envDSN(t, postgresEnv, "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	cfg, err := pgconn.ParseConfig(dsn)
	require.NoError(t, err)
	upstream := net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))

	f := &pgFixture{table: uniqueName(t)}
	f.direct, err = sql.Open("pgx", dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.direct.Close() })
	ctx := testCtx(t)
	_, err = f.direct.ExecContext(ctx, "CREATE TABLE "+f.table+" (id int PRIMARY KEY, v int NOT NULL)")
	require.NoError(t, err, "cannot reach PostgreSQL at %s=%q", postgresEnv, dsn)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := f.direct.ExecContext(ctx, "DROP TABLE "+f.table)
		require.NoError(t, err)
	})
	_, err = f.direct.ExecContext(ctx, "INSERT INTO "+f.table+" (id, v) VALUES (1, 0)")
	require.NoError(t, err)

	if chop {
		upstream = startChopper(t, upstream)
	}
	f.proxy, f.trace = startProxy(t, upstream, Postgres)
	addr := f.proxy.Addr()
	if chop {
		addr = startChopper(t, addr)
	}
	f.via, err = sql.Open("pgx", pgDSNVia(dsn, addr, f.table))
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.via.Close() })
	return f
}

// pgDSNVia rewrites a PostgreSQL DSN (URL or keyword/value form) to dial
// addr, without TLS, which the proxy cannot read, and with the given
// application_name.
func pgDSNVia(dsn, addr, app string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Host = addr
		q := u.Query()
		q.Set("sslmode", "disable")
		q.Set("application_name", app)
		u.RawQuery = q.Encode()
		return u.String()
	}
	host, port, _ := net.SplitHostPort(addr)
	return dsn + " host=" + host + " port=" + port + " sslmode=disable application_name=" + app
}

// value reads the row's v straight from the server.
func (f *pgFixture) value(t *testing.T) int {
	t.Helper()
	var v int
	require.NoError(t, f.direct.QueryRowContext(testCtx(t), "SELECT v FROM "+f.table+" WHERE id = 1").Scan(&v))
	return v
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestPostgresForwardsAndTracksStatements runs many statements on one
// connection; pgx prepares the UPDATE once and then only binds and
// executes it by name, so Skip 10 can fire on the 11th execution only if
// the proxy attributes each Execute to the UPDATE through the name.
func TestPostgresForwardsAndTracksStatements(t *testing.T) {
	for _, chop := range []bool{false, true} {
		t.Run("chopped="+strconv.FormatBool(chop), func(t *testing.T) {
			f := newPGFixture(t, chop)
			ctx := testCtx(t)
			f.via.SetMaxOpenConns(1)
			f.proxy.Arm(Rule{Match: "update", Action: CutBefore, Skip: 10})
			update := "UPDATE " + f.table + " SET v = v + $1 WHERE id = $2"

			for i := 1; i <= 20; i++ {
				_, err := f.via.ExecContext(ctx, update, 1, 1)
				var got int
				require.NoError(t, f.via.QueryRowContext(ctx, "SELECT v FROM "+f.table+" WHERE id = $1", 1).Scan(&got))
				if i == 11 {
					require.Error(t, err, "execution %d", i)
					require.Equal(t, 10, f.value(t))
					continue
				}
				require.NoError(t, err, "execution %d", i)
				want := i
				if i > 11 {
					want = i - 1
				}
				require.Equal(t, want, got)
			}
			var n int
			require.NoError(t, f.via.QueryRowContext(ctx, "SELECT count(*) FROM "+f.table).Scan(&n))
			require.Equal(t, 1, n)

			require.Equal(t, 19, f.value(t))
			require.Equal(t, 1, f.proxy.Fired())
			// Parse once per connection (the cut made database/sql open a
			// second one), Execute every time.
			require.Equal(t, 2, f.trace.count("P ", update))
			require.Equal(t, 20, f.trace.count("E ", update))
		})
	}
}

// execer is a *sql.DB or a *sql.Conn.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// pgUpdate increments the row's v the way pgx sends it in mode: "simple"
// (no arguments: a simple Query) or "extended" (arguments: Parse once,
// then Bind and Execute).
func pgUpdate(ctx context.Context, db execer, table, mode string) error {
	var err error
	if mode == "simple" {
		_, err = db.ExecContext(ctx, "UPDATE "+table+" SET v = v + 1 WHERE id = 1")
	} else {
		_, err = db.ExecContext(ctx, "UPDATE "+table+" SET v = v + $1 WHERE id = $2", 1, 1)
	}
	return err
}

// pin returns one connection of f.via, so that database/sql cannot retry a
// failed statement on another (see TestPgxRetriesSimpleQueryAfterCut).
func (f *pgFixture) pin(t *testing.T) *sql.Conn {
	t.Helper()
	c, err := f.via.Conn(testCtx(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.PingContext(testCtx(t)))
	return c
}

// TestPostgresCutBeforeUpdate: the client gets an error and the server
// never sees the statement.
func TestPostgresCutBeforeUpdate(t *testing.T) {
	for _, mode := range []string{"simple", "extended"} {
		t.Run(mode, func(t *testing.T) {
			f := newPGFixture(t, false)
			ctx := testCtx(t)
			c := f.pin(t)
			f.proxy.Arm(Rule{Match: "UPDATE", Action: CutBefore})
			err := pgUpdate(ctx, c, f.table, mode)
			require.Error(t, err)
			t.Logf("client error: %v", err)
			require.Equal(t, 1, f.proxy.Fired())
			// Not at once: pgx sends a CancelRequest on a connection of
			// its own when it loses one.
			eventually(t, func() bool { return f.proxy.Conns() == 0 }, "the proxy closed the client side")
			eventually(t, func() bool { return f.serverConns(t) == 0 }, "the server closed the connection")
			require.Equal(t, 0, f.value(t))
		})
	}
}

// TestPostgresCutAfterUpdate: the client gets an error, yet the server ran
// and committed the statement.
func TestPostgresCutAfterUpdate(t *testing.T) {
	for _, chop := range []bool{false, true} {
		for _, mode := range []string{"simple", "extended"} {
			t.Run(mode+"/chopped="+strconv.FormatBool(chop), func(t *testing.T) {
				f := newPGFixture(t, chop)
				ctx := testCtx(t)
				c := f.pin(t)
				f.proxy.Arm(Rule{Match: "UPDATE", Action: CutAfter})
				err := pgUpdate(ctx, c, f.table, mode)
				require.Error(t, err)
				t.Logf("client error: %v", err)
				require.Equal(t, 1, f.proxy.Fired())
				eventually(t, func() bool { return f.value(t) == 1 }, "the UPDATE was applied")
				eventually(t, func() bool { return f.serverConns(t) == 0 }, "the proxy closed the server side")
				require.Equal(t, 1, f.value(t))
			})
		}
	}
}

// TestPgxRetriesSimpleQueryAfterCut records a pgx v5.12 hazard the proxy
// exposes: when the connection is lost after a simple-protocol statement
// was sent, pgx reports "conn closed", an error it calls safe to retry, so
// database/sql runs the statement again on a new connection and reports
// success for an UPDATE that was applied twice. Statements with arguments
// (the extended protocol) are not affected. If this test fails, pgx has
// changed; gormlock's handling of lost connections should be re-checked.
func TestPgxRetriesSimpleQueryAfterCut(t *testing.T) {
	f := newPGFixture(t, false)
	ctx := testCtx(t)
	require.NoError(t, f.via.PingContext(ctx))
	f.proxy.Arm(Rule{Match: "UPDATE", Action: CutAfter})
	require.NoError(t, pgUpdate(ctx, f.via, f.table, "simple"), "database/sql retried the statement")
	require.Equal(t, 2, f.trace.count("Q ", "UPDATE"))
	eventually(t, func() bool { return f.value(t) == 2 }, "the UPDATE was applied twice")
	require.Equal(t, 2, f.value(t))
}

// TestPostgresCutAroundCommit cuts an explicit transaction's COMMIT, which
// pgx sends as the simple query "commit".
func TestPostgresCutAroundCommit(t *testing.T) {
	for _, tc := range []struct {
		action Action
		want   int
	}{{CutBefore, 0}, {CutAfter, 1}} {
		t.Run(tc.action.String(), func(t *testing.T) {
			f := newPGFixture(t, false)
			ctx := testCtx(t)
			tx, err := f.via.BeginTx(ctx, nil)
			require.NoError(t, err)
			_, err = tx.ExecContext(ctx, "UPDATE "+f.table+" SET v = v + $1 WHERE id = $2", 1, 1)
			require.NoError(t, err)
			f.proxy.Arm(Rule{Match: "commit", Action: tc.action})
			err = tx.Commit()
			require.Error(t, err)
			t.Logf("commit error: %v (pgconn.SafeToRetry: %v)", err, pgconn.SafeToRetry(err))
			require.Equal(t, 1, f.proxy.Fired())
			require.Equal(t, 1, f.trace.count("Q ", "begin"), "pgx sends BEGIN as a simple query")
			// Once the server has closed the connection the transaction
			// has ended either way, so v is final.
			eventually(t, func() bool { return f.serverConns(t) == 0 }, "the server closed the transaction's connection")
			require.Equal(t, tc.want, f.value(t))
		})
	}
}

// serverConns counts the server's connections that came through the
// proxy, by their application_name.
func (f *pgFixture) serverConns(t *testing.T) int {
	t.Helper()
	var n int
	require.NoError(t, f.direct.QueryRowContext(testCtx(t),
		"SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", f.table).Scan(&n))
	return n
}

// TestPostgresBlackhole: the statement reaches the server, the client hears
// nothing and gives up when its context ends.
func TestPostgresBlackhole(t *testing.T) {
	f := newPGFixture(t, false)
	require.NoError(t, f.via.PingContext(testCtx(t)))
	f.proxy.Arm(Rule{Match: "UPDATE", Action: Blackhole})

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := pgUpdate(ctx, f.via, f.table, "extended")
	elapsed := time.Since(start)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, elapsed, 2*time.Second, "the client waits only for its context")
	require.Equal(t, 1, f.proxy.Fired())
	eventually(t, func() bool { return f.value(t) == 1 }, "the UPDATE was applied")
	// pgx keeps the socket for up to 15 s after giving up, waiting for
	// the server to close it; the blackholed side stays open meanwhile.
	// (pgx also sends a CancelRequest, on a connection of its own.)
	require.GreaterOrEqual(t, f.proxy.Conns(), 1)
}

// TestPostgresLatency: SetLatency slows every round trip down.
func TestPostgresLatency(t *testing.T) {
	f := newPGFixture(t, false)
	ctx := testCtx(t)
	require.NoError(t, f.via.PingContext(ctx))
	f.proxy.SetLatency(50 * time.Millisecond)
	start := time.Now()
	var one int
	require.NoError(t, f.via.QueryRowContext(ctx, "SELECT 1").Scan(&one))
	require.Greater(t, time.Since(start), 50*time.Millisecond)
	f.proxy.SetLatency(0)
	require.Equal(t, 1, one)
}

// TestPostgresCutAll: every connection ends; database/sql then opens new
// ones through the proxy.
func TestPostgresCutAll(t *testing.T) {
	f := newPGFixture(t, false)
	ctx := testCtx(t)
	conns := make([]*sql.Conn, 3)
	for i := range conns {
		c, err := f.via.Conn(ctx)
		require.NoError(t, err)
		require.NoError(t, c.PingContext(ctx))
		conns[i] = c
	}
	require.Equal(t, 3, f.proxy.Conns())

	f.proxy.CutAll()
	require.Zero(t, f.proxy.Conns())
	for _, c := range conns {
		_, err := c.ExecContext(ctx, "SELECT 1")
		require.Error(t, err, "a cut connection cannot be used")
		_ = c.Close()
	}

	for _, mode := range []string{"simple", "extended"} {
		require.NoError(t, pgUpdate(ctx, f.via, f.table, mode))
	}
	require.Equal(t, 2, f.value(t))
	require.GreaterOrEqual(t, f.proxy.Conns(), 1)
}

// TestPostgresCancelRequestPassesThrough: a CancelRequest, which pgx sends
// on a connection of its own, reaches the server.
func TestPostgresCancelRequestPassesThrough(t *testing.T) {
	f := newPGFixture(t, false)
	dsn := envDSN(t, postgresEnv, "")
	cfg, err := pgconn.ParseConfig(pgDSNVia(dsn, f.proxy.Addr(), f.table))
	require.NoError(t, err)
	ctx := testCtx(t)
	pc, err := pgconn.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	defer pc.Close(ctx)

	done := make(chan error, 1)
	go func() {
		done <- pc.Exec(ctx, "SELECT pg_sleep(30)").Close()
	}()
	eventually(t, func() bool { return f.proxy.Conns() == 1 && f.trace.count("Q ", "pg_sleep") == 1 }, "the sleep was sent")
	time.Sleep(100 * time.Millisecond)
	require.NoError(t, pc.CancelRequest(ctx))
	select {
	case err := <-done:
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr)
		require.Equal(t, "57014", pgErr.Code) // query_canceled
	case <-time.After(10 * time.Second):
		t.Fatal("the cancel request did not reach the server")
	}
}

// TestPostgresTLSIsForwardedUnparsed: a client that asks for TLS gets it
// from the server through the proxy, which then cannot read the
// connection: no rule fires, and Unparsed says so.
func TestPostgresTLSIsForwardedUnparsed(t *testing.T) {
	dsn := envDSN(t, postgresEnv, "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	cfg, err := pgconn.ParseConfig(dsn)
	require.NoError(t, err)
	p, err := Start(net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))), Postgres)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	p.Arm(Rule{Action: CutBefore}) // would cut the first statement

	db, err := sql.Open("pgx", strings.ReplaceAll(pgDSNVia(dsn, p.Addr(), "faultproxy_tls"), "sslmode=disable", "sslmode=require"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	ctx := testCtx(t)
	var ssl bool
	if err := db.QueryRowContext(ctx, "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&ssl); err != nil {
		if strings.Contains(err.Error(), "refused TLS") {
			t.Skipf("skipped: the PostgreSQL server at %s has no TLS", postgresEnv)
		}
		require.NoError(t, err)
	}
	require.True(t, ssl)
	require.Zero(t, p.Fired())
	require.Equal(t, 1, p.Unparsed())
}
