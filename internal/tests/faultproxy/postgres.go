package faultproxy

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"
)

// Request codes a PostgreSQL client can send in place of a startup
// message.
const (
	pgCancelRequest = 80877102
	pgSSLRequest    = 80877103
	pgGSSENCRequest = 80877104
)

// pgMaxKey bounds the BackendKeyData the codec keeps (4 bytes of process
// id and, since protocol 3.2, up to 256 bytes of secret key).
const pgMaxKey = 260

// pgMaxMessage bounds a client message's length; anything larger is taken
// for a stream the codec does not understand.
const pgMaxMessage = 1 << 30

// postgresCodec follows the PostgreSQL v3 protocol: it maps prepared
// statement names and portals to their SQL text, so that an Execute can be
// attributed to the statement it runs, and counts the requests the server
// has still to answer with ReadyForQuery.
type postgresCodec struct {
	trace func(string)

	mu         sync.Mutex
	startup    bool              // the next client message has no type byte
	answerByte bool              // the server answers with one untyped byte (SSLRequest, GSSENCRequest)
	isRaw      bool              // TLS or GSS encryption, or not PostgreSQL
	pendingZ   int               // requests awaiting ReadyForQuery
	lastType   byte              // the last client message's type
	statements map[string]string // prepared statement name -> SQL
	portals    map[string]string // portal name -> SQL
	cancelKey  []byte            // the backend a CancelRequest names
	key        []byte            // the server's BackendKeyData: process id and secret key
	hdr        [5]byte           // a server message header being read
	hdrLen     int
	bodyLeft   int // bytes of the current server message still to skip
	keyLeft    int // bytes of BackendKeyData still to collect
}

func newPostgresCodec(trace func(string)) *postgresCodec {
	return &postgresCodec{
		trace:      trace,
		startup:    true,
		statements: make(map[string]string),
		portals:    make(map[string]string),
	}
}

func (pc *postgresCodec) frame(buf []byte) int {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	var n int
	if pc.startup {
		if len(buf) < 4 {
			return 0
		}
		n = int(binary.BigEndian.Uint32(buf))
		if n < 8 || n > pgMaxMessage {
			pc.isRaw = true
			return -1
		}
	} else {
		if len(buf) < 5 {
			return 0
		}
		l := int(binary.BigEndian.Uint32(buf[1:]))
		if l < 4 || l > pgMaxMessage {
			pc.isRaw = true
			return -1
		}
		n = 1 + l
	}
	if len(buf) < n {
		return 0
	}
	return n
}

func (pc *postgresCodec) client(msg []byte) (string, bool) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.startup {
		switch code := binary.BigEndian.Uint32(msg[4:]); {
		case code == pgSSLRequest || code == pgGSSENCRequest:
			pc.answerByte = true
		case code>>16 == 3: // StartupMessage, protocol 3.x
			pc.startup = false
			pc.pendingZ++
		case code == pgCancelRequest: // process id and secret key follow
			pc.cancelKey = append([]byte(nil), msg[8:]...)
			pc.isRaw = true
		default: // a protocol we do not know
			pc.isRaw = true
		}
		return "", false
	}
	typ, body := msg[0], msg[5:]
	pc.lastType = typ
	switch typ {
	case 'Q': // Query: SQL text
		sql, _ := cstring(body)
		pc.pendingZ++
		pc.tracef("Q %s", sql)
		return sql, true
	case 'P': // Parse: statement name, SQL text, parameter types
		name, rest := cstring(body)
		sql, _ := cstring(rest)
		pc.statements[name] = sql
		pc.tracef("P %q %s", name, sql)
	case 'B': // Bind: portal name, statement name, parameters
		portal, rest := cstring(body)
		stmt, _ := cstring(rest)
		pc.portals[portal] = pc.statements[stmt]
		pc.tracef("B %q %q", portal, stmt)
	case 'E': // Execute: portal name, row limit
		portal, _ := cstring(body)
		sql := pc.portals[portal]
		pc.tracef("E %q %s", portal, sql)
		return sql, true
	case 'C': // Close: 'S'tatement or 'P'ortal, name
		if len(body) > 0 {
			name, _ := cstring(body[1:])
			if body[0] == 'S' {
				delete(pc.statements, name)
			} else {
				delete(pc.portals, name)
			}
			pc.tracef("C %c %q", body[0], name)
		}
	case 'S', 'F': // Sync, FunctionCall: answered with ReadyForQuery
		pc.pendingZ++
		pc.tracef("%c", typ)
	default:
		pc.tracef("%c", typ)
	}
	return "", false
}

func (pc *postgresCodec) server(b []byte) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	for len(b) > 0 && !pc.isRaw {
		if pc.answerByte {
			pc.answerByte = false
			if b[0] == 'S' || b[0] == 'G' { // encryption follows
				pc.isRaw = true
			}
			b = b[1:]
			continue
		}
		if pc.bodyLeft > 0 {
			k := min(pc.bodyLeft, len(b))
			if pc.keyLeft > 0 {
				kk := min(pc.keyLeft, k)
				pc.key = append(pc.key, b[:kk]...)
				pc.keyLeft -= kk
			}
			pc.bodyLeft -= k
			b = b[k:]
			continue
		}
		k := copy(pc.hdr[pc.hdrLen:], b)
		pc.hdrLen += k
		b = b[k:]
		if pc.hdrLen < len(pc.hdr) {
			return
		}
		pc.hdrLen = 0
		pc.bodyLeft = int(binary.BigEndian.Uint32(pc.hdr[1:])) - 4
		switch pc.hdr[0] {
		case 'Z': // ReadyForQuery
			pc.pendingZ = max(pc.pendingZ-1, 0)
		case 'K': // BackendKeyData
			pc.key = pc.key[:0]
			pc.keyLeft = min(pc.bodyLeft, pgMaxKey)
		}
	}
}

func (pc *postgresCodec) cancelTarget() []byte {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.cancelKey
}

func (pc *postgresCodec) backendKey() []byte {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.keyLeft > 0 {
		return nil
	}
	return pc.key
}

func (pc *postgresCodec) raw() bool {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.isRaw
}

func (pc *postgresCodec) idle() bool {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.pendingZ == 0 || pc.isRaw
}

// batchDone: the extended-protocol messages Parse, Bind, Describe, Execute
// and Close take effect only at the next Sync or Flush.
func (pc *postgresCodec) batchDone() bool {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return bytes.IndexByte([]byte("PBDEC"), pc.lastType) < 0
}

func (pc *postgresCodec) tracef(format string, args ...any) {
	if pc.trace != nil {
		pc.trace(fmt.Sprintf(format, args...))
	}
}

// cstring splits a NUL-terminated string off the front of b.
func cstring(b []byte) (string, []byte) {
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return string(b), nil
	}
	return string(b[:i]), b[i+1:]
}
