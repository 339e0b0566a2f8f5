package faultproxy

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// codec follows one connection's wire protocol. Its methods are called
// from the connection's two pumps at once and synchronise themselves.
type codec interface {
	// frame returns the length of the whole client message at the start
	// of buf, 0 when buf does not hold a whole message yet, or -1 when buf
	// is not a message of the protocol; the codec is raw from then on.
	frame(buf []byte) int
	// client records one whole client message, in order, and reports the
	// SQL text it makes the server execute, if it does.
	client(msg []byte) (sql string, exec bool)
	// server records bytes the server sent, however they were split.
	server(b []byte)
	// raw reports whether the connection turned into a stream the codec
	// does not parse (TLS, compression); it is then forwarded as is.
	raw() bool
	// idle reports whether the server has answered (at least begun to
	// answer) every request forwarded to it.
	idle() bool
	// batchDone reports whether the last client message recorded ends a
	// batch the server acts on without waiting for more client messages.
	batchDone() bool
	// cancelTarget returns the backend key a PostgreSQL CancelRequest on
	// this connection names, or nil.
	cancelTarget() []byte
	// backendKey returns the key the server gave this connection for
	// cancelling its queries (PostgreSQL's BackendKeyData), or nil.
	backendKey() []byte
}

// connState is how far a connection is from plain forwarding.
type connState int

const (
	// forwarding passes everything both ways.
	forwarding connState = iota
	// severed: a CutAfter or Blackhole fired; no server byte reaches the
	// client and no further client byte reaches the server.
	severed
	// closed: both sides are closed.
	closed
)

// conn is one proxied connection: a client side, a server side and the
// codec that follows the protocol between them.
type conn struct {
	p      *Proxy
	client net.Conn
	server net.Conn
	codec  codec
	done   chan struct{} // closed when both sides are cut
	gone   chan struct{} // closed when the server side is closed
	opaque atomic.Bool   // counted in Proxy.Unparsed

	mu           sync.Mutex
	state        connState
	draining     bool // close the server side once the codec is idle
	clientClosed bool
	serverClosed bool
	grace        *time.Timer
}

func newConn(p *Proxy, client, server net.Conn) *conn {
	return &conn{
		p:      p,
		client: client,
		server: server,
		codec:  p.newCodec(),
		done:   make(chan struct{}),
		gone:   make(chan struct{}),
	}
}

// clientLoop forwards client bytes to the server, whole messages at a
// time, and applies the rules, until the client side ends.
func (c *conn) clientLoop() {
	buf := make([]byte, 32<<10)
	var pending []byte
	for {
		n, err := c.client.Read(buf)
		if n > 0 {
			pending = append(pending, buf[:n]...)
			var stop bool
			if pending, stop = c.fromClient(pending); stop {
				return
			}
		}
		if err != nil {
			c.clientGone()
			return
		}
	}
}

// fromClient handles the client bytes not yet forwarded and returns those
// that do not make a whole message yet, and whether the client side is
// done with.
func (c *conn) fromClient(pending []byte) (rest []byte, stop bool) {
	if c.currentState() != forwarding {
		return pending[:0], false // a Blackhole swallows the client's bytes
	}
	off := 0
	for off < len(pending) && !c.codec.raw() {
		n := c.codec.frame(pending[off:])
		if n <= 0 {
			break
		}
		sql, exec := c.codec.client(pending[off : off+n])
		if key := c.codec.cancelTarget(); key != nil {
			c.holdCancel(key)
		}
		if exec {
			if action, fired := c.p.match(sql); fired {
				return nil, c.fire(action, pending, off, off+n)
			}
		}
		off += n
	}
	if c.codec.raw() {
		c.noteRaw()
		off = len(pending)
	}
	if off > 0 && !c.forward(pending[:off]) {
		return nil, true
	}
	return append(pending[:0], pending[off:]...), false
}

// fire applies action to the connection whose client sent
// pending[start:end]; pending[:start] holds whole messages not yet
// forwarded. It reports whether the client side is done with.
func (c *conn) fire(action Action, pending []byte, start, end int) bool {
	if action == CutBefore {
		if start > 0 {
			c.forward(pending[:start])
		}
		c.cut()
		return true
	}

	// From here on no server byte reaches the client: sever before the
	// statement goes out, so its reply cannot slip through.
	c.mu.Lock()
	if c.state == forwarding {
		c.state = severed
	}
	c.mu.Unlock()
	if !c.forward(pending) {
		return true
	}
	c.finishBatch(pending, end)

	c.mu.Lock()
	c.draining = true
	if c.codec.idle() {
		c.closeServerLocked()
	} else if !c.serverClosed {
		c.grace = time.AfterFunc(ServerGrace, c.closeServer)
	}
	if action == CutAfter {
		c.closeClientLocked()
	}
	c.mu.Unlock()
	return action == CutAfter
}

// finishBatch forwards the client messages that complete the batch of a
// statement that fired (a PostgreSQL Sync that arrived in a later read),
// waiting at most batchWait for them. pending has been forwarded; off is
// where its unrecorded messages start.
func (c *conn) finishBatch(pending []byte, off int) {
	deadline := time.Now().Add(batchWait)
	buf := make([]byte, 32<<10)
	defer func() { _ = c.client.SetReadDeadline(time.Time{}) }()
	for {
		for !c.codec.raw() {
			n := c.codec.frame(pending[off:])
			if n <= 0 {
				break
			}
			c.codec.client(pending[off : off+n])
			off += n
		}
		if c.codec.raw() || (off == len(pending) && c.codec.batchDone()) {
			return
		}
		if err := c.client.SetReadDeadline(deadline); err != nil {
			return
		}
		n, err := c.client.Read(buf)
		if n > 0 {
			if !c.forward(buf[:n]) {
				return
			}
			pending = append(pending, buf[:n]...)
		}
		if err != nil {
			return
		}
	}
}

// holdCancel delays a PostgreSQL CancelRequest aimed at a connection that
// a CutAfter or Blackhole severed until the proxy has closed that
// connection's server side (at most ServerGrace). pgx sends one as soon as
// it loses a connection; let through, it could cancel the very statement
// the rule let through, and whether that statement ran would depend on
// timing. A CancelRequest for any other connection goes through at once.
func (c *conn) holdCancel(key []byte) {
	for _, t := range c.p.connsSnapshot() {
		if t == c || !bytes.Equal(t.codec.backendKey(), key) || t.currentState() != severed {
			continue
		}
		select {
		case <-t.gone:
		case <-c.done:
		}
		return
	}
}

// noteRaw counts the connection in Proxy.Unparsed once it has turned
// opaque; a CancelRequest's connection carries no statements and does not
// count.
func (c *conn) noteRaw() {
	if c.codec.cancelTarget() == nil && c.opaque.CompareAndSwap(false, true) {
		c.p.unparsed.Add(1)
	}
}

// forward writes client bytes to the server after the proxy's latency,
// and reports whether it did.
func (c *conn) forward(b []byte) bool {
	if d := c.p.currentLatency(); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-c.done:
			t.Stop()
			return false
		}
	}
	if _, err := c.server.Write(b); err != nil {
		c.cut()
		return false
	}
	return true
}

// serverLoop forwards server bytes to the client while the connection is
// not severed, and otherwise drains them, until the server side ends.
func (c *conn) serverLoop() {
	buf := make([]byte, 32<<10)
	for {
		n, err := c.server.Read(buf)
		if n > 0 {
			c.codec.server(buf[:n]) // before reading the state: see fire
			if c.codec.raw() {
				c.noteRaw()
			}
			c.mu.Lock()
			state, draining := c.state, c.draining
			if state == severed && draining && c.codec.idle() {
				c.closeServerLocked()
			}
			c.mu.Unlock()
			if state == forwarding {
				if _, werr := c.client.Write(buf[:n]); werr != nil && c.currentState() == forwarding {
					c.cut()
				}
			}
		}
		if err != nil {
			c.serverGone()
			return
		}
	}
}

func (c *conn) currentState() connState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

// clientGone handles the end of the client side: a client that leaves a
// plain connection ends it; one that gives up on a severed connection
// leaves the server side to finish draining.
func (c *conn) clientGone() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == forwarding {
		c.cutLocked()
		return
	}
	c.closeClientLocked()
}

// serverGone handles the end of the server side: on a plain connection
// the client sees the server leave; a severed client keeps waiting.
func (c *conn) serverGone() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == forwarding {
		c.cutLocked()
		return
	}
	c.closeServerLocked()
}

// cut closes both sides at once.
func (c *conn) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cutLocked()
}

func (c *conn) cutLocked() {
	if c.state != closed {
		c.state = closed
		close(c.done)
	}
	c.closeClientLocked()
	c.closeServerLocked()
}

func (c *conn) closeServer() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closeServerLocked()
}

func (c *conn) closeServerLocked() {
	if c.grace != nil {
		c.grace.Stop()
		c.grace = nil
	}
	if !c.serverClosed {
		c.serverClosed = true
		_ = c.server.Close()
		close(c.gone)
	}
}

func (c *conn) closeClientLocked() {
	if !c.clientClosed {
		c.clientClosed = true
		c.p.open.Add(-1) // before the client can see the close
		_ = c.client.Close()
	}
}

// finish releases what is left once both pumps have returned.
func (c *conn) finish() { c.cut() }
