package proxy

import (
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
)

// helloFor returns the first TLS record Go's client sends for serverName.
func helloFor(t testing.TB, serverName string) []byte {
	t.Helper()
	c, s := net.Pipe()
	defer s.Close()
	go func() {
		tls.Client(c, &tls.Config{ServerName: serverName, InsecureSkipVerify: serverName == ""}).Handshake()
		c.Close()
	}()
	hdr := make([]byte, 5)
	if _, err := io.ReadFull(s, hdr); err != nil {
		t.Fatal(err)
	}
	rec := make([]byte, binary.BigEndian.Uint16(hdr[3:]))
	if _, err := io.ReadFull(s, rec); err != nil {
		t.Fatal(err)
	}
	return append(hdr, rec...)
}

// withExtension appends an extension to a one-record ClientHello, fixing
// the three lengths.
func withExtension(t testing.TB, hello []byte, typ uint16, data []byte) []byte {
	t.Helper()
	out := append([]byte(nil), hello...)
	ext := binary.BigEndian.AppendUint16(nil, typ)
	ext = binary.BigEndian.AppendUint16(ext, uint16(len(data)))
	ext = append(ext, data...)
	// Find the extensions length: record(5) type(1) len(3) version(2) random(32).
	p := 5 + 4 + 34
	p += 1 + int(out[p])                           // session id
	p += 2 + int(binary.BigEndian.Uint16(out[p:])) // cipher suites
	p += 1 + int(out[p])                           // compression
	binary.BigEndian.PutUint16(out[p:], binary.BigEndian.Uint16(out[p:])+uint16(len(ext)))
	out = append(out, ext...)
	binary.BigEndian.PutUint16(out[3:], binary.BigEndian.Uint16(out[3:])+uint16(len(ext)))
	mlen := int(out[6])<<16 | int(out[7])<<8 | int(out[8]) + len(ext)
	out[6], out[7], out[8] = byte(mlen>>16), byte(mlen>>8), byte(mlen)
	return out
}

func TestParseClientHello(t *testing.T) {
	h, err := parseClientHello(helloFor(t, "site.test"))
	if err != nil || h.sni != "site.test" || h.ech {
		t.Fatalf("got %+v, %v", h, err)
	}
	h, err = parseClientHello(helloFor(t, ""))
	if err != nil || h.sni != "" {
		t.Fatalf("no SNI: got %+v, %v", h, err)
	}
	h, err = parseClientHello(withExtension(t, helloFor(t, "public.test"), extECH, []byte{0, 1, 2, 3}))
	if err != nil || h.sni != "public.test" || !h.ech {
		t.Fatalf("ECH: got %+v, %v", h, err)
	}
	if _, err := parseClientHello(withExtension(t, helloFor(t, "site.test"), extServerName, []byte{0, 5, 0, 0, 2, 'x', 'y'})); err == nil {
		t.Fatal("a repeated server_name was accepted")
	}
}

func TestCheckFirst(t *testing.T) {
	s := &Server{plain: map[uint16]bool{22: true}}
	name := func(hp string) egress.Target {
		tg, err := egress.ParseHostPort(hp)
		if err != nil {
			t.Fatal(err)
		}
		return tg
	}
	tests := []struct {
		name   string
		target string
		first  []byte
		reason airlock.Reason // "" allowed
	}{
		{"matching SNI", "site.test:443", helloFor(t, "site.test"), ""},
		{"SNI case differs", "site.test:443", helloFor(t, "SITE.test"), ""},
		{"fronting", "site.test:443", helloFor(t, "other.test"), airlock.ReasonSNIMismatch},
		{"ECH outer name differs", "site.test:443", withExtension(t, helloFor(t, "cover.test"), extECH, []byte{1}), airlock.ReasonSNIMismatch},
		{"ECH outer name matches", "site.test:443", withExtension(t, helloFor(t, "site.test"), extECH, []byte{1}), ""},
		{"no SNI to a name", "site.test:443", helloFor(t, ""), airlock.ReasonSNIMissing},
		{"no SNI to an IP literal", "192.0.2.1:443", helloFor(t, ""), ""},
		{"plain HTTP", "site.test:80", []byte("GET / HTTP/1.1\r\n"), airlock.ReasonTunnelNotTLS},
		{"ssh on a plain port", "site.test:22", []byte("SSH-2.0-x\r\n"), ""},
		{"truncated hello", "site.test:443", helloFor(t, "site.test")[:60], airlock.ReasonTunnelNotTLS},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := s.checkFirst(name(tc.target), tc.first)
			if got := airlock.ReasonOf(err); got != tc.reason {
				t.Fatalf("reason %q, want %q (%v)", got, tc.reason, err)
			}
		})
	}
}

// FuzzParseClientHello: no input panics the parser.
func FuzzParseClientHello(f *testing.F) {
	f.Add(helloFor(f, "site.test"))
	f.Add(withExtension(f, helloFor(f, "a.test"), extECH, []byte{1, 2}))
	f.Add([]byte{0x16, 3, 1, 0, 4, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		parseClientHello(b)
	})
}
