package proxy

import (
	"encoding/binary"
	"errors"
)

// maxHello is the longest first read a tunnel waits for: one TLS record.
const maxHello = 5 + 1<<14 + 256

// Extension types read from a ClientHello.
const (
	extServerName = 0x0000
	extECH        = 0xfe0d // encrypted_client_hello
)

// isTLSHandshake reports whether b starts a TLS handshake record.
func isTLSHandshake(b []byte) bool {
	return len(b) >= 3 && b[0] == 0x16 && b[1] == 0x03 && b[2] <= 0x04
}

// helloLength returns the length of the first TLS record when b starts a
// handshake record whose header is complete.
func helloLength(b []byte) (int, bool) {
	if len(b) < 5 || !isTLSHandshake(b) {
		return 0, false
	}
	return 5 + int(binary.BigEndian.Uint16(b[3:5])), true
}

// clientHello is what a tunnel's check reads from a ClientHello.
type clientHello struct {
	sni string // the host_name of server_name, or ""
	ech bool   // an encrypted_client_hello extension: sni is the outer name
}

var errHello = errors.New("not a complete ClientHello in its first record")

// parseClientHello reads the ClientHello in b's first TLS record. A hello
// that does not fit its first record is refused (no common client sends
// one).
func parseClientHello(b []byte) (clientHello, error) {
	var h clientHello
	n, ok := helloLength(b)
	if !ok || len(b) < n {
		return h, errHello
	}
	rec := b[5:n]
	if len(rec) < 4 || rec[0] != 0x01 {
		return h, errors.New("the first handshake message is not a ClientHello")
	}
	mlen := int(rec[1])<<16 | int(rec[2])<<8 | int(rec[3])
	if 4+mlen > len(rec) {
		return h, errHello
	}
	p := rec[4 : 4+mlen]
	// legacy_version(2) random(32)
	if len(p) < 34 {
		return h, errHello
	}
	p = p[34:]
	skip := func(lenBytes int) bool {
		if len(p) < lenBytes {
			return false
		}
		l := 0
		for i := range lenBytes {
			l = l<<8 | int(p[i])
		}
		if len(p) < lenBytes+l {
			return false
		}
		p = p[lenBytes+l:]
		return true
	}
	if !skip(1) || !skip(2) || !skip(1) { // session id, cipher suites, compression
		return h, errHello
	}
	if len(p) == 0 {
		return h, nil // no extensions
	}
	if len(p) < 2 {
		return h, errHello
	}
	elen := int(binary.BigEndian.Uint16(p))
	p = p[2:]
	if elen > len(p) {
		return h, errHello
	}
	p = p[:elen]
	seen := map[uint16]bool{}
	for len(p) > 0 {
		if len(p) < 4 {
			return h, errHello
		}
		typ := binary.BigEndian.Uint16(p)
		l := int(binary.BigEndian.Uint16(p[2:]))
		if 4+l > len(p) {
			return h, errHello
		}
		data := p[4 : 4+l]
		p = p[4+l:]
		if seen[typ] {
			return h, errors.New("a repeated extension")
		}
		seen[typ] = true
		switch typ {
		case extECH:
			h.ech = true
		case extServerName:
			name, err := parseSNI(data)
			if err != nil {
				return h, err
			}
			h.sni = name
		}
	}
	return h, nil
}

// parseSNI reads the one host_name of a server_name extension.
func parseSNI(d []byte) (string, error) {
	if len(d) < 2 || int(binary.BigEndian.Uint16(d)) != len(d)-2 {
		return "", errors.New("a malformed server_name")
	}
	d = d[2:]
	name := ""
	for len(d) > 0 {
		if len(d) < 3 {
			return "", errors.New("a malformed server_name")
		}
		typ := d[0]
		l := int(binary.BigEndian.Uint16(d[1:]))
		if 3+l > len(d) {
			return "", errors.New("a malformed server_name")
		}
		if typ == 0 {
			if name != "" {
				return "", errors.New("two host names in server_name")
			}
			name = string(d[3 : 3+l])
			if name == "" {
				return "", errors.New("an empty host name in server_name")
			}
		}
		d = d[3+l:]
	}
	return name, nil
}
