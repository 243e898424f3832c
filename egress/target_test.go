package egress

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// refusal is the part of an *Error a parse-refusal table compares.
type refusal struct {
	Code   Code
	Reason Reason
}

func refusalOf(t *testing.T, err error) refusal {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("got error %v (%T), want an *Error", err, err)
	}
	if e.Op != "parse" {
		t.Errorf("Op = %q, want parse", e.Op)
	}
	return refusal{e.Code, e.Reason}
}

var (
	ambiguous = refusal{CodeDenied, ReasonParseAmbiguous}
	userinfo  = refusal{CodeDenied, ReasonUserinfo}
	numeric   = refusal{CodeDenied, ReasonNumericHost}
	scheme    = refusal{CodeDenied, ReasonScheme}
	badPort   = refusal{CodeInvalid, ReasonBadPort}
	emptyHost = refusal{CodeInvalid, ReasonEmptyHost}
	badHost   = refusal{CodeInvalid, ReasonBadHost}
	malformed = refusal{CodeInvalid, ReasonMalformed}
)

func TestParseURLRefusals(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want refusal
	}{
		// Backslashes: WHATWG reads them as '/', net/url does not.
		{"backslash in host", `http://a\b/`, ambiguous},
		{"backslashes for slashes", `http:\\127.0.0.1`, ambiguous},
		{"backslash then slash", `http:/\127.0.0.1/`, ambiguous},
		{"backslash before @", `http://127.0.0.1\@example.com/`, ambiguous},
		{"backslash after @ trick", `http://example.com\@127.0.0.1/`, ambiguous},
		{"backslash in path", `http://example.com/a\b`, ambiguous},
		{"orange tsai weak parser", `http://127.1.1.1:80\@127.2.2.2:80/`, ambiguous},
		{"orange tsai weak parser 2", `http://127.1.1.1:80:\@@127.2.2.2:80/`, ambiguous},
		{"orange tsai weak parser 3", `http://127.1.1.1:80#\@127.2.2.2:80/`, ambiguous},

		// Control characters, tab, newline, NUL, DEL: anywhere.
		{"tab in host", "http://127.0.0.1\texample.com/", ambiguous},
		{"leading tab", "\thttp://example.com/", ambiguous},
		{"newline in host", "http://exa\nmple.com/", ambiguous},
		{"CR LF in path", "http://example.com/\r\nHost: x", ambiguous},
		{"trailing newline", "http://example.com/\n", ambiguous},
		{"NUL in host", "http://example.com\x00.evil.com/", ambiguous},
		{"NUL in path", "http://example.com/\x00", ambiguous},
		{"DEL in host", "http://exa\x7fmple.com/", ambiguous},
		{"unit separator", "http://example.com\x1f/", ambiguous},
		{"start of heading", "\x01http://example.com/", ambiguous},
		{"invalid UTF-8", "http://exa\xffmple.com/", ambiguous},

		// Spaces, ASCII and Unicode; zero-width and other invisible characters.
		{"leading space", " http://example.com/", ambiguous},
		{"trailing space", "http://example.com/ ", ambiguous},
		{"space in host", "http://exa mple.com/", ambiguous},
		{"space in path", "http://example.com/a b", ambiguous},
		{"tricks combination", "http://1.1.1.1 &@2.2.2.2# @3.3.3.3/", ambiguous},
		{"no-break space", "http://exa\u00a0mple.com/", ambiguous},
		{"en quad", "http://exa\u2000mple.com/", ambiguous},
		{"hair space", "http://exa\u200ample.com/", ambiguous},
		{"ideographic space", "http://exa\u3000mple.com/", ambiguous},
		{"line separator", "http://exa\u2028mple.com/", ambiguous},
		{"paragraph separator", "http://exa\u2029mple.com/", ambiguous},
		{"next line", "http://exa\u0085mple.com/", ambiguous},
		{"ogham space", "http://exa\u1680mple.com/", ambiguous},
		{"medium math space", "http://exa\u205fmple.com/", ambiguous},
		{"narrow no-break space", "http://exa\u202fmple.com/", ambiguous},
		{"zero width space", "http://exa\u200bmple.com/", ambiguous},
		{"zero width non-joiner", "http://exa\u200cmple.com/", ambiguous},
		{"zero width joiner", "http://exa\u200dmple.com/", ambiguous},
		{"left-to-right mark", "http://exa\u200emple.com/", ambiguous},
		{"right-to-left override", "http://exa\u202emple.com/", ambiguous},
		{"word joiner", "http://exa\u2060mple.com/", ambiguous},
		{"invisible plus", "http://exa\u2064mple.com/", ambiguous},
		{"byte order mark", "http://\ufeffexample.com/", ambiguous},
		{"soft hyphen", "http://exa\u00admple.com/", ambiguous},
		{"mongolian vowel separator", "http://exa\u180emple.com/", ambiguous},
		{"combining grapheme joiner", "http://exa\u034fmple.com/", ambiguous},
		{"mongolian variation selector", "http://exa\u180bmple.com/", ambiguous},
		{"variation selector 16", "http://exa\ufe0fmple.com/", ambiguous},
		{"variation selector 17", "http://exa\U000e0100mple.com/", ambiguous},
		{"shorthand format control", "http://exa\U0001bca0mple.com/", ambiguous},
		{"tag character", "http://exa\U000e0041mple.com/", ambiguous},
		{"arabic letter mark", "http://exa\u061cmple.com/", ambiguous},
		{"interlinear annotation", "http://exa\ufff9mple.com/", ambiguous},

		// Userinfo, in any form.
		{"user", "http://user@host/", userinfo},
		{"user and password", "http://user:pass@example.com/", userinfo},
		{"empty userinfo", "http://@example.com/", userinfo},
		{"empty user and password", "http://:@example.com/", userinfo},
		{"two @", "http://a@127.0.0.1@evil.com/", userinfo},
		{"@@", "http://example.com@@127.0.0.1/", userinfo},
		{"semicolon before @", "http://evil.com;@127.0.0.1/", userinfo},
		{"encoded slash before @", "http://127.0.0.1%2f@x/", userinfo},
		{"encoded # before @", "https://example.com%23@127.0.0.1/", userinfo},
		{"plus-ampersand trick", "http://google.com:80+&@127.88.23.245:22/#+@google.com:80/", userinfo},
		{"orange tsai foo@evil@google", "http://foo@evil.com:80@google.com/", userinfo},

		// Zone IDs.
		{"encoded zone", "http://[fe80::1%25eth0]/", ambiguous},
		{"raw zone", "http://[fe80::1%eth0]/", ambiguous},
		{"empty zone", "http://[::1%]/", ambiguous},

		// Ports.
		{"port 0", "http://example.com:0/", badPort},
		{"port 00", "http://example.com:00/", badPort},
		{"port 65536", "http://example.com:65536/", badPort},
		{"port 99999", "http://example.com:99999/", badPort},
		{"port six digits", "http://example.com:000080/", badPort},
		{"hex port", "http://example.com:0x50/", badPort},
		{"signed port", "http://example.com:+80/", badPort},
		{"negative port", "http://example.com:-1/", badPort},
		{"port with letters", "http://example.com:80a/", badPort},
		{"malformed memcached port", "http://localhost:+11211aaa/", badPort},
		{"padded memcached port", "http://localhost:00011211aaaa/", badPort},
		{"fullwidth port", "http://example.com:８０/", badPort},
		{"IPv6 port 0", "http://[::1]:0/", badPort},
		{"two ports", "http://127.0.0.1:11211:80/", ambiguous},

		// Percent-encoded hosts.
		{"encoded digits", "http://%31%32%37.0.0.1/", ambiguous},
		{"encoded letter", "http://ex%61mple.com/", ambiguous},
		{"encoded dot", "http://example%2Ecom/", ambiguous},
		{"encoded ideographic full stop", "http://127%E3%80%820%E3%80%820%E3%80%821/", ambiguous},
		{"encoded tab", "http://127.0.0.1%09example.com/", ambiguous},
		{"double-encoded tab", "http://127.0.0.1%2509example.com/", ambiguous},
		{"encoded NUL", "http://attacker.com%00127.0.0.1/", ambiguous},
		{"encoded space", "http://127.0.0.1%20example.com/", ambiguous},
		{"encoded port", "http://example.com:%38%30/", ambiguous},

		// Non-canonical numeric hosts (browsers read them all as IPv4).
		{"decimal", "http://2130706433/", numeric},
		{"hex and short", "http://0x7f.1/", numeric},
		{"octal first part", "http://0177.0.0.1/", numeric},
		{"short form", "http://127.1/", numeric},
		{"three parts", "http://127.0.1/", numeric},
		{"zero padded", "http://127.000.000.001/", numeric},
		{"hex dword", "http://0x7f000001/", numeric},
		{"octal dword", "http://017700000001/", numeric},
		{"five parts", "http://1.2.3.4.5/", numeric},
		{"name ending in hex", "http://example.0x1/", numeric},
		{"name ending in digits", "http://example.1/", numeric},
		{"zero", "http://0/", numeric},
		{"zeros", "http://00000/", numeric},
		{"bare 0x", "http://0x/", numeric},
		{"upper hex", "http://0X7F.0.0.1/", numeric},
		{"dotted hex", "http://0x7f.0x00.0x00.0x01/", numeric},
		{"padded dotted hex", "http://0x0000007f.0x00000000.0x00000000.0x00000001/", numeric},
		{"dotted octal", "http://0177.0000.0000.0001/", numeric},
		{"padded dotted octal", "http://00000177.00000000.00000000.00000001/", numeric},
		{"many zeros", "http://127.000000000000000.1/", numeric},
		{"leading zero last part", "http://127.0.0.01/", numeric},
		{"octet overflow", "http://256.0.0.1/", numeric},
		{"dotted overflow", "http://425.510.425.510/", numeric},
		{"dword overflow", "http://4294967296/", numeric},
		{"hex overflow", "http://0x41414141A9FEA9FE/", numeric},
		{"mixed radix", "http://0xA9.254.0251.0376/", numeric},
		{"class B form", "http://169.254.43518/", numeric},
		{"public decimal", "https://520968996/", numeric},
		{"double trailing dot", "http://127.0.0.1../", badHost},
		{"fullwidth digits", "http://１２７.０.０.１/", numeric},
		{"ideographic full stops", "http://127。0。0。1/", numeric},
		{"halfwidth ideographic full stops", "http://127｡0｡0｡1/", numeric},
		{"fullwidth full stops", "http://127．0．0．1/", numeric},
		{"enclosed alphanumerics", "http://①②⑦.⓪.⓪.⓪/", numeric},
		{"mathematical digits", "http://𝟏𝟐𝟕.𝟎.𝟎.𝟏/", numeric},
		{"superscript digits", "http://¹²⁷.⁰.⁰.¹/", numeric},
		{"fullwidth hex", "http://０ｘ７ｆ.１/", numeric},
		{"name mapping to a number", "http://example.１/", numeric},
		{"arabic-indic digits then ASCII", "http://١٢٧.0.0.1/", numeric},
		{"name the WHATWG parser reads as 0.0.0.0", "http://0-0/", ambiguous},
		{"name the WHATWG parser reads as broadcast", "http://0x-1/", ambiguous},

		// Empty hosts.
		{"three slashes", "http:///x", emptyHost},
		{"port only", "http://:80/", emptyHost},
		{"nothing", "http://", emptyHost},
		{"empty brackets", "http://[]/", emptyHost},
		{"query only", "http://?x", emptyHost},
		{"fragment only", "http://#x", emptyHost},
		{"https three slashes", "https:///example.com/", emptyHost},

		// Schemes.
		{"ftp", "ftp://example.com/", scheme},
		{"file", "file:///etc/passwd", scheme},
		{"file with host", "file://localhost/etc/passwd", scheme},
		{"gopher", "gopher://127.0.0.1:6379/_INFO", scheme},
		{"dict", "dict://127.0.0.1:11211/stats", scheme},
		{"javascript", "javascript:alert(1)", scheme},
		{"data", "data:text/plain,hi", scheme},
		{"jar", "jar:http://127.0.0.1!/", scheme},
		{"ws", "ws://example.com/", scheme},
		{"ldap", "ldap://localhost:11211/", scheme},
		{"netdoc", "netdoc:///etc/passwd", scheme},
		{"upper-case other scheme", "FTP://example.com/", scheme},
		{"scheme 0", "0://evil.com:80;http://google.com:80/", malformed},
		{"relative", "//example.com/", malformed},
		{"no scheme", "example.com/", malformed},
		{"empty", "", malformed},
		{"colon first", ":http://example.com/", malformed},

		// Missing or odd slashes after the scheme.
		{"no slashes", "http:example.com", ambiguous},
		{"one slash", "https:/example.com/", ambiguous},
		{"@ without slashes", "http:@0/", ambiguous},

		// Bad hosts.
		{"empty label", "http://a..b/", badHost},
		{"leading hyphen", "http://-a.example/", badHost},
		{"trailing hyphen", "http://a-.example/", badHost},
		{"dollar", "http://evil$google.com/", badHost},
		{"asterisk", "http://*.example.com/", badHost},
		{"semicolon", "http://127.0.0.1:80;google.com:80/", ambiguous},
		{"comma", "http://127.0.0.1,google.com/", badHost},
		{"semicolon in host", "https://attacker.com;https://127.0.0.1/", badHost},
		{"bad punycode", "http://xn--a.example/", badHost},
		{"disallowed rune", "http://exa\u3164mple.com/", badHost},
		{"fullwidth colon", "http://127.0.0.1：80/", badHost},
		{"label too long", "http://" + strings.Repeat("a", 64) + ".example/", badHost},
		{"name too long", "http://" + strings.Repeat("abcdefghi.", 26) + "com/", badHost},
		{"bracket in name", "http://exa]mple.com/", badHost},

		// IPv6 literals.
		{"IPv4 in brackets", "http://[127.0.0.1]/", malformed},
		{"unclosed bracket", "http://[::1/", malformed},
		{"garbage after bracket", "http://[::1]x/", malformed},
		{"double bracket", "http://[::1]]/", malformed},
		{"future IP", "http://[v1.fe]/", malformed},
		{"unbracketed IPv6", "http://::1/", ambiguous},
		{"unbracketed IPv6 with port", "http://0000::1:80/", ambiguous},
		{"bad IPv6", "http://[::ffff:1.2.3.4.5]/", malformed},
		{"IPv6 with hex IPv4", "http://[::ffff:0x7f.1]/", malformed},

		{"too long", "http://example.com/" + strings.Repeat("a", MaxURLLength), malformed},
		{"too long once escaped", "http://example.com/" + strings.Repeat(`"`, MaxURLLength/2), malformed}, // fuzz finding
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseURL(tt.in)
			if err == nil {
				t.Fatalf("ParseURL(%q) = %+v, want a %v refusal", tt.in, got, tt.want)
			}
			if r := refusalOf(t, err); r != tt.want {
				t.Errorf("ParseURL(%q): got %v, want %v (%v)", tt.in, r, tt.want, err)
			}
			if (CodeOf(err) == CodeDenied) != IsDenied(err) {
				t.Errorf("IsDenied(%v) disagrees with its code", err)
			}
		})
	}
}

func TestParseURLAccepted(t *testing.T) {
	tests := []struct {
		name string
		in   string
		host string
		addr string // "" for names
		port uint16
		url  string
	}{
		{"plain", "http://example.com", "example.com", "", 80, "http://example.com/"},
		{"https", "https://example.com/", "example.com", "", 443, "https://example.com/"},
		{"upper-case scheme", "HTTP://example.com/", "example.com", "", 80, "http://example.com/"},
		{"mixed-case scheme", "hTTpS://example.com/", "example.com", "", 443, "https://example.com/"},
		{"upper-case host", "http://EXAMPLE.COM/A", "example.com", "", 80, "http://example.com/A"},
		{"trailing dot", "http://example.com./", "example.com", "", 80, "http://example.com/"},
		{"IDN", "http://bücher.example/", "xn--bcher-kva.example", "", 80, "http://xn--bcher-kva.example/"},
		{"IDN upper case", "http://BÜCHER.example/", "xn--bcher-kva.example", "", 80, "http://xn--bcher-kva.example/"},
		{"punycode", "http://xn--bcher-kva.example/", "xn--bcher-kva.example", "", 80, "http://xn--bcher-kva.example/"},
		{"sharp s", "http://ß.example/", "xn--zca.example", "", 80, "http://xn--zca.example/"},
		{"fullwidth letters", "http://ｅｘａｍｐｌｅ.com/", "example.com", "", 80, "http://example.com/"},
		{"enclosed letters", "http://ⓔⓧⓐⓜⓟⓛⓔ.ⓒⓞⓜ/", "example.com", "", 80, "http://example.com/"},
		{"ideographic full stop in name", "http://example。com/", "example.com", "", 80, "http://example.com/"},
		{"underscore", "http://a_b.example/", "a_b.example", "", 80, "http://a_b.example/"},
		{"digits then letters", "http://1e3/", "1e3", "", 80, "http://1e3/"},
		{"0x then non-hex", "http://0xg.com/", "0xg.com", "", 80, "http://0xg.com/"},
		{"IP-looking labels in a name", "http://127.0.0.1.nip.io/", "127.0.0.1.nip.io", "", 80, "http://127.0.0.1.nip.io/"},
		{"default port omitted", "http://example.com:80/", "example.com", "", 80, "http://example.com/"},
		{"https default port omitted", "https://example.com:443/", "example.com", "", 443, "https://example.com/"},
		{"other port kept", "http://example.com:443/", "example.com", "", 443, "http://example.com:443/"},
		{"https port 80 kept", "https://example.com:80/", "example.com", "", 80, "https://example.com:80/"},
		{"leading-zero port", "http://example.com:0080/", "example.com", "", 80, "http://example.com/"},
		{"empty port", "http://example.com:/", "example.com", "", 80, "http://example.com/"},
		{"max port", "http://example.com:65535/", "example.com", "", 65535, "http://example.com:65535/"},
		{"fragment dropped", "http://example.com/a#frag", "example.com", "", 80, "http://example.com/a"},
		{"query kept", "http://example.com/a?b=c#d", "example.com", "", 80, "http://example.com/a?b=c"},
		{"query without path", "http://example.com?x", "example.com", "", 80, "http://example.com/?x"},
		{"empty query dropped", "http://example.com/?", "example.com", "", 80, "http://example.com/"},
		{"encoded path kept", "http://127.0.0.1/%61dmin", "127.0.0.1", "127.0.0.1", 80, "http://127.0.0.1/%61dmin"},
		{"double-encoded path kept", "http://127.0.0.1/%2561dmin", "127.0.0.1", "127.0.0.1", 80, "http://127.0.0.1/%2561dmin"},
		{"fragment holds the @", "http://evil.com#@127.0.0.1", "evil.com", "", 80, "http://evil.com/"},
		{"fragment holds the @ after a port", "http://example.com:80#@127.0.0.1/", "example.com", "", 80, "http://example.com/"},
		{"query holds the @", "http://evil.com?@127.0.0.1", "evil.com", "", 80, "http://evil.com/?@127.0.0.1"},
		{"path holds the @", "http://evil.com/@127.0.0.1", "evil.com", "", 80, "http://evil.com/@127.0.0.1"},
		{"IP then fragment @", "http://127.88.23.245:22/#@www.google.com:80/", "127.88.23.245", "127.88.23.245", 22, "http://127.88.23.245:22/"},
		{"IP then query @", "http://127.88.23.245:22/?@google.com:80/", "127.88.23.245", "127.88.23.245", 22, "http://127.88.23.245:22/?@google.com:80/"},
		{"filter_var trick reads host test", "http://test???test.com", "test", "", 80, "http://test/???test.com"},
		{"IPv4", "http://8.8.8.8/", "8.8.8.8", "8.8.8.8", 80, "http://8.8.8.8/"},
		{"IPv4 trailing dot", "http://127.0.0.1./", "127.0.0.1", "127.0.0.1", 80, "http://127.0.0.1/"},
		{"IPv4 zero", "http://0.0.0.0:22/", "0.0.0.0", "0.0.0.0", 22, "http://0.0.0.0:22/"},
		{"IPv6 loopback expanded", "http://[0:0:0:0:0:0:0:1]/", "::1", "::1", 80, "http://[::1]/"},
		{"IPv6 loopback padded", "http://[0000::1]:80/", "::1", "::1", 80, "http://[::1]/"},
		{"IPv6 unspecified", "http://[::]:25/", "::", "::", 25, "http://[::]:25/"},
		{"IPv4-mapped", "http://[::ffff:127.0.0.1]/", "::ffff:127.0.0.1", "::ffff:127.0.0.1", 80, "http://[::ffff:127.0.0.1]/"},
		{"IPv4-mapped hex", "http://[::ffff:7f00:1]/", "::ffff:127.0.0.1", "::ffff:127.0.0.1", 80, "http://[::ffff:127.0.0.1]/"},
		{"IPv4-mapped expanded upper", "http://[0:0:0:0:0:FFFF:A9FE:A9FE]/", "::ffff:169.254.169.254", "::ffff:169.254.169.254", 80, "http://[::ffff:169.254.169.254]/"},
		{"IPv4-compatible", "http://[::127.0.0.1]/", "::7f00:1", "::7f00:1", 80, "http://[::7f00:1]/"},
		{"IPv6 upper case with port", "https://[2001:DB8::1]:8443/x", "2001:db8::1", "2001:db8::1", 8443, "https://[2001:db8::1]:8443/x"},
		{"IPv6 default port", "https://[2606:4700::1111]:443/", "2606:4700::1111", "2606:4700::1111", 443, "https://[2606:4700::1111]/"},
		{"IPv6 empty port", "http://[::1]:/", "::1", "::1", 80, "http://[::1]/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseURL(tt.in)
			if err != nil {
				t.Fatalf("ParseURL(%q): %v", tt.in, err)
			}
			var want netip.Addr
			if tt.addr != "" {
				want = netip.MustParseAddr(tt.addr)
			}
			if got.Host != tt.host || got.Addr != want || got.Port != tt.port || got.String() != tt.url {
				t.Errorf("ParseURL(%q) = host %q addr %v port %d url %q; want host %q addr %v port %d url %q",
					tt.in, got.Host, got.Addr, got.Port, got.String(), tt.host, want, tt.port, tt.url)
			}
			if got.IsIP() != (tt.addr != "") {
				t.Errorf("IsIP() = %v", got.IsIP())
			}
			if got.Scheme != "http" && got.Scheme != "https" {
				t.Errorf("Scheme = %q", got.Scheme)
			}
			// The canonical form is a fixed point.
			again, err := ParseURL(got.String())
			if err != nil {
				t.Fatalf("ParseURL(canonical %q): %v", got.String(), err)
			}
			if again.String() != got.String() || again.Host != got.Host || again.Port != got.Port || again.Addr != got.Addr {
				t.Errorf("canonical form is not stable: %q → %q", got.String(), again.String())
			}
		})
	}
}

func TestTargetForms(t *testing.T) {
	tests := []struct {
		in                     string
		hostPort, origin, text string
	}{
		{"http://example.com/a", "example.com:80", "http://example.com:80", "http://example.com/a"},
		{"https://[::1]:8443/", "[::1]:8443", "https://[::1]:8443", "https://[::1]:8443/"},
		{"https://8.8.8.8", "8.8.8.8:443", "https://8.8.8.8:443", "https://8.8.8.8/"},
	}
	for _, tt := range tests {
		got, err := ParseURL(tt.in)
		if err != nil {
			t.Fatalf("ParseURL(%q): %v", tt.in, err)
		}
		if got.HostPort() != tt.hostPort || got.Origin() != tt.origin || got.String() != tt.text {
			t.Errorf("%q: HostPort %q Origin %q String %q; want %q %q %q", tt.in, got.HostPort(), got.Origin(), got.String(), tt.hostPort, tt.origin, tt.text)
		}
	}
	hp, err := ParseHostPort("[::1]:53")
	if err != nil {
		t.Fatal(err)
	}
	if hp.String() != "[::1]:53" || hp.URL != nil || hp.Scheme != "" {
		t.Errorf("ParseHostPort target: String %q URL %v Scheme %q", hp.String(), hp.URL, hp.Scheme)
	}
}

func TestParseHostPort(t *testing.T) {
	accepted := []struct {
		in, host string
		port     uint16
		ip       bool
	}{
		{"[::1]:53", "::1", 53, true},
		{"[0:0:0:0:0:0:0:1]:53", "::1", 53, true},
		{"[::ffff:10.0.0.1]:22", "::ffff:10.0.0.1", 22, true},
		{"127.0.0.1:6379", "127.0.0.1", 6379, true},
		{"example.com:443", "example.com", 443, false},
		{"EXAMPLE.com.:443", "example.com", 443, false},
		{"bücher.example:25", "xn--bcher-kva.example", 25, false},
		{"8.8.8.8:53", "8.8.8.8", 53, true},
		{"host:65535", "host", 65535, false},
		{"host:0053", "host", 53, false},
	}
	for _, tt := range accepted {
		got, err := ParseHostPort(tt.in)
		if err != nil {
			t.Errorf("ParseHostPort(%q): %v", tt.in, err)
			continue
		}
		if got.Host != tt.host || got.Port != tt.port || got.IsIP() != tt.ip {
			t.Errorf("ParseHostPort(%q) = %q %d ip=%v, want %q %d ip=%v", tt.in, got.Host, got.Port, got.IsIP(), tt.host, tt.port, tt.ip)
		}
	}

	refused := []struct {
		in   string
		want refusal
	}{
		{"host:0", badPort},
		{"host:65536", badPort},
		{"host:99999", badPort},
		{"host:0x35", badPort},
		{"host:", badPort},
		{"host", badPort},
		{"[::1]", badPort},
		{"[::1]:", badPort},
		{"8.8.8.8", badPort},
		{"a:b:c", ambiguous},
		{"::1:53", ambiguous},
		{"fe80::1:53", ambiguous},
		{"http://example.com:80", malformed},
		{"example.com:80/", malformed},
		{"example.com:80?x", malformed},
		{"example.com:80#x", malformed},
		{"user@host:80", userinfo},
		{"[fe80::1%eth0]:53", ambiguous},
		{"[fe80::1%25eth0]:53", ambiguous},
		{"%31%32%37.0.0.1:80", ambiguous},
		{"127.1:80", numeric},
		{"2130706433:80", numeric},
		{"0x7f.1:80", numeric},
		{"１２７.０.０.１:80", numeric},
		{"127。0。0。1:80", numeric},
		{"[127.0.0.1]:80", malformed},
		{"0-0:80", ambiguous},  // the WHATWG parser reads 0.0.0.0 (fuzz finding)
		{"0x-1:80", ambiguous}, // and 255.255.255.255
		{":53", emptyHost},
		{"[]:53", emptyHost},
		{"", malformed},
		{"ho st:80", ambiguous},
		{"host:80\n", ambiguous},
		{`host\:80`, ambiguous},
		{"exa\u200bmple.com:80", ambiguous},
		{"a..b:80", badHost},
		{strings.Repeat("a", 1025) + ":80", malformed},
	}
	for _, tt := range refused {
		got, err := ParseHostPort(tt.in)
		if err == nil {
			t.Errorf("ParseHostPort(%q) = %+v, want a %v refusal", tt.in, got, tt.want)
			continue
		}
		if r := refusalOf(t, err); r != tt.want {
			t.Errorf("ParseHostPort(%q): got %v, want %v (%v)", tt.in, r, tt.want, err)
		}
	}
}

func TestParseHost(t *testing.T) {
	accepted := map[string]string{
		"example.com":    "example.com",
		"EXAMPLE.COM.":   "example.com",
		"bücher.example": "xn--bcher-kva.example",
		"[::1]":          "::1",
		"::1":            "::1",
		"10.0.0.1":       "10.0.0.1",
	}
	for in, want := range accepted {
		got, err := ParseHost(in)
		if err != nil || got.Host != want {
			t.Errorf("ParseHost(%q) = %q, %v; want %q", in, got.Host, err, want)
		}
	}
	refused := map[string]refusal{
		"":              emptyHost,
		"127.1":         numeric,
		"0x7f.1":        numeric,
		"a@b":           ambiguous,
		"a/b":           ambiguous,
		"a%2eb":         ambiguous,
		"fe80::1%eth0":  ambiguous,
		"exa\tmple.com": ambiguous,
		"example.com:":  ambiguous,
		"a..b":          badHost,
	}
	for in, want := range refused {
		_, err := ParseHost(in)
		if err == nil {
			t.Errorf("ParseHost(%q) accepted, want %v", in, want)
			continue
		}
		if r := refusalOf(t, err); r != want {
			t.Errorf("ParseHost(%q): got %v, want %v (%v)", in, r, want, err)
		}
	}
}

// TestParseURLNeverAllowsInternal checks the verdict after parsing for the
// forms that are read rather than refused: whatever the spelling, an
// internal address is denied by the default policy.
func TestParseURLNeverAllowsInternal(t *testing.T) {
	chk := DefaultPolicy().MustCompile()
	for _, in := range []string{
		"http://127.0.0.1./",
		"http://[0:0:0:0:0:0:0:1]/",
		"http://[::ffff:127.0.0.1]/",
		"http://[::ffff:7f00:1]/",
		"http://[::127.0.0.1]/",
		"http://[::]/",
		"http://0.0.0.0/",
		"http://[0:0:0:0:0:ffff:169.254.169.254]/",
		"http://[fd00:ec2::254]/",
		"http://127.88.23.245:22/#@www.google.com:80/",
		"http://127.0.0.1/%61dmin",
	} {
		tg, err := ParseURL(in)
		if err != nil {
			t.Errorf("ParseURL(%q): %v", in, err)
			continue
		}
		if v := chk.CheckName(LaneHTTP, tg); v.Allow {
			t.Errorf("%q: DefaultPolicy allows %v", in, tg.Addr)
		}
	}
}
