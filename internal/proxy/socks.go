package proxy

import (
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
)

// SOCKS5 (RFC 1928) with username/password authentication (RFC 1929).
const (
	socksVersion     = 5
	authNone         = 0x00
	authPassword     = 0x02
	authNoAcceptable = 0xff // no acceptable method
	cmdConnect       = 0x01
	atypIPv4         = 0x01
	atypDomain       = 0x03
	atypIPv6         = 0x04
	repSucceeded     = 0x00
	repFailure       = 0x01
	repNotAllowed    = 0x02
	repNetwork       = 0x03
	repHost          = 0x04
	repRefused       = 0x05
	repTTL           = 0x06
	repCommand       = 0x07
	repAddressType   = 0x08
)

// serveSOCKS5 serves one SOCKS5 connection: greeting, authentication, one
// CONNECT request, then the tunnel.
func (s *Server) serveSOCKS5(c *peekedConn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(s.opts.firstBytes()))
	var hdr [2]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(c, methods); err != nil {
		return
	}
	offered := func(m byte) bool {
		for _, x := range methods {
			if x == m {
				return true
			}
		}
		return false
	}
	var (
		p   airlock.Principal
		err error
	)
	switch {
	case c.fixed != nil && offered(authNone):
		c.Write([]byte{socksVersion, authNone})
		p = *c.fixed
	case offered(authPassword):
		c.Write([]byte{socksVersion, authPassword})
		user, pass, ok := readSOCKSPassword(c)
		if !ok {
			return
		}
		p, err = s.identify(s.life, c, user, pass, true)
		if err != nil {
			s.metrics.refused(airlock.ReasonOf(err))
			c.Write([]byte{0x01, 0x01})
			return
		}
		c.Write([]byte{0x01, 0x00})
	case offered(authNone):
		p, err = s.identify(s.life, c, "", "", false)
		if err != nil {
			s.metrics.refused(airlock.ReasonOf(err))
			c.Write([]byte{socksVersion, authNoAcceptable})
			return
		}
		c.Write([]byte{socksVersion, authNone})
	default:
		s.metrics.refused(airlock.ReasonProxyCredentials)
		c.Write([]byte{socksVersion, authNoAcceptable})
		return
	}

	var req [4]byte
	if _, err := io.ReadFull(c, req[:]); err != nil || req[0] != socksVersion {
		return
	}
	host, ok := readSOCKSAddr(c, req[3])
	var portb [2]byte
	if ok {
		_, perr := io.ReadFull(c, portb[:])
		ok = perr == nil
	}
	c.SetDeadline(time.Time{})
	target := "socks5://" + host + ":" + strconv.Itoa(int(binary.BigEndian.Uint16(portb[:])))
	call, err := s.deps.Begin(s.life, p, airlock.CapabilityHTTP, Broker, target)
	if err != nil {
		s.metrics.refused(airlock.ReasonOf(err))
		socksReply(c, repNotAllowed)
		return
	}
	switch {
	case !ok:
		socksReply(c, repAddressType)
		s.metrics.refused(airlock.ReasonSOCKS)
		call.End(airlock.Errorf(airlock.CodeInvalid, airlock.ReasonSOCKS, "SOCKS5 address type %d", req[3]), 0, 0)
		return
	case req[1] != cmdConnect:
		socksReply(c, repCommand)
		s.metrics.refused(airlock.ReasonSOCKS)
		call.End(airlock.Errorf(airlock.CodeInvalid, airlock.ReasonSOCKS, "SOCKS5 command %d (only CONNECT is served)", req[1]), 0, 0)
		return
	}
	hostport := net.JoinHostPort(host, strconv.Itoa(int(binary.BigEndian.Uint16(portb[:]))))
	t, up, err := s.dial(call, hostport)
	if err != nil {
		socksReply(c, socksCode(err))
		s.metrics.refused(airlock.ReasonOf(err))
		call.End(err, 0, 0)
		return
	}
	// The bound address is not the caller's business (it would name an
	// address of the proxy's side): zeros, as RFC 1928 allows.
	if err := socksReply(c, repSucceeded); err != nil {
		up.Close()
		call.End(err, 0, 0)
		return
	}
	s.tunnel(call, t, c, up)
}

// refuseSOCKS4 answers a SOCKS4 request "rejected" (SOCKS4 carries no
// password and resolves names on the client side). With a known
// principal (ServeAs, development) the refusal is an audited decision.
func (s *Server) refuseSOCKS4(c *peekedConn) {
	defer c.Close()
	s.metrics.refused(airlock.ReasonSOCKS)
	c.SetDeadline(time.Now().Add(s.opts.firstBytes()))
	var hdr [8]byte
	io.ReadFull(c, hdr[:])
	var p *airlock.Principal
	if c.fixed != nil {
		p = c.fixed
	} else if s.opts.Development && loopbackConn(c.Conn) {
		p = &s.opts.Local
	}
	if p != nil {
		target := "socks4://" + netip.AddrFrom4([4]byte(hdr[4:8])).String() + ":" + strconv.Itoa(int(binary.BigEndian.Uint16(hdr[2:4])))
		if call, err := s.deps.Begin(s.life, *p, airlock.CapabilityHTTP, Broker, target); err == nil {
			call.End(airlock.Errorf(airlock.CodeInvalid, airlock.ReasonSOCKS, "SOCKS4 is not served: use SOCKS5 (socks5h)"), 0, 0)
		}
	}
	c.Write([]byte{0x00, 0x5b, 0, 0, 0, 0, 0, 0})
}

func readSOCKSPassword(c net.Conn) (user, pass string, ok bool) {
	var v [2]byte
	if _, err := io.ReadFull(c, v[:]); err != nil || v[0] != 0x01 {
		return "", "", false
	}
	u := make([]byte, v[1])
	if _, err := io.ReadFull(c, u); err != nil {
		return "", "", false
	}
	var pl [1]byte
	if _, err := io.ReadFull(c, pl[:]); err != nil {
		return "", "", false
	}
	pw := make([]byte, pl[0])
	if _, err := io.ReadFull(c, pw); err != nil {
		return "", "", false
	}
	return string(u), string(pw), true
}

// readSOCKSAddr reads DST.ADDR of type atyp: a domain name is kept as a
// name (Airlock resolves it), an address as its literal.
func readSOCKSAddr(c net.Conn, atyp byte) (string, bool) {
	switch atyp {
	case atypIPv4:
		var b [4]byte
		if _, err := io.ReadFull(c, b[:]); err != nil {
			return "", false
		}
		return netip.AddrFrom4(b).String(), true
	case atypIPv6:
		var b [16]byte
		if _, err := io.ReadFull(c, b[:]); err != nil {
			return "", false
		}
		return netip.AddrFrom16(b).String(), true
	case atypDomain:
		var l [1]byte
		if _, err := io.ReadFull(c, l[:]); err != nil {
			return "", false
		}
		b := make([]byte, l[0])
		if _, err := io.ReadFull(c, b); err != nil {
			return "", false
		}
		return string(b), true
	}
	return "?", false
}

func socksReply(c net.Conn, rep byte) error {
	c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, err := c.Write([]byte{socksVersion, rep, 0, atypIPv4, 0, 0, 0, 0, 0, 0})
	c.SetWriteDeadline(time.Time{})
	return err
}

// socksCode is the SOCKS5 reply code of a refusal.
func socksCode(err error) byte {
	switch airlock.CodeOf(err) {
	case airlock.CodeDenied, airlock.CodeRevoked, airlock.CodeRateLimited:
		return repNotAllowed
	case airlock.CodeNotFound:
		return repHost
	case airlock.CodeTimeout:
		return repTTL
	case airlock.CodeInvalid:
		return repAddressType
	case airlock.CodeUpstream:
		if airlock.ReasonOf(err) == airlock.Reason(egress.ReasonConnect) {
			return repRefused
		}
		return repNetwork
	}
	return repFailure
}
