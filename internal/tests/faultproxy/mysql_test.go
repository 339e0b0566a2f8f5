package faultproxy

import (
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// myFixture is a table with one row (id 1, v 0), a connection straight to
// the server to check outcomes, and a proxy to connect through.
type myFixture struct {
	dsn    myDSN
	direct *myClient
	proxy  *Proxy
	trace  *traceLog
	addr   string // what clients going through the proxy dial
	table  string
}

// newMyFixture sets up a myFixture; with chop, a chopper sits on both
// sides of the proxy.
func newMyFixture(t *testing.T, chop bool) *myFixture {
	t.Helper()
	dsn, err := parseMyDSN(envDSN(t, mariaDBEnv, "root@tcp(127.0.0.1:3306)/test?parseTime=true"))
	require.NoError(t, err)
	f := &myFixture{dsn: dsn, table: uniqueName(t)}
	f.direct, err = dialMy(dsn.addr, dsn)
	require.NoError(t, err, "cannot reach MariaDB at %s", mariaDBEnv)
	t.Cleanup(f.direct.close)
	_, _, err = f.direct.query("CREATE TABLE " + f.table + " (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB")
	require.NoError(t, err)
	t.Cleanup(func() {
		f.direct.setTimeout(10 * time.Second)
		_, _, err := f.direct.query("DROP TABLE " + f.table)
		require.NoError(t, err)
	})
	_, _, err = f.direct.query("INSERT INTO " + f.table + " (id, v) VALUES (1, 0)")
	require.NoError(t, err)

	upstream := dsn.addr
	if chop {
		upstream = startChopper(t, upstream)
	}
	f.proxy, f.trace = startProxy(t, upstream, MySQL)
	f.addr = f.proxy.Addr()
	if chop {
		f.addr = startChopper(t, f.addr)
	}
	return f
}

// via logs in through the proxy.
func (f *myFixture) via(t *testing.T) *myClient {
	t.Helper()
	m, err := dialMy(f.addr, f.dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.conn.Close() })
	return m
}

// value reads the row's v straight from the server.
func (f *myFixture) value(t *testing.T) int {
	t.Helper()
	v, err := f.direct.queryInt("SELECT v FROM " + f.table + " WHERE id = 1")
	require.NoError(t, err)
	return v
}

// alive reports whether the server still has the connection m.
func (f *myFixture) alive(t *testing.T, m *myClient) bool {
	t.Helper()
	n, err := f.direct.queryInt("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = " + strconv.FormatUint(uint64(m.connID), 10))
	require.NoError(t, err)
	return n > 0
}

// myUpdate increments the row's v as go-sql-driver/mysql sends it in mode:
// "query" (no arguments: COM_QUERY) or "prepared" (arguments:
// COM_STMT_PREPARE, then COM_STMT_EXECUTE).
func myUpdate(m *myClient, table, mode string) error {
	if mode == "query" {
		_, _, err := m.query("UPDATE " + table + " SET v = v + 1 WHERE id = 1")
		return err
	}
	id, _, err := m.prepare("UPDATE " + table + " SET v = v + ? WHERE id = ?")
	if err != nil {
		return err
	}
	_, err = m.execute(id, 1, 1)
	return err
}

// TestMySQLForwardsAndTracksStatements prepares an UPDATE and a SELECT
// once and executes both 20 times; Skip 10 can fire on the 11th UPDATE
// only if the proxy maps each COM_STMT_EXECUTE's statement id to its SQL.
func TestMySQLForwardsAndTracksStatements(t *testing.T) {
	for _, chop := range []bool{false, true} {
		t.Run("chopped="+strconv.FormatBool(chop), func(t *testing.T) {
			f := newMyFixture(t, chop)
			f.proxy.Arm(Rule{Match: "update", Action: CutBefore, Skip: 10})
			update := "UPDATE " + f.table + " SET v = v + ? WHERE id = ?"
			selectV := "SELECT v FROM " + f.table + " WHERE id = ?"

			var m *myClient
			var upd, sel uint32
			connect := func() {
				m = f.via(t)
				var err error
				sel, _, err = m.prepare(selectV)
				require.NoError(t, err)
				upd, _, err = m.prepare(update)
				require.NoError(t, err)
			}
			connect()
			for i := 1; i <= 20; i++ {
				_, err := m.execute(upd, 1, 1)
				if i == 11 {
					require.Error(t, err, "execution %d", i)
					require.Equal(t, 10, f.value(t))
					connect()
				} else {
					require.NoError(t, err, "execution %d", i)
				}
				_, err = m.execute(sel, 1)
				require.NoError(t, err)
				got, err := m.queryInt("SELECT v FROM " + f.table + " WHERE id = 1")
				require.NoError(t, err)
				want := i
				if i >= 11 {
					want = i - 1
				}
				require.Equal(t, want, got)
			}
			require.Equal(t, 19, f.value(t))
			require.Equal(t, 1, f.proxy.Fired())
			require.Equal(t, 2, f.trace.count("COM_STMT_PREPARE ", update))
			require.Equal(t, 20, f.trace.count("COM_STMT_EXECUTE ", update))
			require.Equal(t, 20, f.trace.count("COM_STMT_EXECUTE ", selectV))
		})
	}
}

// TestMySQLCutBeforeUpdate: the client gets an error and the server never
// sees the statement.
func TestMySQLCutBeforeUpdate(t *testing.T) {
	for _, mode := range []string{"query", "prepared"} {
		t.Run(mode, func(t *testing.T) {
			f := newMyFixture(t, false)
			m := f.via(t)
			f.proxy.Arm(Rule{Match: "UPDATE", Action: CutBefore})
			err := myUpdate(m, f.table, mode)
			require.Error(t, err)
			t.Logf("client error: %v", err)
			require.Equal(t, 1, f.proxy.Fired())
			require.Zero(t, f.proxy.Conns())
			require.Eventually(t, func() bool { return !f.alive(t, m) }, 5*time.Second, 20*time.Millisecond)
			require.Equal(t, 0, f.value(t))
		})
	}
}

// TestMySQLCutAfterUpdate: the client gets an error, yet the server ran
// and committed the statement.
func TestMySQLCutAfterUpdate(t *testing.T) {
	for _, chop := range []bool{false, true} {
		for _, mode := range []string{"query", "prepared"} {
			t.Run(mode+"/chopped="+strconv.FormatBool(chop), func(t *testing.T) {
				f := newMyFixture(t, chop)
				m := f.via(t)
				f.proxy.Arm(Rule{Match: "UPDATE", Action: CutAfter})
				err := myUpdate(m, f.table, mode)
				require.Error(t, err)
				t.Logf("client error: %v", err)
				require.Equal(t, 1, f.proxy.Fired())
				require.Zero(t, f.proxy.Conns())
				eventually(t, func() bool { return f.value(t) == 1 }, "the UPDATE was applied")
				eventually(t, func() bool { return !f.alive(t, m) }, "the proxy closed the server side")
				require.Equal(t, 1, f.value(t))
			})
		}
	}
}

// TestMySQLCutAroundCommit cuts an explicit transaction's COMMIT; like
// go-sql-driver/mysql, the client sends START TRANSACTION and COMMIT as
// COM_QUERY.
func TestMySQLCutAroundCommit(t *testing.T) {
	for _, tc := range []struct {
		action Action
		want   int
	}{{CutBefore, 0}, {CutAfter, 1}} {
		t.Run(tc.action.String(), func(t *testing.T) {
			f := newMyFixture(t, false)
			m := f.via(t)
			_, _, err := m.query("START TRANSACTION")
			require.NoError(t, err)
			require.NoError(t, myUpdate(m, f.table, "prepared"))
			f.proxy.Arm(Rule{Match: "commit", Action: tc.action})
			_, _, err = m.query("COMMIT")
			require.Error(t, err)
			require.Equal(t, 1, f.proxy.Fired())
			// Once the server has dropped the connection the transaction
			// has ended either way, so v is final.
			eventually(t, func() bool { return !f.alive(t, m) }, "the server closed the transaction's connection")
			require.Equal(t, tc.want, f.value(t))
		})
	}
}

// TestMySQLBlackhole: the statement reaches the server, the client hears
// nothing and gives up at its deadline.
func TestMySQLBlackhole(t *testing.T) {
	f := newMyFixture(t, false)
	m := f.via(t)
	f.proxy.Arm(Rule{Match: "UPDATE", Action: Blackhole})
	m.setTimeout(300 * time.Millisecond)
	start := time.Now()
	err := myUpdate(m, f.table, "query")
	elapsed := time.Since(start)
	var ne net.Error
	require.True(t, errors.As(err, &ne) && ne.Timeout(), "want a timeout, got %v", err)
	require.Less(t, elapsed, 2*time.Second, "the client waits only for its deadline")
	require.Equal(t, 1, f.proxy.Fired())
	eventually(t, func() bool { return f.value(t) == 1 }, "the UPDATE was applied")
	eventually(t, func() bool { return !f.alive(t, m) }, "the proxy closed the server side")
	require.Equal(t, 1, f.proxy.Conns(), "the client side stays open and silent")
	_ = m.conn.Close()
	eventually(t, func() bool { return f.proxy.Conns() == 0 }, "the proxy saw the client leave")
}

// TestMySQLLatency: SetLatency slows every round trip down.
func TestMySQLLatency(t *testing.T) {
	f := newMyFixture(t, false)
	m := f.via(t)
	f.proxy.SetLatency(50 * time.Millisecond)
	start := time.Now()
	one, err := m.queryInt("SELECT 1")
	require.NoError(t, err)
	require.Greater(t, time.Since(start), 50*time.Millisecond)
	f.proxy.SetLatency(0)
	require.Equal(t, 1, one)
}

// TestMySQLCutAll: every connection ends; new ones go through the proxy.
func TestMySQLCutAll(t *testing.T) {
	f := newMyFixture(t, false)
	clients := []*myClient{f.via(t), f.via(t), f.via(t)}
	require.Equal(t, 3, f.proxy.Conns())
	f.proxy.CutAll()
	require.Zero(t, f.proxy.Conns())
	for _, m := range clients {
		_, err := m.queryInt("SELECT 1")
		require.Error(t, err, "a cut connection cannot be used")
	}
	m := f.via(t)
	require.NoError(t, myUpdate(m, f.table, "query"))
	require.NoError(t, myUpdate(m, f.table, "prepared"))
	require.Equal(t, 2, f.value(t))
	require.Equal(t, 1, f.proxy.Conns())
}
