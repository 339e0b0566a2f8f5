package faultproxy

import (
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRulesFireInOrder: only the first rule that is not used up looks at
// statements; Skip and Times count its matches.
func TestRulesFireInOrder(t *testing.T) {
	p, err := Start("127.0.0.1:1", Postgres)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })

	p.Arm(Rule{Match: "update", Action: CutAfter, Skip: 1, Times: 2})
	p.Arm(Rule{Match: "COMMIT", Action: CutBefore})

	steps := []struct {
		sql    string
		fired  bool
		action Action
	}{
		{"commit", false, 0},                   // the first rule is still armed
		{"UPDATE t SET v = 1", false, 0},       // skipped
		{"select 1", false, 0},                 // no match
		{"UPDATE t SET v = 2", true, CutAfter}, // fires, once more to go
		{"update t set v = 3", true, CutAfter}, // used up
		{"UPDATE t SET v = 4", false, 0},       // the second rule's turn
		{"Commit", true, CutBefore},
		{"commit", false, 0}, // no rules left
	}
	for i, s := range steps {
		action, fired := p.match(s.sql)
		require.Equal(t, s.fired, fired, "step %d: %s", i, s.sql)
		require.Equal(t, s.action, action, "step %d: %s", i, s.sql)
	}
	require.Equal(t, 3, p.Fired())
}

// TestEmptyMatchMatchesEverything: a rule without Match fires on the next
// statement, whatever it is.
func TestEmptyMatchMatchesEverything(t *testing.T) {
	p, err := Start("127.0.0.1:1", MySQL)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	p.Arm(Rule{Action: Blackhole})
	action, fired := p.match("")
	require.True(t, fired)
	require.Equal(t, Blackhole, action)
}

func TestStartRejectsBadArguments(t *testing.T) {
	_, err := Start("127.0.0.1:5432", Protocol(0))
	require.ErrorContains(t, err, "unknown protocol")
	_, err = Start("no port", Postgres)
	require.ErrorContains(t, err, "upstream address")
}

func TestArmPanicsOnUnknownAction(t *testing.T) {
	p, err := Start("127.0.0.1:1", Postgres)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	require.Panics(t, func() { p.Arm(Rule{Match: "x"}) })
}

// TestUnreachableUpstream: a client whose upstream cannot be reached is
// disconnected, and Close still returns.
func TestUnreachableUpstream(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now

	p, err := Start(addr, Postgres)
	require.NoError(t, err)
	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	_, err = c.Read(make([]byte, 1))
	require.Error(t, err, "the proxy hangs up")
	require.NoError(t, c.Close())
	require.NoError(t, p.Close())
	require.NoError(t, p.Close(), "Close twice")
	require.Zero(t, p.Conns())
}
