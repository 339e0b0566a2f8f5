package faultproxy

import (
	"encoding/binary"
	"fmt"
	"sync"
)

// MySQL command bytes the codec tells apart.
const (
	comQuit             = 0x01
	comQuery            = 0x03
	comChangeUser       = 0x11
	comStmtPrepare      = 0x16
	comStmtExecute      = 0x17
	comStmtSendLongData = 0x18
	comStmtClose        = 0x19
	comResetConnection  = 0x1f
	comStmtBulkExecute  = 0xfa // MariaDB
)

// Capability flags of the client's handshake response after which the
// stream is no longer plain packets.
const (
	clientCompress = 1 << 5
	clientSSL      = 1 << 11
	clientZstd     = 1 << 26
)

// mysqlMaxPayload is the payload length of a packet that another packet
// continues.
const mysqlMaxPayload = 1<<24 - 1

// mysqlLastStatement is the statement id MariaDB reads as "the statement
// prepared last".
const mysqlLastStatement = 0xffffffff

// mysqlCodec follows the MySQL client/server protocol. The server speaks
// first (its handshake); the client's first packet is its handshake
// response; every packet after that counts as a command only once the
// server has accepted the login with an OK packet, so auth-switch and
// other authentication packets are never taken for commands. Commands are
// request/response, so the first server packet after a command is the
// start of its reply; the reply to COM_STMT_PREPARE carries the statement
// id that later COM_STMT_EXECUTE packets name.
type mysqlCodec struct {
	trace func(string)

	mu         sync.Mutex
	greeted    bool // the server's handshake has arrived
	responded  bool // the client's handshake response has gone out
	authed     bool // the server accepted the login; packets are commands
	isRaw      bool // TLS or compression: packets are no longer readable
	clientCont bool // the next client packet continues a payload
	infile     bool // the client is sending a LOAD DATA LOCAL file
	awaiting   []byte
	prepares   []string          // COM_STMT_PREPARE texts awaiting their id
	statements map[uint32]string // statement id -> SQL
	last       uint32            // the statement prepared last

	// The server packet being read.
	hdr        [4]byte
	hdrLen     int
	bodyLeft   int
	head       []byte // the first bytes of its payload
	want       int    // how many bytes head needs
	thisCont   bool   // it continues the previous packet's payload
	serverCont bool   // the next one continues this one's payload
}

func newMySQLCodec(trace func(string)) *mysqlCodec {
	return &mysqlCodec{
		trace:      trace,
		statements: make(map[uint32]string),
		head:       make([]byte, 0, 5),
	}
}

func (mc *mysqlCodec) frame(buf []byte) int {
	if len(buf) < 4 {
		return 0
	}
	n := 4 + (int(buf[0]) | int(buf[1])<<8 | int(buf[2])<<16)
	if len(buf) < n {
		return 0
	}
	return n
}

func (mc *mysqlCodec) client(msg []byte) (string, bool) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	payload := msg[4:]
	cont := mc.clientCont
	mc.clientCont = len(payload) == mysqlMaxPayload
	switch {
	case cont:
		return "", false
	case !mc.responded: // HandshakeResponse or SSLRequest
		mc.responded = true
		if len(payload) < 4 || binary.LittleEndian.Uint32(payload)&(clientSSL|clientCompress|clientZstd) != 0 {
			mc.isRaw = true
		}
		return "", false
	case !mc.authed: // authentication exchange
		return "", false
	case mc.infile:
		if len(payload) == 0 { // end of the file: the server answers now
			mc.infile = false
			mc.awaiting = append(mc.awaiting, comQuery)
		}
		return "", false
	case len(payload) == 0:
		return "", false
	}

	cmd := payload[0]
	switch cmd {
	case comQuery:
		sql := string(payload[1:])
		mc.awaiting = append(mc.awaiting, cmd)
		mc.tracef("COM_QUERY %s", sql)
		return sql, true
	case comStmtPrepare:
		sql := string(payload[1:])
		mc.prepares = append(mc.prepares, sql)
		mc.awaiting = append(mc.awaiting, cmd)
		mc.tracef("COM_STMT_PREPARE %s", sql)
	case comStmtExecute, comStmtBulkExecute:
		var id uint32
		if len(payload) >= 5 {
			id = binary.LittleEndian.Uint32(payload[1:])
		}
		if id == mysqlLastStatement {
			id = mc.last
		}
		sql := mc.statements[id]
		mc.awaiting = append(mc.awaiting, cmd)
		mc.tracef("COM_STMT_EXECUTE %d %s", id, sql)
		return sql, true
	case comStmtClose:
		if len(payload) >= 5 {
			id := binary.LittleEndian.Uint32(payload[1:])
			delete(mc.statements, id)
			mc.tracef("COM_STMT_CLOSE %d", id)
		}
	case comStmtSendLongData, comQuit: // no reply
		mc.tracef("command 0x%02x", cmd)
	case comChangeUser: // a new login; the session's statements are gone
		mc.authed = false
		clear(mc.statements)
		mc.tracef("COM_CHANGE_USER")
	case comResetConnection:
		clear(mc.statements)
		mc.awaiting = append(mc.awaiting, cmd)
		mc.tracef("COM_RESET_CONNECTION")
	default:
		mc.awaiting = append(mc.awaiting, cmd)
		mc.tracef("command 0x%02x", cmd)
	}
	return "", false
}

func (mc *mysqlCodec) server(b []byte) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	for len(b) > 0 && !mc.isRaw {
		if mc.hdrLen < len(mc.hdr) {
			k := copy(mc.hdr[mc.hdrLen:], b)
			mc.hdrLen += k
			b = b[k:]
			if mc.hdrLen < len(mc.hdr) {
				return
			}
			n := int(mc.hdr[0]) | int(mc.hdr[1])<<8 | int(mc.hdr[2])<<16
			mc.bodyLeft = n
			mc.head = mc.head[:0]
			mc.want = min(n, cap(mc.head))
			mc.thisCont = mc.serverCont
			mc.serverCont = n == mysqlMaxPayload
			if n == 0 {
				mc.packet()
				mc.hdrLen = 0
			}
			continue
		}
		k := min(mc.bodyLeft, len(b))
		if h := min(mc.want-len(mc.head), k); h > 0 {
			mc.head = append(mc.head, b[:h]...)
			if len(mc.head) == mc.want {
				mc.packet()
			}
		}
		mc.bodyLeft -= k
		b = b[k:]
		if mc.bodyLeft == 0 {
			mc.hdrLen = 0
		}
	}
}

// packet records a server packet whose first bytes are in mc.head.
func (mc *mysqlCodec) packet() {
	switch {
	case mc.thisCont:
	case !mc.greeted: // the server's handshake (or an error instead)
		mc.greeted = true
	case !mc.authed:
		// OK ends the login; an auth switch (0xfe) or more auth data
		// (0x01) means the client answers, and an error (0xff) means
		// the server closes the connection.
		if len(mc.head) > 0 && mc.head[0] == 0x00 {
			mc.authed = true
			mc.tracef("login OK")
		}
	case len(mc.awaiting) > 0: // the start of a reply
		cmd := mc.awaiting[0]
		mc.awaiting = mc.awaiting[1:]
		switch {
		case cmd == comStmtPrepare:
			sql := mc.prepares[0]
			mc.prepares = mc.prepares[1:]
			if len(mc.head) == 5 && mc.head[0] == 0x00 {
				id := binary.LittleEndian.Uint32(mc.head[1:])
				mc.statements[id] = sql
				mc.last = id
				mc.tracef("prepared %d", id)
			}
		case cmd == comQuery && len(mc.head) > 0 && mc.head[0] == 0xfb:
			mc.infile = true
		}
	}
}

// cancelTarget: MySQL cancels with KILL QUERY, an ordinary command.
func (mc *mysqlCodec) cancelTarget() []byte { return nil }

func (mc *mysqlCodec) backendKey() []byte { return nil }

func (mc *mysqlCodec) raw() bool {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	return mc.isRaw
}

func (mc *mysqlCodec) idle() bool {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	return (len(mc.awaiting) == 0 && !mc.infile) || mc.isRaw
}

func (mc *mysqlCodec) batchDone() bool {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	return !mc.clientCont
}

func (mc *mysqlCodec) tracef(format string, args ...any) {
	if mc.trace != nil {
		mc.trace(fmt.Sprintf(format, args...))
	}
}
