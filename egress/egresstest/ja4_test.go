package egresstest

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
)

// helloSpec describes a ClientHello to build byte by byte.
type helloSpec struct {
	version    uint16
	ciphers    []uint16
	extensions []uint16 // wire order; bodies come from the fields below
	serverName string
	alpn       []string
	sigAlgs    []uint16
	versions   []uint16
	extraBody  map[uint16][]byte
}

func putU16(b []byte, v uint16) []byte { return binary.BigEndian.AppendUint16(b, v) }

// build returns the handshake message (type, length, body).
func (s helloSpec) build() []byte {
	var body []byte
	v := s.version
	if v == 0 {
		v = 0x0303
	}
	body = putU16(body, v)
	body = append(body, make([]byte, 32)...) // random
	body = append(body, 32)                  // session id
	body = append(body, bytes.Repeat([]byte{0x11}, 32)...)
	body = putU16(body, uint16(2*len(s.ciphers)))
	for _, c := range s.ciphers {
		body = putU16(body, c)
	}
	body = append(body, 1, 0) // compression: null

	var exts []byte
	for _, e := range s.extensions {
		var b []byte
		switch e {
		case 0x0000:
			b = putU16(b, uint16(len(s.serverName)+3))
			b = append(b, 0)
			b = putU16(b, uint16(len(s.serverName)))
			b = append(b, s.serverName...)
		case 0x0010:
			var l []byte
			for _, p := range s.alpn {
				l = append(l, byte(len(p)))
				l = append(l, p...)
			}
			b = putU16(b, uint16(len(l)))
			b = append(b, l...)
		case 0x000d:
			b = putU16(b, uint16(2*len(s.sigAlgs)))
			for _, a := range s.sigAlgs {
				b = putU16(b, a)
			}
		case 0x002b:
			b = append(b, byte(2*len(s.versions)))
			for _, a := range s.versions {
				b = putU16(b, a)
			}
		case 0x000a, 0x0033: // supported_groups, key_share: empty lists
			b = []byte{0, 0}
		default:
			b = s.extraBody[e]
		}
		exts = putU16(exts, e)
		exts = putU16(exts, uint16(len(b)))
		exts = append(exts, b...)
	}
	body = putU16(body, uint16(len(exts)))
	body = append(body, exts...)

	msg := []byte{1, byte(len(body) >> 16), byte(len(body) >> 8), byte(len(body))}
	return append(msg, body...)
}

// helloRecords wraps msg in TLS handshake helloRecords of at most size bytes each.
func helloRecords(msg []byte, size int) []byte {
	var out []byte
	for len(msg) > 0 {
		n := min(size, len(msg))
		out = append(out, 0x16, 0x03, 0x01)
		out = putU16(out, uint16(n))
		out = append(out, msg[:n]...)
		msg = msg[n:]
	}
	return out
}

func parseHexList(s string) []uint16 {
	var out []uint16
	for _, f := range strings.Split(s, ",") {
		var v uint16
		for _, c := range f {
			v <<= 4
			switch {
			case c >= '0' && c <= '9':
				v |= uint16(c - '0')
			default:
				v |= uint16(c-'a') + 10
			}
		}
		out = append(out, v)
	}
	return out
}

// greased puts GREASE values around vs, as Chrome does, so that every
// vector also checks that GREASE is ignored.
func greased(vs []uint16) []uint16 {
	return append(append([]uint16{0x2a2a}, vs...), 0xfafa)
}

// Published vectors. Each gives the ClientHello in JA4_ro form (wire order,
// GREASE removed) and the published fingerprints.
var publishedVectors = []struct {
	name                string
	ciphers, exts, sigs string
	ja4, ja4r, ja4o     string
}{
	{
		// The worked example of FoxIO's JA4 specification
		// (technical_details/JA4.md, "Example" and "Raw Output"), as
		// mirrored in aws/s2n-tls compliance/specs for FoxIO-LLC/ja4 v0.18.2.
		name:    "FoxIO spec example",
		ciphers: "1301,1302,1303,c02b,c02f,c02c,c030,cca9,cca8,c013,c014,009c,009d,002f,0035",
		exts:    "001b,0000,0033,0010,4469,0017,002d,000d,0005,0023,0012,002b,ff01,000b,000a,0015",
		sigs:    "0403,0804,0401,0503,0805,0501,0806,0601",
		ja4:     "t13d1516h2_8daaf6152771_e5627efa2ab1",
		ja4r:    "t13d1516h2_002f,0035,009c,009d,1301,1302,1303,c013,c014,c02b,c02c,c02f,c030,cca8,cca9_0005,000a,000b,000d,0012,0015,0017,001b,0023,002b,002d,0033,4469,ff01_0403,0804,0401,0503,0805,0501,0806,0601",
		ja4o:    "t13d1516h2_acb858a92679_18f69afefd3d",
	},
	{
		// A Chrome 143 (Android) capture with its ja4, ja4_r, ja4_o and
		// ja4_ro as reported by a public TLS fingerprinting service
		// (published in the GitHub repository service0427/v2_cp_app,
		// tls.md). Its JA4 is the one DEPENDENCIES.md helloRecords for Chrome.
		name:    "Chrome 143",
		ciphers: "1301,1302,1303,c02b,c02f,c02c,c030,cca9,cca8,c013,c014,009c,009d,002f,0035",
		exts:    "002d,0033,0010,fe0d,0017,44cd,0000,000b,000a,002b,ff01,0023,0012,0005,000d,001b",
		sigs:    "0403,0804,0401,0503,0805,0501,0806,0601",
		ja4:     "t13d1516h2_8daaf6152771_d8a2da3f94cd",
		ja4r:    "t13d1516h2_002f,0035,009c,009d,1301,1302,1303,c013,c014,c02b,c02c,c02f,c030,cca8,cca9_0005,000a,000b,000d,0012,0017,001b,0023,002b,002d,0033,44cd,fe0d,ff01_0403,0804,0401,0503,0805,0501,0806,0601",
		ja4o:    "t13d1516h2_acb858a92679_f96a17c57971",
	},
}

func TestJA4PublishedVectors(t *testing.T) {
	for _, v := range publishedVectors {
		t.Run(v.name, func(t *testing.T) {
			spec := helloSpec{
				ciphers:    greased(parseHexList(v.ciphers)),
				extensions: greased(parseHexList(v.exts)),
				serverName: "example.com",
				alpn:       []string{"h2", "http/1.1"},
				sigAlgs:    parseHexList(v.sigs),
				versions:   []uint16{0x3a3a, 0x0304, 0x0303},
				extraBody:  map[uint16][]byte{0x2a2a: {}, 0xfafa: {0}},
			}
			msg := spec.build()
			// Split across three helloRecords, as a large hello would be.
			ch, err := ParseClientHello(helloRecords(msg, len(msg)/3+1))
			if err != nil {
				t.Fatal(err)
			}
			if got := ch.JA4(); got != v.ja4 {
				t.Errorf("JA4() = %s, want %s", got, v.ja4)
			}
			if got := ch.JA4R(); got != v.ja4r {
				t.Errorf("JA4R() = %s\nwant %s", got, v.ja4r)
			}
			if got := ch.JA4O(); got != v.ja4o {
				t.Errorf("JA4O() = %s, want %s", got, v.ja4o)
			}
			wantRO := "t13d1516h2_" + v.ciphers + "_" + v.exts + "_" + v.sigs
			if got := ch.JA4RO(); got != wantRO {
				t.Errorf("JA4RO() = %s\nwant %s", got, wantRO)
			}
			if !bytes.Equal(ch.Raw, msg) {
				t.Errorf("Raw differs from the message")
			}
		})
	}
}

func TestParseClientHelloFields(t *testing.T) {
	spec := helloSpec{
		ciphers:    []uint16{0x0a0a, 0x1301, 0xc02b},
		extensions: []uint16{0x0000, 0x0010, 0x000d, 0x002b, 0x4a4a, 0x0017},
		serverName: "ja4.test",
		alpn:       []string{"h2", "http/1.1"},
		sigAlgs:    []uint16{0x0403, 0x0804},
		versions:   []uint16{0x0a0a, 0x0304, 0x0303},
	}
	ch, err := ParseClientHello(helloRecords(spec.build(), 1<<14))
	if err != nil {
		t.Fatal(err)
	}
	if ch.ServerName != "ja4.test" || !ch.HasServerName {
		t.Errorf("ServerName = %q (%v), want ja4.test", ch.ServerName, ch.HasServerName)
	}
	if !slices.Equal(ch.ALPN, []string{"h2", "http/1.1"}) {
		t.Errorf("ALPN = %q", ch.ALPN)
	}
	if !slices.Equal(ch.CipherSuites, spec.ciphers) {
		t.Errorf("CipherSuites = %04x, want %04x", ch.CipherSuites, spec.ciphers)
	}
	if !slices.Equal(ch.Extensions, spec.extensions) {
		t.Errorf("Extensions = %04x, want %04x", ch.Extensions, spec.extensions)
	}
	if !slices.Equal(ch.SignatureAlgorithms, spec.sigAlgs) {
		t.Errorf("SignatureAlgorithms = %04x", ch.SignatureAlgorithms)
	}
	if !slices.Equal(ch.SupportedVersions, spec.versions) {
		t.Errorf("SupportedVersions = %04x", ch.SupportedVersions)
	}
	if b, ok := ch.Extension(0x000d); !ok || !bytes.Equal(b, []byte{0, 4, 4, 3, 8, 4}) {
		t.Errorf("Extension(0x000d) = %x, %v", b, ok)
	}
	if _, ok := ch.Extension(0x0005); ok {
		t.Errorf("Extension(0x0005) found, want absent")
	}
	if got, want := ch.JA4()[:10], "t13d0205h2"; got != want {
		t.Errorf("JA4 prefix = %s, want %s", got, want)
	}
}

func TestJA4PartA(t *testing.T) {
	many := make([]uint16, 120)
	for i := range many {
		many[i] = uint16(i + 1)
	}
	tests := []struct {
		name string
		spec helloSpec
		want string // JA4 part a
	}{
		{"no SNI, no ALPN, TLS 1.2 legacy", helloSpec{ciphers: []uint16{0xc02f}, extensions: []uint16{0x0017}}, "t12i0101" + "00"},
		{"legacy TLS 1.0", helloSpec{version: 0x0301, ciphers: []uint16{0x002f}}, "t10i0100" + "00"},
		{"unknown version", helloSpec{version: 0x7f00, ciphers: []uint16{0x002f}}, "t00i0100" + "00"},
		{"supported_versions wins over legacy", helloSpec{ciphers: []uint16{0x1301}, extensions: []uint16{0x002b}, versions: []uint16{0x0303, 0x0304}}, "t13i0101" + "00"},
		{"http/1.1 first", helloSpec{extensions: []uint16{0x0010}, alpn: []string{"http/1.1", "h2"}}, "t12i0001" + "h1"},
		{"one-letter ALPN", helloSpec{extensions: []uint16{0x0010}, alpn: []string{"x"}}, "t12i0001" + "xx"},
		{"non-alphanumeric ALPN", helloSpec{extensions: []uint16{0x0010}, alpn: []string{"\xabcd\x3f"}}, "t12i0001" + "af"},
		{"empty ALPN list", helloSpec{extensions: []uint16{0x0010}}, "t12i0001" + "00"},
		{"more than 99 ciphers", helloSpec{ciphers: many}, "t12i9900" + "00"},
		{"GREASE not counted", helloSpec{ciphers: []uint16{0xdada, 0x1301}, extensions: []uint16{0x0a0a, 0x0000}, serverName: "a.test"}, "t12d0101" + "00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch, err := ParseClientHello(helloRecords(tt.spec.build(), 1<<14))
			if err != nil {
				t.Fatal(err)
			}
			if got, _, _ := strings.Cut(ch.JA4(), "_"); got != tt.want {
				t.Errorf("JA4 part a = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestJA4EmptyLists(t *testing.T) {
	ch, err := ParseClientHello(helloRecords(helloSpec{}.build(), 1<<14))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ch.JA4(), "t12i000000_000000000000_000000000000"; got != want {
		t.Errorf("JA4() = %s, want %s", got, want)
	}
	// No signature algorithms: the extension list is hashed alone, with no
	// trailing underscore (the spec's 6d807ffa2a79 example).
	spec := helloSpec{extensions: parseHexList("0005,000a,000b,000d,0012,0015,0017,001b,0023,002b,002d,0033,4469,ff01")}
	spec.versions = []uint16{0x0304}
	ch, err = ParseClientHello(helloRecords(spec.build(), 1<<14))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ch.JA4(), "t13i0014"+"00_000000000000_6d807ffa2a79"; got != want {
		t.Errorf("JA4() = %s, want %s", got, want)
	}
}

func TestParseClientHelloErrors(t *testing.T) {
	msg := helloSpec{ciphers: []uint16{0x1301}, extensions: []uint16{0x0000}, serverName: "a.test"}.build()
	full := helloRecords(msg, 1<<14)
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"short header", full[:3]},
		{"truncated record", full[:len(full)-1]},
		{"second record missing", helloRecords(msg, 20)[:25]},
		{"not handshake", append([]byte{0x17}, full[1:]...)},
		{"not TLS", append([]byte{0x16, 0x02}, full[2:]...)},
		{"server hello", helloRecords(append([]byte{2}, msg[1:]...), 1<<14)},
		{"bad extension length", helloRecords(corruptLastExtension(msg), 1<<14)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if ch, err := ParseClientHello(tt.data); err == nil {
				t.Errorf("ParseClientHello = %+v, want error", ch)
			}
		})
	}
}

// corruptLastExtension makes the final extension claim more bytes than
// remain.
func corruptLastExtension(msg []byte) []byte {
	m := slices.Clone(msg)
	// The SNI extension of "a.test" is last: type 0000, length 000b.
	i := bytes.LastIndex(m, []byte{0x00, 0x00, 0x00, 0x0b})
	m[i+3] = 0x7f
	return m
}

func TestReadClientHelloStopsAtMessage(t *testing.T) {
	msg := helloSpec{ciphers: []uint16{0x1301}}.build()
	trailer := []byte{0x14, 0x03, 0x03, 0x00, 0x01, 0x01}
	r := bytes.NewReader(append(helloRecords(msg, 16), trailer...))
	if _, err := ReadClientHello(r); err != nil {
		t.Fatal(err)
	}
	if r.Len() != len(trailer) {
		t.Errorf("ReadClientHello left %d bytes, want %d", r.Len(), len(trailer))
	}
}

func TestClientHelloServerCryptoTLS(t *testing.T) {
	s, err := StartClientHelloServer()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !strings.HasPrefix(s.Addr(), "127.0.0.1:") {
		t.Errorf("Addr() = %s, want 127.0.0.1:port", s.Addr())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	c := tls.Client(conn, &tls.Config{ServerName: "hello.test", NextProtos: []string{"h2", "http/1.1"}})
	herr := c.HandshakeContext(ctx)
	c.Close()
	if herr == nil {
		t.Fatal("handshake succeeded against a server that only helloRecords hellos")
	}
	if !strings.Contains(herr.Error(), "handshake failure") {
		t.Errorf("handshake error = %v, want the handshake_failure alert", herr)
	}

	ch, err := s.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ch.ServerName != "hello.test" {
		t.Errorf("ServerName = %q, want hello.test", ch.ServerName)
	}
	if !slices.Equal(ch.ALPN, []string{"h2", "http/1.1"}) {
		t.Errorf("ALPN = %q", ch.ALPN)
	}
	if !slices.Contains(ch.SupportedVersions, tls.VersionTLS13) {
		t.Errorf("SupportedVersions = %04x, want TLS 1.3 among them", ch.SupportedVersions)
	}
	if !slices.Contains(ch.CipherSuites, tls.TLS_AES_128_GCM_SHA256) {
		t.Errorf("CipherSuites = %04x, want TLS_AES_128_GCM_SHA256 among them", ch.CipherSuites)
	}
	if !slices.Contains(ch.SignatureAlgorithms, uint16(tls.ECDSAWithP256AndSHA256)) {
		t.Errorf("SignatureAlgorithms = %04x", ch.SignatureAlgorithms)
	}
	if !slices.Contains(ch.KeyShareGroups, uint16(tls.X25519)) {
		t.Errorf("KeyShareGroups = %04x, want X25519 among them", ch.KeyShareGroups)
	}
	if !strings.HasPrefix(ch.JA4(), "t13d") || !strings.Contains(ch.JA4(), "h2_") {
		t.Errorf("JA4() = %s, want t13d…h2_…", ch.JA4())
	}
}

func TestClientHelloServerGarbageAndClose(t *testing.T) {
	s, err := StartClientHelloServer()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// A connection that closes without a byte is not reported.
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	// A connection that sends HTTP is reported as an error.
	c, err = net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	if _, err := s.Next(ctx); err == nil {
		t.Error("Next after plaintext HTTP: no error")
	}
	c.Close()

	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	if _, err := s.Next(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Next with nothing pending = %v, want deadline exceeded", err)
	}

	// A connection left open does not hold Close up.
	idle, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	time.Sleep(20 * time.Millisecond)
	if err := s.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
	s.Close() // idempotent
	if _, err := s.Next(ctx); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Next after Close = %v, want net.ErrClosed", err)
	}
}

func TestIsGREASE(t *testing.T) {
	for i := range 16 {
		v := uint16(i<<12 | 0x0a00 | i<<4 | 0x0a)
		if !IsGREASE(v) {
			t.Errorf("IsGREASE(%#04x) = false", v)
		}
	}
	for _, v := range []uint16{0x0a1a, 0x1a0a, 0x0000, 0x1301, 0xfafb, 0x0a0b} {
		if IsGREASE(v) {
			t.Errorf("IsGREASE(%#04x) = true", v)
		}
	}
}
