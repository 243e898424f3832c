// ClientHello capture and JA4 fingerprints.

package egresstest

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"time"
)

// TLS constants used by the parser.
const (
	recordTypeHandshake   = 0x16
	handshakeClientHello  = 0x01
	recordHeaderLen       = 5
	maxRecordPayload      = 1<<14 + 256 // a plaintext record may not exceed 2^14; allow slack
	maxClientHelloMessage = 1 << 16     // far larger than any real ClientHello

	extServerName          = 0x0000
	extSupportedGroups     = 0x000a
	extSignatureAlgorithms = 0x000d
	extALPN                = 0x0010
	extSupportedVersions   = 0x002b
	extKeyShare            = 0x0033
)

// ClientHello is a parsed TLS ClientHello message.
//
// Every list keeps the values in the order they appear on the wire,
// including GREASE values (RFC 8701); JA4 and its variants drop GREASE
// themselves. Use IsGREASE to filter them.
type ClientHello struct {
	// Version is the legacy_version field of the ClientHello (0x0303 for
	// TLS 1.2 and 1.3 clients).
	Version uint16
	// ServerName is the host_name entry of the server_name extension, or ""
	// when the extension is absent.
	ServerName string
	// HasServerName reports whether the server_name extension is present.
	HasServerName bool
	// ALPN lists the protocols of the application_layer_protocol_negotiation
	// extension.
	ALPN                []string
	CipherSuites        []uint16
	Extensions          []uint16
	SignatureAlgorithms []uint16
	SupportedVersions   []uint16
	SupportedGroups     []uint16
	// KeyShareGroups lists the groups of the key_share extension entries.
	KeyShareGroups []uint16
	// Raw is the handshake message: type, 3-byte length and body, without
	// record headers.
	Raw []byte

	extData [][]byte // bodies, parallel to Extensions
}

// Extension returns the body of the first extension of type typ, and
// whether there is one.
func (ch *ClientHello) Extension(typ uint16) ([]byte, bool) {
	if i := slices.Index(ch.Extensions, typ); i >= 0 {
		return ch.extData[i], true
	}
	return nil, false
}

// IsGREASE reports whether v is one of the GREASE values reserved by RFC
// 8701 (0x0a0a, 0x1a1a, ..., 0xfafa).
func IsGREASE(v uint16) bool {
	return v&0x0f0f == 0x0a0a && v>>8 == v&0xff
}

// ParseClientHello parses data, which holds one or more TLS records carrying
// a ClientHello handshake message. A ClientHello larger than one record (as
// with post-quantum key shares) may span several records; all of them must
// be present. Bytes after the end of the ClientHello are ignored.
func ParseClientHello(data []byte) (*ClientHello, error) {
	msg, err := reassembleHello(data)
	if err != nil {
		return nil, err
	}
	return parseHelloMessage(msg)
}

// ReadClientHello reads TLS records from r until it holds a complete
// ClientHello message, and parses it. It reads no further than the record
// that completes the message.
func ReadClientHello(r io.Reader) (*ClientHello, error) {
	var msg []byte
	var hdr [recordHeaderLen]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return nil, fmt.Errorf("read record header: %w", err)
		}
		n, err := checkHelloRecordHeader(hdr[:])
		if err != nil {
			return nil, err
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(r, payload); err != nil {
			return nil, fmt.Errorf("read record: %w", err)
		}
		msg = append(msg, payload...)
		if done, err := helloComplete(msg); err != nil {
			return nil, err
		} else if done {
			return parseHelloMessage(msg)
		}
	}
}

// reassembleHello concatenates the handshake payloads of the records in data
// until the first handshake message is complete, and returns that message.
func reassembleHello(data []byte) ([]byte, error) {
	var msg []byte
	for {
		if len(data) < recordHeaderLen {
			return nil, errors.New("clienthello: truncated: record header")
		}
		n, err := checkHelloRecordHeader(data[:recordHeaderLen])
		if err != nil {
			return nil, err
		}
		data = data[recordHeaderLen:]
		if len(data) < n {
			return nil, errors.New("clienthello: truncated: record payload")
		}
		msg = append(msg, data[:n]...)
		data = data[n:]
		done, err := helloComplete(msg)
		if err != nil {
			return nil, err
		}
		if done {
			return msg, nil
		}
	}
}

func checkHelloRecordHeader(h []byte) (int, error) {
	if h[0] != recordTypeHandshake {
		return 0, fmt.Errorf("clienthello: record type %d, want handshake (22)", h[0])
	}
	if h[1] != 3 {
		return 0, fmt.Errorf("clienthello: record version %#04x is not TLS", binary.BigEndian.Uint16(h[1:3]))
	}
	n := int(binary.BigEndian.Uint16(h[3:5]))
	if n == 0 || n > maxRecordPayload {
		return 0, fmt.Errorf("clienthello: bad record length %d", n)
	}
	return n, nil
}

// helloComplete reports whether msg holds the whole first handshake
// message, and trims nothing: the caller parses msg[:4+length].
func helloComplete(msg []byte) (bool, error) {
	if len(msg) < 4 {
		return false, nil
	}
	if msg[0] != handshakeClientHello {
		return false, fmt.Errorf("clienthello: handshake type %d, want client_hello (1)", msg[0])
	}
	n := int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3])
	if n > maxClientHelloMessage {
		return false, fmt.Errorf("clienthello: message length %d too large", n)
	}
	return len(msg) >= 4+n, nil
}

// helloReader is a minimal big-endian cursor over a byte slice.
type helloReader struct {
	b   []byte
	err error
}

func (r *helloReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("clienthello: truncated: %s", what)
	}
}

func (r *helloReader) bytes(n int, what string) []byte {
	if r.err != nil || n < 0 || len(r.b) < n {
		r.fail(what)
		r.b = nil
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *helloReader) u8(what string) int {
	b := r.bytes(1, what)
	if b == nil {
		return 0
	}
	return int(b[0])
}

func (r *helloReader) u16(what string) int {
	b := r.bytes(2, what)
	if b == nil {
		return 0
	}
	return int(binary.BigEndian.Uint16(b))
}

// vec8 and vec16 read a vector with a 1- or 2-byte length prefix. A
// failure is recorded on both r and the returned reader.
func (r *helloReader) vec8(what string) *helloReader {
	b := r.bytes(r.u8(what), what)
	return &helloReader{b: b, err: r.err}
}

func (r *helloReader) vec16(what string) *helloReader {
	b := r.bytes(r.u16(what), what)
	return &helloReader{b: b, err: r.err}
}

func (r *helloReader) u16s(what string) []uint16 {
	if len(r.b)%2 != 0 {
		r.fail(what)
		return nil
	}
	var out []uint16
	for len(r.b) > 0 && r.err == nil {
		out = append(out, uint16(r.u16(what)))
	}
	return out
}

func parseHelloMessage(msg []byte) (*ClientHello, error) {
	n := int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3])
	raw := slices.Clone(msg[:4+n])
	r := &helloReader{b: raw[4:]}
	ch := &ClientHello{Raw: raw}
	ch.Version = uint16(r.u16("version"))
	r.bytes(32, "random")
	r.vec8("session id")
	ch.CipherSuites = r.vec16("cipher suites").u16s("cipher suites")
	r.vec8("compression methods")
	if r.err != nil {
		return nil, r.err
	}
	if len(r.b) == 0 { // no extensions block at all (pre-TLS 1.2 clients)
		return ch, nil
	}
	exts := r.vec16("extensions")
	for len(exts.b) > 0 && exts.err == nil {
		typ := uint16(exts.u16("extension type"))
		body := exts.vec16("extension body")
		if exts.err != nil || body.err != nil {
			break
		}
		ch.Extensions = append(ch.Extensions, typ)
		ch.extData = append(ch.extData, body.b)
		if err := ch.parseExtension(typ, body); err != nil {
			return nil, err
		}
	}
	if exts.err != nil {
		return nil, exts.err
	}
	return ch, nil
}

func (ch *ClientHello) parseExtension(typ uint16, body *helloReader) error {
	switch typ {
	case extServerName:
		ch.HasServerName = true
		list := body.vec16("server name list")
		for len(list.b) > 0 && list.err == nil {
			kind := list.u8("server name type")
			name := list.vec16("server name")
			if kind == 0 && ch.ServerName == "" {
				ch.ServerName = string(name.b)
			}
		}
		return list.err
	case extALPN:
		list := body.vec16("alpn list")
		for len(list.b) > 0 && list.err == nil {
			p := list.vec8("alpn protocol")
			if list.err == nil {
				ch.ALPN = append(ch.ALPN, string(p.b))
			}
		}
		return list.err
	case extSignatureAlgorithms:
		l := body.vec16("signature algorithms")
		ch.SignatureAlgorithms = l.u16s("signature algorithms")
		return l.err
	case extSupportedVersions:
		l := body.vec8("supported versions")
		ch.SupportedVersions = l.u16s("supported versions")
		return l.err
	case extSupportedGroups:
		l := body.vec16("supported groups")
		ch.SupportedGroups = l.u16s("supported groups")
		return l.err
	case extKeyShare:
		l := body.vec16("key shares")
		for len(l.b) > 0 && l.err == nil {
			g := l.u16("key share group")
			l.vec16("key share")
			if l.err == nil {
				ch.KeyShareGroups = append(ch.KeyShareGroups, uint16(g))
			}
		}
		return l.err
	}
	return nil
}

// JA4 returns the JA4 fingerprint of the ClientHello (FoxIO's JA4 TLS client
// fingerprint, TCP variant), for example
// "t13d1516h2_8daaf6152771_d8a2da3f94cd".
func (ch *ClientHello) JA4() string { return ch.ja4(false, true) }

// JA4R returns the raw, unhashed JA4 (ja4_r): the sorted cipher list and the
// sorted extension list followed by the signature algorithms. It shows what
// differs when two JA4 values do not match.
func (ch *ClientHello) JA4R() string { return ch.ja4(false, false) }

// JA4O returns ja4_o: JA4 with ciphers and extensions in wire order, SNI
// and ALPN kept.
func (ch *ClientHello) JA4O() string { return ch.ja4(true, true) }

// JA4RO returns ja4_ro, the raw form of JA4O.
func (ch *ClientHello) JA4RO() string { return ch.ja4(true, false) }

func (ch *ClientHello) ja4(original, hashed bool) string {
	ciphers := ja4HexList(ch.CipherSuites)
	exts := ja4HexList(ch.Extensions)
	sigs := ja4HexList(ch.SignatureAlgorithms)
	if !original {
		slices.Sort(ciphers)
		exts = slices.DeleteFunc(exts, func(s string) bool { return s == "0000" || s == "0010" })
		slices.Sort(exts)
	}

	a := ch.ja4a()
	b := strings.Join(ciphers, ",")
	c := strings.Join(exts, ",")
	if len(sigs) > 0 {
		c += "_" + strings.Join(sigs, ",")
	}
	if !hashed {
		return a + "_" + b + "_" + c
	}
	hb, hc := ja4Hash(b), ja4Hash(c)
	if len(ciphers) == 0 {
		hb = "000000000000"
	}
	if len(exts) == 0 {
		hc = "000000000000"
	}
	return a + "_" + hb + "_" + hc
}

// ja4a builds the readable first part: protocol, version, SNI, counts, ALPN.
func (ch *ClientHello) ja4a() string {
	version := ch.Version
	if len(ch.SupportedVersions) > 0 {
		version = 0
		for _, v := range ch.SupportedVersions {
			if !IsGREASE(v) && v > version {
				version = v
			}
		}
	}
	sni := "i"
	if ch.HasServerName {
		sni = "d"
	}
	return fmt.Sprintf("t%s%s%02d%02d%s", ja4Version(version), sni,
		min(countNonGREASE(ch.CipherSuites), 99), min(countNonGREASE(ch.Extensions), 99), ja4ALPN(ch.ALPN))
}

func ja4Version(v uint16) string {
	switch v {
	case 0x0304:
		return "13"
	case 0x0303:
		return "12"
	case 0x0302:
		return "11"
	case 0x0301:
		return "10"
	case 0x0300:
		return "s3"
	case 0x0200:
		return "s2"
	case 0x0100:
		return "s1"
	}
	return "00"
}

// ja4ALPN is the first and last character of the first ALPN value, "00"
// when there is none. As in FoxIO's reference implementation, a value whose
// first or last byte is not an ASCII letter or digit is represented by the
// first hex digit of its first byte and the last hex digit of its last byte.
func ja4ALPN(alpn []string) string {
	if len(alpn) == 0 || alpn[0] == "" {
		return "00"
	}
	v := alpn[0]
	first, last := v[0], v[len(v)-1]
	if isASCIIAlnum(first) && isASCIIAlnum(last) {
		return string([]byte{first, last})
	}
	h := hex.EncodeToString([]byte{first, last})
	return string([]byte{h[0], h[3]})
}

func isASCIIAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func countNonGREASE(vs []uint16) int {
	n := 0
	for _, v := range vs {
		if !IsGREASE(v) {
			n++
		}
	}
	return n
}

func ja4HexList(vs []uint16) []string {
	out := make([]string, 0, len(vs))
	for _, v := range vs {
		if !IsGREASE(v) {
			out = append(out, fmt.Sprintf("%04x", v))
		}
	}
	return out
}

func ja4Hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:12]
}

// ClientHelloServer is a TCP server on 127.0.0.1 that reads the ClientHello
// of every connection, records it, answers with a fatal handshake_failure
// alert and closes the connection. It never completes a handshake.
//
// Its methods are safe for concurrent use.
type ClientHelloServer struct {
	ln     net.Listener
	hellos chan *ClientHello
	errs   chan error
	done   chan struct{}
	wg     sync.WaitGroup
	once   sync.Once
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
}

// clientHelloQueue bounds how many recorded hellos wait for Next; further
// ones are dropped.
const clientHelloQueue = 256

// clientHelloReadTimeout bounds how long a connection may take to send its
// ClientHello.
const clientHelloReadTimeout = 10 * time.Second

// StartClientHelloServer starts a ClientHelloServer listening on
// 127.0.0.1 with a kernel-chosen port. Call Close when done.
func StartClientHelloServer() (*ClientHelloServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	s := &ClientHelloServer{
		ln:     ln,
		hellos: make(chan *ClientHello, clientHelloQueue),
		errs:   make(chan error, clientHelloQueue),
		done:   make(chan struct{}),
		conns:  make(map[net.Conn]struct{}),
	}
	s.wg.Add(1)
	go s.serve()
	return s, nil
}

// Addr returns the server's address as "127.0.0.1:port".
func (s *ClientHelloServer) Addr() string { return s.ln.Addr().String() }

// Port returns the server's TCP port.
func (s *ClientHelloServer) Port() int { return s.ln.Addr().(*net.TCPAddr).Port }

// Next returns the next recorded ClientHello, in the order connections
// delivered them. It blocks until one arrives, ctx ends or the server is
// closed. A connection whose bytes were not a ClientHello yields its parse
// error instead.
func (s *ClientHelloServer) Next(ctx context.Context) (*ClientHello, error) {
	select {
	case ch := <-s.hellos:
		return ch, nil
	case err := <-s.errs:
		return nil, err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.done:
		return nil, net.ErrClosed
	}
}

// Close stops the server, closes open connections and waits for its
// goroutines to end. It is safe to call more than once.
func (s *ClientHelloServer) Close() error {
	var err error
	s.once.Do(func() {
		close(s.done)
		err = s.ln.Close()
		s.mu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return err
}

func (s *ClientHelloServer) serve() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		select {
		case <-s.done:
			s.mu.Unlock()
			c.Close()
			return
		default:
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.handle(c)
	}
}

// alertHandshakeFailure is a fatal handshake_failure alert record.
var alertHandshakeFailure = []byte{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28}

func (s *ClientHelloServer) handle(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	c.SetDeadline(time.Now().Add(clientHelloReadTimeout))
	cr := &byteCounter{r: c}
	ch, err := ReadClientHello(cr)
	if err != nil {
		if cr.n == 0 {
			return // a probe, an unused preconnect or a closed server: no hello
		}
		select {
		case s.errs <- err:
		default:
		}
		return
	}
	select {
	case s.hellos <- ch:
	default:
	}
	c.Write(alertHandshakeFailure)
}

type byteCounter struct {
	r io.Reader
	n int
}

func (c *byteCounter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}
