// Package faultproxy is an in-process TCP proxy for PostgreSQL and
// MySQL/MariaDB connections that cuts or stalls a connection at an exact
// protocol point: just before or just after the client sends a chosen SQL
// statement to the server. Reliability tests use it to check that a write
// the server never received is reported as not applied, and that one whose
// outcome the client cannot know is reported as unknown.
//
// The proxy reads enough of each wire protocol to know which SQL text a
// client message makes the server execute:
//
//   - PostgreSQL v3: a simple Query ('Q') executes its own text; an Execute
//     ('E') executes the portal it names, which a Bind ('B') made from a
//     statement that a Parse ('P') prepared, possibly much earlier on the
//     same connection (pgx prepares a statement once per connection and
//     afterwards sends only Bind and Execute).
//   - MySQL/MariaDB: COM_QUERY executes its own text; COM_STMT_EXECUTE
//     executes a statement id that the server assigned in its reply to
//     COM_STMT_PREPARE. Packets count as commands only after the server has
//     accepted the login with an OK packet, so the handshake and any
//     authentication exchange are never mistaken for commands.
//
// Each proxied connection holds a client message until it has arrived
// whole, so the server never sees part of a message the proxy decided to
// withhold. Connections that switch to TLS or to the compressed MySQL
// protocol are forwarded unparsed, and rules never fire on them; Unparsed
// counts them.
//
// When pgx loses a connection it sends a PostgreSQL CancelRequest on a new
// one. The proxy holds back a CancelRequest aimed at a connection that
// CutAfter or Blackhole severed until that connection's server side is
// closed, so that it cannot cancel the statement the rule let through and
// the outcome does not depend on timing. Other CancelRequests pass at once.
package faultproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ServerGrace is how long, after CutAfter or Blackhole fired, the proxy
// keeps the server side of the connection open for the server to answer
// what it was sent. The server side is closed as soon as the answer arrives,
// or after ServerGrace if it does not, so a statement that was sent really
// runs (and, outside a transaction, commits) on the server.
const ServerGrace = 2 * time.Second

// batchWait is how long CutAfter and Blackhole wait for the rest of a
// client's batch (PostgreSQL's Sync after the Execute that fired) when it
// did not arrive in the same read.
const batchWait = 500 * time.Millisecond

// dialTimeout bounds connecting to the upstream server.
const dialTimeout = 5 * time.Second

// Protocol is the wire protocol a Proxy understands.
type Protocol int

// The supported wire protocols.
const (
	// Postgres is the PostgreSQL frontend/backend protocol version 3.
	Postgres Protocol = iota + 1
	// MySQL is the MySQL client/server protocol, which MariaDB speaks too.
	MySQL
)

// String returns the protocol's name.
func (p Protocol) String() string {
	switch p {
	case Postgres:
		return "postgres"
	case MySQL:
		return "mysql"
	}
	return fmt.Sprintf("Protocol(%d)", int(p))
}

// Action is what a Rule does to the connection whose message it matched.
type Action int

// The actions.
const (
	// CutBefore withholds the matching message and everything after it,
	// and closes the client and server sides at once: the server never
	// sees the statement. Messages of the same read that came before it
	// (a PostgreSQL Bind before the Execute) are forwarded.
	CutBefore Action = iota + 1
	// CutAfter forwards the matching message and the rest of its batch
	// (everything the client sent in the same read, and for PostgreSQL at
	// least up to the next Sync or Flush, waiting up to half a second for
	// it), then closes the client side without delivering any server
	// reply. The server side stays open until the server has answered
	// everything it was sent (PostgreSQL: a ReadyForQuery for every Sync
	// and Query; MySQL: the first packet of the command's reply), at most
	// ServerGrace: the statement was sent, runs to its end, and the client
	// cannot know its outcome.
	CutAfter
	// Blackhole forwards like CutAfter, but leaves the client connection
	// open and silent: no further server bytes reach it and no further
	// client bytes reach the server. The client waits until its own
	// deadline, CutAll or Close. The server side is closed as for CutAfter.
	Blackhole
)

// String returns the action's name.
func (a Action) String() string {
	switch a {
	case CutBefore:
		return "CutBefore"
	case CutAfter:
		return "CutAfter"
	case Blackhole:
		return "Blackhole"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Rule picks client messages that execute SQL and applies an Action to
// their connection.
type Rule struct {
	// Match is a case-insensitive substring of the SQL text, such as
	// "UPDATE" or "commit". An empty Match matches every statement,
	// including a driver's own pings (pgx sends "-- ping").
	Match string
	// Action is what happens to the connection when the rule fires.
	Action Action
	// Times is how many times the rule fires before it is used up; zero
	// or less means once.
	Times int
	// Skip is how many matching messages pass untouched before the rule
	// first fires.
	Skip int
}

// armed is a Rule with its remaining counts.
type armed struct {
	Rule
	skip, left int
}

// Proxy forwards TCP connections from a local address to one upstream
// database server and injects the faults its rules describe. Its methods
// are safe for concurrent use.
type Proxy struct {
	upstream string
	proto    Protocol
	ln       net.Listener
	wg       sync.WaitGroup
	open     atomic.Int64 // client sides not yet closed
	unparsed atomic.Int64 // connections that became opaque

	// ctx ends when the proxy closes, cutting short a dial upstream.
	ctx    context.Context
	cancel context.CancelFunc

	// trace, when set, is told about every client message the codec
	// recognises; tests use it to see a driver's message pattern.
	trace func(event string)

	mu      sync.Mutex
	rules   []armed
	fired   int
	latency time.Duration
	conns   map[*conn]struct{}
	closed  bool
}

// Start listens on a free port of 127.0.0.1 and forwards every connection
// it accepts to upstream ("host:port"), parsing it as proto. Close the
// returned Proxy to stop it.
func Start(upstream string, proto Protocol) (*Proxy, error) {
	return start(upstream, proto, nil)
}

func start(upstream string, proto Protocol, trace func(string)) (*Proxy, error) {
	if proto != Postgres && proto != MySQL {
		return nil, fmt.Errorf("faultproxy: unknown protocol %v", proto)
	}
	if _, _, err := net.SplitHostPort(upstream); err != nil {
		return nil, fmt.Errorf("faultproxy: upstream address: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &Proxy{
		upstream: upstream,
		proto:    proto,
		ln:       ln,
		trace:    trace,
		conns:    make(map[*conn]struct{}),
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr returns the "host:port" that clients dial instead of the upstream
// server.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Close stops accepting connections, closes every open connection on both
// sides, and returns once all of the proxy's goroutines have ended.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	err := p.ln.Close()
	p.CutAll()
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// Arm adds a rule. Rules are used in the order they were armed: only the
// first rule that is not used up looks at statements, and the next one
// takes over once it has fired Times times. Rules apply to every
// connection of the proxy, including ones already open. Arm panics on an
// unknown Action.
func (p *Proxy) Arm(r Rule) {
	if r.Action != CutBefore && r.Action != CutAfter && r.Action != Blackhole {
		panic(fmt.Sprintf("faultproxy: Arm: unknown action %v", r.Action))
	}
	left := r.Times
	if left <= 0 {
		left = 1
	}
	p.mu.Lock()
	p.rules = append(p.rules, armed{Rule: r, skip: r.Skip, left: left})
	p.mu.Unlock()
}

// Disarm drops every rule that has not fired yet.
func (p *Proxy) Disarm() {
	p.mu.Lock()
	p.rules = nil
	p.mu.Unlock()
}

// Fired returns how many times rules have fired so far.
func (p *Proxy) Fired() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fired
}

// SetLatency holds every batch of client bytes (everything one read from
// the client returned) for d before forwarding it to the server, so each
// round trip takes at least d longer. Server replies are not delayed. Zero
// turns the delay off.
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = d
	p.mu.Unlock()
}

// connsSnapshot returns the open connections.
func (p *Proxy) connsSnapshot() []*conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	conns := make([]*conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	return conns
}

// CutAll closes both sides of every open connection at once, as a network
// partition or a server crash would look to the client. The proxy keeps
// accepting new connections.
func (p *Proxy) CutAll() {
	for _, c := range p.connsSnapshot() {
		c.cut()
	}
}

// Conns returns how many client connections are open: accepted and not yet
// closed by either the client or the proxy.
func (p *Proxy) Conns() int { return int(p.open.Load()) }

// Unparsed returns how many connections the proxy has forwarded without
// reading them because they switched to TLS, GSS encryption or MySQL
// compression. Rules never fire on such connections: a test that arms
// rules should connect without encryption (sslmode=disable, tls=false)
// and can check that Unparsed is zero.
func (p *Proxy) Unparsed() int { return int(p.unparsed.Load()) }

// match consults the first pending rule about a statement the client is
// sending and reports the action to take, if it fires.
func (p *Proxy) match(sql string) (Action, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.rules) == 0 {
		return 0, false
	}
	r := &p.rules[0]
	if !strings.Contains(strings.ToLower(sql), strings.ToLower(r.Match)) {
		return 0, false
	}
	if r.skip > 0 {
		r.skip--
		return 0, false
	}
	p.fired++
	action := r.Action
	if r.left--; r.left <= 0 {
		p.rules = p.rules[1:]
	}
	return action, true
}

func (p *Proxy) currentLatency() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.latency
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			time.Sleep(10 * time.Millisecond) // e.g. out of file descriptors
			continue
		}
		p.wg.Add(1)
		go p.handle(client)
	}
}

// handle proxies one accepted client connection until both sides close.
func (p *Proxy) handle(client net.Conn) {
	defer p.wg.Done()
	d := net.Dialer{Timeout: dialTimeout}
	server, err := d.DialContext(p.ctx, "tcp", p.upstream)
	if err != nil {
		_ = client.Close()
		return
	}
	c := newConn(p, client, server)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		_ = client.Close()
		_ = server.Close()
		return
	}
	p.conns[c] = struct{}{}
	p.open.Add(1)
	p.mu.Unlock()

	done := make(chan struct{})
	go func() {
		defer close(done)
		c.serverLoop()
	}()
	c.clientLoop()
	<-done
	c.finish()

	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

func (p *Proxy) newCodec() codec {
	if p.proto == MySQL {
		return newMySQLCodec(p.trace)
	}
	return newPostgresCodec(p.trace)
}
