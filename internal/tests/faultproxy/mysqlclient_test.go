package faultproxy

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// This file is a minimal MySQL protocol client for the tests, so that they
// need no MySQL driver in go.mod. It speaks the packets
// github.com/go-sql-driver/mysql sends for the same calls: COM_QUERY for a
// statement without arguments and for START TRANSACTION / COMMIT,
// COM_STMT_PREPARE + COM_STMT_EXECUTE for one with arguments.

// myDSN is the part of a go-sql-driver/mysql DSN the tests use:
// user[:password]@tcp(host:port)/dbname[?params].
type myDSN struct {
	user, password, addr, db string
}

func parseMyDSN(dsn string) (myDSN, error) {
	var d myDSN
	at := strings.LastIndex(dsn, "@")
	if at < 0 {
		return d, fmt.Errorf("mysql DSN %q: want user[:password]@tcp(host:port)/dbname", dsn)
	}
	d.user, d.password, _ = strings.Cut(dsn[:at], ":")
	rest := dsn[at+1:]
	if !strings.HasPrefix(rest, "tcp(") {
		return d, fmt.Errorf("mysql DSN %q: only tcp(host:port) addresses are supported", dsn)
	}
	end := strings.Index(rest, ")")
	if end < 0 {
		return d, fmt.Errorf("mysql DSN %q: unclosed tcp(", dsn)
	}
	d.addr = rest[len("tcp("):end]
	d.db, _, _ = strings.Cut(strings.TrimPrefix(rest[end+1:], "/"), "?")
	return d, nil
}

// myError is an ERR packet.
type myError struct {
	code  uint16
	state string
	msg   string
}

func (e *myError) Error() string {
	return fmt.Sprintf("mysql error %d (%s): %s", e.code, e.state, e.msg)
}

// myClient is one MySQL connection. It is not safe for concurrent use.
type myClient struct {
	conn   net.Conn
	r      *bufio.Reader
	seq    byte
	connID uint32 // the server's id for the connection (SHOW PROCESSLIST)
}

// Capability flags the client asks for.
const (
	myLongPassword     = 1 << 0
	myLongFlag         = 1 << 2
	myConnectWithDB    = 1 << 3
	myProtocol41       = 1 << 9
	myTransactions     = 1 << 13
	mySecureConnection = 1 << 15
	myPluginAuth       = 1 << 19
)

// dialMy connects to addr and logs in as d describes.
func dialMy(addr string, d myDSN) (*myClient, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	m := &myClient{conn: conn, r: bufio.NewReader(conn)}
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if err := m.login(d); err != nil {
		_ = conn.Close()
		return nil, err
	}
	_ = conn.SetDeadline(time.Time{})
	return m, nil
}

func (m *myClient) login(d myDSN) error {
	p, err := m.readPacket()
	if err != nil {
		return err
	}
	if p[0] == 0xff {
		return parseMyError(p)
	}
	if p[0] != 10 {
		return fmt.Errorf("mysql: handshake protocol %d", p[0])
	}
	_, p = splitCString(p[1:]) // server version
	m.connID = binary.LittleEndian.Uint32(p)
	scramble := append([]byte(nil), p[4:12]...)
	p = p[13:] // filler
	p = p[2:]  // capabilities, low half
	if len(p) >= 16 {
		authLen := int(p[5])
		p = p[16:] // charset, status, capabilities high half, auth length, reserved
		n := max(13, authLen-8)
		scramble = append(scramble, p[:min(n, len(p))]...)
		scramble = bytes.TrimRight(scramble, "\x00")
	}

	caps := uint32(myLongPassword | myLongFlag | myProtocol41 | myTransactions | mySecureConnection | myPluginAuth)
	if d.db != "" {
		caps |= myConnectWithDB
	}
	auth := nativePassword(d.password, scramble)
	var b []byte
	b = binary.LittleEndian.AppendUint32(b, caps)
	b = binary.LittleEndian.AppendUint32(b, 1<<24)
	b = append(b, 45) // utf8mb4_general_ci
	b = append(b, make([]byte, 23)...)
	b = append(append(b, d.user...), 0)
	b = append(append(b, byte(len(auth))), auth...)
	if d.db != "" {
		b = append(append(b, d.db...), 0)
	}
	b = append(append(b, "mysql_native_password"...), 0)
	if err := m.writePacket(b); err != nil {
		return err
	}

	for {
		p, err := m.readPacket()
		if err != nil {
			return err
		}
		switch p[0] {
		case 0x00:
			return nil
		case 0xff:
			return parseMyError(p)
		case 0xfe: // auth switch: plugin name, new scramble
			plugin, data := splitCString(p[1:])
			if plugin != "mysql_native_password" {
				return fmt.Errorf("mysql: auth plugin %q not supported by the test client", plugin)
			}
			if err := m.writePacket(nativePassword(d.password, bytes.TrimRight(data, "\x00"))); err != nil {
				return err
			}
		default:
			return fmt.Errorf("mysql: unexpected login packet 0x%02x", p[0])
		}
	}
}

// nativePassword is mysql_native_password's answer to a scramble.
func nativePassword(password string, scramble []byte) []byte {
	if password == "" {
		return nil
	}
	h1 := sha1.Sum([]byte(password))
	h2 := sha1.Sum(h1[:])
	h3 := sha1.Sum(append(append([]byte(nil), scramble...), h2[:]...))
	out := make([]byte, len(h1))
	for i := range h1 {
		out[i] = h1[i] ^ h3[i]
	}
	return out
}

func (m *myClient) readPacket() ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(m.r, hdr[:]); err != nil {
		return nil, err
	}
	n := int(hdr[0]) | int(hdr[1])<<8 | int(hdr[2])<<16
	m.seq = hdr[3] + 1
	p := make([]byte, n)
	if _, err := io.ReadFull(m.r, p); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, errors.New("mysql: empty packet")
	}
	return p, nil
}

func (m *myClient) writePacket(p []byte) error {
	b := []byte{byte(len(p)), byte(len(p) >> 8), byte(len(p) >> 16), m.seq}
	m.seq++
	_, err := m.conn.Write(append(b, p...))
	return err
}

func (m *myClient) command(p []byte) error {
	m.seq = 0
	return m.writePacket(p)
}

// setTimeout bounds the client's next calls by d; zero removes the bound.
func (m *myClient) setTimeout(d time.Duration) {
	if d == 0 {
		_ = m.conn.SetDeadline(time.Time{})
		return
	}
	_ = m.conn.SetDeadline(time.Now().Add(d))
}

// query sends COM_QUERY and returns the rows of a text result set, or the
// affected row count of an OK.
func (m *myClient) query(sql string) (rows [][]string, affected uint64, err error) {
	if err := m.command(append([]byte{comQuery}, sql...)); err != nil {
		return nil, 0, err
	}
	return m.readResult(false)
}

// queryInt runs a query whose result is one integer.
func (m *myClient) queryInt(sql string) (int, error) {
	rows, _, err := m.query(sql)
	if err != nil {
		return 0, err
	}
	if len(rows) != 1 || len(rows[0]) != 1 {
		return 0, fmt.Errorf("mysql: %q returned %v", sql, rows)
	}
	return strconv.Atoi(rows[0][0])
}

// readResult reads an OK, an ERR or a result set; binary result sets'
// rows are skipped.
func (m *myClient) readResult(binaryRows bool) ([][]string, uint64, error) {
	p, err := m.readPacket()
	if err != nil {
		return nil, 0, err
	}
	switch p[0] {
	case 0x00:
		affected, _ := lenenc(p[1:])
		return nil, affected, nil
	case 0xff:
		return nil, 0, parseMyError(p)
	case 0xfb:
		return nil, 0, errors.New("mysql: LOAD DATA LOCAL not supported by the test client")
	}
	cols, _ := lenenc(p)
	for i := uint64(0); i <= cols; i++ { // column definitions, then EOF
		if _, err := m.readPacket(); err != nil {
			return nil, 0, err
		}
	}
	var rows [][]string
	for {
		p, err := m.readPacket()
		if err != nil {
			return nil, 0, err
		}
		if p[0] == 0xfe && len(p) < 9 {
			return rows, 0, nil
		}
		if p[0] == 0xff {
			return nil, 0, parseMyError(p)
		}
		if binaryRows {
			continue
		}
		row := make([]string, 0, cols)
		for len(p) > 0 {
			n, rest := lenenc(p)
			row = append(row, string(rest[:n]))
			p = rest[n:]
		}
		rows = append(rows, row)
	}
}

// prepare sends COM_STMT_PREPARE and returns the statement id and its
// number of parameters.
func (m *myClient) prepare(sql string) (uint32, int, error) {
	if err := m.command(append([]byte{comStmtPrepare}, sql...)); err != nil {
		return 0, 0, err
	}
	p, err := m.readPacket()
	if err != nil {
		return 0, 0, err
	}
	if p[0] == 0xff {
		return 0, 0, parseMyError(p)
	}
	id := binary.LittleEndian.Uint32(p[1:])
	cols := int(binary.LittleEndian.Uint16(p[5:]))
	params := int(binary.LittleEndian.Uint16(p[7:]))
	for _, n := range []int{params, cols} {
		if n == 0 {
			continue
		}
		for i := 0; i <= n; i++ { // definitions, then EOF
			if _, err := m.readPacket(); err != nil {
				return 0, 0, err
			}
		}
	}
	return id, params, nil
}

// execute sends COM_STMT_EXECUTE with integer arguments and returns the
// affected row count; result rows are skipped.
func (m *myClient) execute(id uint32, args ...int64) (uint64, error) {
	b := []byte{comStmtExecute}
	b = binary.LittleEndian.AppendUint32(b, id)
	b = append(b, 0)                           // no cursor
	b = binary.LittleEndian.AppendUint32(b, 1) // iteration count
	if len(args) > 0 {
		b = append(b, make([]byte, (len(args)+7)/8)...) // no NULLs
		b = append(b, 1)                                // types follow
		for range args {
			b = append(b, 0x08, 0x00) // MYSQL_TYPE_LONGLONG, signed
		}
		for _, a := range args {
			b = binary.LittleEndian.AppendUint64(b, uint64(a))
		}
	}
	if err := m.command(b); err != nil {
		return 0, err
	}
	_, affected, err := m.readResult(true)
	return affected, err
}

func (m *myClient) close() {
	_ = m.command([]byte{comQuit})
	_ = m.conn.Close()
}

func parseMyError(p []byte) error {
	e := &myError{}
	if len(p) >= 3 {
		e.code = binary.LittleEndian.Uint16(p[1:])
	}
	rest := p[min(3, len(p)):]
	if len(rest) >= 6 && rest[0] == '#' {
		e.state = string(rest[1:6])
		rest = rest[6:]
	}
	e.msg = string(rest)
	return e
}

// lenenc reads a length-encoded integer.
func lenenc(b []byte) (uint64, []byte) {
	switch {
	case len(b) == 0:
		return 0, b
	case b[0] < 0xfb:
		return uint64(b[0]), b[1:]
	case b[0] == 0xfc:
		return uint64(binary.LittleEndian.Uint16(b[1:])), b[3:]
	case b[0] == 0xfd:
		return uint64(b[1]) | uint64(b[2])<<8 | uint64(b[3])<<16, b[4:]
	case b[0] == 0xfe:
		return binary.LittleEndian.Uint64(b[1:]), b[9:]
	}
	return 0, b[1:] // 0xfb: NULL
}

func splitCString(b []byte) (string, []byte) {
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return string(b), nil
	}
	return string(b[:i]), b[i+1:]
}
