package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"

	utls "github.com/refraction-networking/utls"
)

// TLSProfile names the TLS ClientHello (and the default request headers
// that go with it) that egress presents to servers.
type TLSProfile string

// The supported profiles.
const (
	// ProfileGo is Go's own crypto/tls ClientHello and an honest
	// "airlock/…" User-Agent.
	ProfileGo TLSProfile = "go"
	// ProfileChrome is the ClientHello and top-level navigation headers of
	// desktop Chrome 156 on Windows (JA4 t13d1517h2_8daaf6152771_cb7bf5808d99,
	// the same as Chrome 152 and later on every platform). It is the default
	// for web fetches.
	ProfileChrome TLSProfile = "chrome"
)

// DefaultTLSProfile is the profile used when none is configured.
const DefaultTLSProfile = ProfileChrome

// chromeMajorVersion is the Chrome release ProfileChrome claims to be. Its
// ClientHello (chromeSpec) was checked against Chromium 156; bump both
// together, and re-run the JA4 test against the installed Chromium.
const chromeMajorVersion = 156

// goUserAgent is the User-Agent of ProfileGo.
const goUserAgent = "airlock/0.1 (+https://github.com/airlockhq/airlock)"

// maxChainDepth is the longest certificate chain (leaf to root inclusive)
// egress accepts.
const maxChainDepth = 10

// TLSProfiles returns the supported profiles, the default first.
func TLSProfiles() []TLSProfile { return []TLSProfile{ProfileChrome, ProfileGo} }

// ParseTLSProfile returns the profile named by s, ignoring case and
// surrounding space. The empty string means DefaultTLSProfile. An unknown
// name is an *Error with Code CodeInvalid and Reason ReasonMalformed.
func ParseTLSProfile(s string) (TLSProfile, error) {
	name := strings.ToLower(strings.TrimSpace(s))
	if name == "" {
		return DefaultTLSProfile, nil
	}
	if p := TLSProfile(name); slices.Contains(TLSProfiles(), p) {
		return p, nil
	}
	names := make([]string, 0, len(TLSProfiles()))
	for _, p := range TLSProfiles() {
		names = append(names, string(p))
	}
	return "", &Error{Code: CodeInvalid, Reason: ReasonMalformed, Op: "parse",
		Detail: fmt.Sprintf("unknown TLS profile %q (want one of: %s)", s, strings.Join(names, ", "))}
}

// tlsHandshake runs the client side of a TLS handshake over conn, which is
// already connected to the pinned address. serverName is both the SNI and
// the name the certificate must be valid for; an IP literal sends no SNI and
// is checked against the certificate's IP SANs. roots nil means the system
// roots. A verified chain may hold at most maxChainDepth certificates.
//
// ProfileGo offers nextProtos as ALPN. The browser profiles offer what the
// browser offers: "h2", "http/1.1" when nextProtos is empty or contains
// "h2"; when nextProtos is non-empty and lacks "h2" (an HTTP/1.1-only
// caller), they offer exactly nextProtos and drop ALPS, as Chrome does for
// its HTTP/1.1-only connections (WebSockets). The JA4 then ends in "h1"
// instead of "h2" and counts one extension fewer.
//
// It returns the TLS connection and the negotiated ALPN protocol ("" when
// none). On failure conn is closed and the error is an *Error with Op "tls":
// Code CodeTimeout when ctx's deadline or a conn deadline passed,
// CodeTimeout with Reason ReasonCanceled when ctx was canceled, and
// otherwise Code CodeUpstream with Reason ReasonTLS.
func tlsHandshake(ctx context.Context, conn net.Conn, serverName string, profile TLSProfile, nextProtos []string, roots *x509.CertPool) (net.Conn, string, error) {
	if serverName == "" {
		conn.Close()
		return nil, "", &Error{Code: CodeInvalid, Reason: ReasonEmptyHost, Op: "tls", Detail: "no server name to verify the certificate against"}
	}
	switch profile {
	case ProfileGo:
		c := tls.Client(conn, &tls.Config{
			ServerName: serverName,
			RootCAs:    roots,
			NextProtos: slices.Clone(nextProtos),
			MinVersion: tls.VersionTLS12,
			VerifyConnection: func(cs tls.ConnectionState) error {
				return checkChainDepth(cs.VerifiedChains)
			},
		})
		if err := c.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, "", handshakeError(ctx, serverName, err)
		}
		return c, c.ConnectionState().NegotiatedProtocol, nil
	case ProfileChrome:
		u := utls.UClient(conn, &utls.Config{
			ServerName: serverName,
			RootCAs:    roots,
			MinVersion: utls.VersionTLS12,
			VerifyConnection: func(cs utls.ConnectionState) error {
				return checkChainDepth(cs.VerifiedChains)
			},
		}, utls.HelloCustom)
		if err := u.ApplyPreset(chromeSpec(nextProtos)); err != nil {
			conn.Close()
			return nil, "", &Error{Code: CodeInternal, Reason: ReasonTLS, Op: "tls", Target: serverName, Detail: "apply ClientHello spec", Err: err}
		}
		if err := u.HandshakeContext(ctx); err != nil {
			u.Close()
			return nil, "", handshakeError(ctx, serverName, err)
		}
		return u, u.ConnectionState().NegotiatedProtocol, nil
	}
	conn.Close()
	return nil, "", &Error{Code: CodeInvalid, Reason: ReasonMalformed, Op: "tls", Target: serverName,
		Detail: fmt.Sprintf("unknown TLS profile %q", profile)}
}

// checkChainDepth accepts the handshake if at least one verified chain is
// short enough. With no verified chains (verification skipped) there is
// nothing to check.
func checkChainDepth(chains [][]*x509.Certificate) error {
	if len(chains) == 0 {
		return nil
	}
	for _, c := range chains {
		if len(c) <= maxChainDepth {
			return nil
		}
	}
	return fmt.Errorf("certificate chain longer than %d certificates", maxChainDepth)
}

func handshakeError(ctx context.Context, serverName string, err error) *Error {
	e := &Error{Code: CodeUpstream, Reason: ReasonTLS, Op: "tls", Target: serverName, Err: err}
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded):
		e.Code, e.Reason = CodeTimeout, ReasonTimeout
	case errors.Is(err, context.Canceled) || errors.Is(ctx.Err(), context.Canceled):
		e.Code, e.Reason = CodeTimeout, ReasonCanceled
	}
	return e
}

// chromeTrustAnchorIDs is the body of Chrome's trust_anchors extension
// (0xca34, draft-ietf-tls-trust-anchor-ids): the 28 trust anchor IDs of the
// Chrome Root Store that Chromium 156 ships, sorted, as captured from
// Debian's Chromium 156.0.8078.79 (the same set Chrome 152 and 153 stable
// send). Only the extension's presence enters JA4; its length and bytes are
// visible to finer fingerprints, so keep it a real capture.
var chromeTrustAnchorIDs = hexBytes("00b8" +
	"0582df130201" + "0582df130206" + "0582df13020d" + "0582df13020e" +
	"0582df13020f" + "0582df130212" + "0582df130213" + "0582df130214" +
	"08839a648c9b2d0107" + "08839a648c9b2d0108" + "08839a648c9b2d0109" +
	"08839a648c9b2d010a" + "08839a648c9b2d010b" + "08839a648c9b2d010c" +
	"08839a648c9b2d010d" + "08839a648c9b2d0112" + "08839a648c9b2d0113" +
	"04d6790901" + "04d6790904" + "04d6790905" + "04d6790906" + "04d6790907" +
	"04d6790908" + "04d679090a" + "04d679090b" + "04d679090c" + "04d679090d" +
	"04d679090f")

const extTrustAnchors = 0xca34

// ML-DSA signature schemes (draft-ietf-tls-mldsa), which Chrome offers
// first. Servers without an ML-DSA certificate never pick them.
const (
	sigMLDSA44 utls.SignatureScheme = 0x0904
	sigMLDSA65 utls.SignatureScheme = 0x0905
	sigMLDSA87 utls.SignatureScheme = 0x0906
)

// chromeSpec returns a fresh ClientHelloSpec of desktop Chrome 152 and
// later (checked against Chromium 156). It is utls's HelloChrome_133 plus
// what Chrome added since: a GREASE value and the ML-DSA schemes at the
// head of signature_algorithms, and the trust_anchors extension. Its JA4 is
// t13d1517h2_8daaf6152771_cb7bf5808d99. A spec holds per-connection state:
// never share one.
func chromeSpec(nextProtos []string) *utls.ClientHelloSpec {
	alpn := []string{"h2", "http/1.1"}
	h1Only := len(nextProtos) > 0 && !slices.Contains(nextProtos, "h2")
	if h1Only {
		alpn = slices.Clone(nextProtos)
	}
	exts := []utls.TLSExtension{
		&utls.UtlsGREASEExtension{},
		&utls.SNIExtension{},
		&utls.ExtendedMasterSecretExtension{},
		&utls.RenegotiationInfoExtension{Renegotiation: utls.RenegotiateOnceAsClient},
		&utls.SupportedCurvesExtension{Curves: []utls.CurveID{
			utls.GREASE_PLACEHOLDER,
			utls.X25519MLKEM768,
			utls.X25519,
			utls.CurveP256,
			utls.CurveP384,
		}},
		&utls.SupportedPointsExtension{SupportedPoints: []byte{0}}, // uncompressed
		&utls.SessionTicketExtension{},
		&utls.ALPNExtension{AlpnProtocols: alpn},
		&utls.StatusRequestExtension{},
		&utls.SignatureAlgorithmsExtension{SupportedSignatureAlgorithms: []utls.SignatureScheme{
			// utls substitutes no GREASE placeholder here: draw one as
			// Chrome does, per connection.
			utls.SignatureScheme(randomGREASE()),
			sigMLDSA44,
			sigMLDSA65,
			sigMLDSA87,
			utls.ECDSAWithP256AndSHA256,
			utls.PSSWithSHA256,
			utls.PKCS1WithSHA256,
			utls.ECDSAWithP384AndSHA384,
			utls.PSSWithSHA384,
			utls.PKCS1WithSHA384,
			utls.PSSWithSHA512,
			utls.PKCS1WithSHA512,
		}},
		&utls.SCTExtension{},
		&utls.KeyShareExtension{KeyShares: []utls.KeyShare{
			{Group: utls.CurveID(utls.GREASE_PLACEHOLDER), Data: []byte{0}},
			{Group: utls.X25519MLKEM768},
			{Group: utls.X25519},
		}},
		&utls.PSKKeyExchangeModesExtension{Modes: []uint8{utls.PskModeDHE}},
		&utls.SupportedVersionsExtension{Versions: []uint16{
			utls.GREASE_PLACEHOLDER,
			utls.VersionTLS13,
			utls.VersionTLS12,
		}},
		&utls.UtlsCompressCertExtension{Algorithms: []utls.CertCompressionAlgo{utls.CertCompressionBrotli}},
		&utls.GenericExtension{Id: extTrustAnchors, Data: slices.Clone(chromeTrustAnchorIDs)},
	}
	if !h1Only {
		// BoringSSL sends ALPS only when the protocol it configures (h2) is
		// offered.
		exts = append(exts, &utls.ApplicationSettingsExtensionNew{SupportedProtocols: []string{"h2"}})
	}
	exts = append(exts, utls.BoringGREASEECH(), &utls.UtlsGREASEExtension{})
	return &utls.ClientHelloSpec{
		CipherSuites: []uint16{
			utls.GREASE_PLACEHOLDER,
			utls.TLS_AES_128_GCM_SHA256,
			utls.TLS_AES_256_GCM_SHA384,
			utls.TLS_CHACHA20_POLY1305_SHA256,
			utls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
			utls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
			utls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
			utls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
			utls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305,
			utls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305,
			utls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA,
			utls.TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA,
			utls.TLS_RSA_WITH_AES_128_GCM_SHA256,
			utls.TLS_RSA_WITH_AES_256_GCM_SHA384,
			utls.TLS_RSA_WITH_AES_128_CBC_SHA,
			utls.TLS_RSA_WITH_AES_256_CBC_SHA,
		},
		CompressionMethods: []uint8{0}, // null
		// Chrome permutes its extensions per connection, GREASE fixed at
		// both ends.
		Extensions: utls.ShuffleChromeTLSExtensions(exts),
	}
}

// randomGREASE returns a random GREASE value (RFC 8701): 0x?a?a.
func randomGREASE() uint16 {
	n := uint16(rand.IntN(16))
	return 0x0a0a | n<<12 | n<<4
}

func hexBytes(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// Chrome's navigation headers.
const (
	chromeAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,image/jxl,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7"
	// chromePlatform is the platform ProfileChrome claims. Windows is the
	// most common desktop platform; Chrome's ClientHello is the same on all.
	chromePlatform        = "Windows"
	profileAcceptEncoding = "gzip, deflate, br, zstd"
)

// chromeUserAgent is Chrome's reduced User-Agent: minor, build and patch
// are always 0.
var chromeUserAgent = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/" +
	strconv.Itoa(chromeMajorVersion) + ".0.0.0 Safari/537.36"

// profileHeaders returns the default request headers of profile p, in the
// order the browser sends them for a top-level navigation typed into the
// address bar, as Chromium 156 sends them over HTTP/1.1 (after Host and
// Connection, which the transport writes). Over HTTP/2 Chrome sends the same
// names lower-cased, in the same order, followed by "priority: u=0, i".
// Each call returns a fresh slice.
func profileHeaders(p TLSProfile) [][2]string {
	switch p {
	case ProfileChrome:
		return [][2]string{
			{"sec-ch-ua", chromeBrands(chromeMajorVersion, true)},
			{"sec-ch-ua-mobile", "?0"},
			{"sec-ch-ua-platform", strconv.Quote(chromePlatform)},
			{"Upgrade-Insecure-Requests", "1"},
			{"User-Agent", chromeUserAgent},
			{"Accept", chromeAccept},
			{"Sec-Fetch-Site", "none"},
			{"Sec-Fetch-Mode", "navigate"},
			{"Sec-Fetch-User", "?1"},
			{"Sec-Fetch-Dest", "document"},
			{"Accept-Encoding", profileAcceptEncoding},
			{"Accept-Language", "en-US,en;q=0.9"},
		}
	default:
		return [][2]string{
			{"User-Agent", goUserAgent},
			{"Accept-Encoding", profileAcceptEncoding},
		}
	}
}

// chromeBrands returns the sec-ch-ua value of a Chrome (googleChrome) or
// Chromium build of the given major version. It follows Chromium's
// GenerateBrandVersionList and GetGreasedUserAgentBrandVersion
// (components/embedder_support/user_agent_utils.cc): the major version
// seeds the GREASE brand's punctuation, its version and the list's order.
// Chrome 133 gives `"Not(A:Brand";v="99", "Google Chrome";v="133",
// "Chromium";v="133"` and 156 `"Not:A-Brand";v="8", "Chromium";v="156",
// "Google Chrome";v="156"`.
func chromeBrands(major int, googleChrome bool) string {
	greaseyChars := []string{" ", "(", ":", "-", ".", "/", ")", ";", "=", "?", "_"}
	greasedVersions := []string{"8", "99", "24"}
	grease := fmt.Sprintf("%q;v=%q",
		"Not"+greaseyChars[major%len(greaseyChars)]+"A"+greaseyChars[(major+1)%len(greaseyChars)]+"Brand",
		greasedVersions[major%len(greasedVersions)])
	v := strconv.Itoa(major)
	chromium := fmt.Sprintf("%q;v=%q", "Chromium", v)
	if !googleChrome {
		// Two entries: the GREASE brand goes first or second.
		if major%2 == 0 {
			return grease + ", " + chromium
		}
		return chromium + ", " + grease
	}
	chrome := fmt.Sprintf("%q;v=%q", "Google Chrome", v)
	orders := [6][3]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}
	order := orders[major%6]
	var list [3]string
	list[order[0]] = grease
	list[order[1]] = chromium
	list[order[2]] = chrome
	return strings.Join(list[:], ", ")
}
