package extract

import (
	"bytes"
	"mime"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/charset"
	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/unicode"
)

// metaScanBytes is how far into an HTML document a <meta charset> is looked
// for. The HTML standard's prescan stops at 1024 bytes; pages in the wild
// put long scripts before their meta, so look a little further, but never
// past <body>.
const metaScanBytes = 4096

// toUTF8 decodes body to UTF-8 and reports the charset it used: a byte
// order mark; else UTF-8 when the body is valid UTF-8 with non-ASCII
// characters; else the charset parameter of the Content-Type header, then
// (for HTML) a <meta charset> or http-equiv declaration, as the HTML
// standard orders them; else UTF-8 when valid, windows-1252 when not. A UTF-8 BOM is removed; invalid UTF-8 is kept as is (the
// HTML parser and the JSON encoder replace it).
func toUTF8(body []byte, contentType string, isHTML bool) ([]byte, string) {
	switch {
	case bytes.HasPrefix(body, []byte("\xef\xbb\xbf")):
		return body[3:], "utf-8"
	case bytes.HasPrefix(body, []byte("\xfe\xff")):
		return decodeWith(unicode.UTF16(unicode.BigEndian, unicode.ExpectBOM), body), "utf-16be"
	case bytes.HasPrefix(body, []byte("\xff\xfe")):
		return decodeWith(unicode.UTF16(unicode.LittleEndian, unicode.ExpectBOM), body), "utf-16le"
	}
	// Bytes that are valid UTF-8 and use it (multi-byte sequences) are
	// UTF-8, whatever the labels say: a legacy encoding almost never
	// produces valid UTF-8 by accident, while pages converted to UTF-8
	// keeping their old <meta charset> are common.
	if hasHighBit(body) && utf8.Valid(body) {
		return body, "utf-8"
	}
	if _, params, err := mime.ParseMediaType(contentType); err == nil {
		if e, name := lookupCharset(params["charset"]); e != nil {
			return decodeOrKeep(e, name, body)
		}
	}
	if isHTML {
		if e, name := lookupCharset(metaCharset(body)); e != nil {
			// A document cannot declare itself UTF-16 from inside: it is
			// ASCII-compatible if the meta could be read at all.
			if strings.HasPrefix(name, "utf-16") {
				return body, "utf-8"
			}
			return decodeOrKeep(e, name, body)
		}
	}
	if utf8.Valid(body) {
		return body, "utf-8"
	}
	return decodeWith(charmap.Windows1252, body), "windows-1252"
}

func lookupCharset(label string) (encoding.Encoding, string) {
	label = strings.TrimSpace(label)
	if label == "" {
		return nil, ""
	}
	return charset.Lookup(label)
}

func decodeOrKeep(e encoding.Encoding, name string, body []byte) ([]byte, string) {
	if name == "utf-8" {
		return body, name
	}
	return decodeWith(e, body), name
}

func decodeWith(e encoding.Encoding, body []byte) []byte {
	out, err := e.NewDecoder().Bytes(body)
	if err != nil {
		return body
	}
	return bytes.TrimPrefix(out, []byte("\xef\xbb\xbf"))
}

// metaCharset returns the charset declared by a <meta charset> or
// <meta http-equiv="Content-Type" content="...; charset=..."> near the
// start of an HTML document, or "".
func metaCharset(body []byte) string {
	if len(body) > metaScanBytes {
		body = body[:metaScanBytes]
	}
	z := html.NewTokenizer(bytes.NewReader(body))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return ""
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			switch string(name) {
			case "body":
				return ""
			case "meta":
			default:
				continue
			}
			var cs, equiv, content string
			for hasAttr {
				var k, v []byte
				k, v, hasAttr = z.TagAttr()
				switch string(k) {
				case "charset":
					cs = string(v)
				case "http-equiv":
					equiv = strings.ToLower(string(v))
				case "content":
					content = string(v)
				}
			}
			if cs != "" {
				return cs
			}
			if equiv == "content-type" {
				if c := charsetParam(content); c != "" {
					return c
				}
			}
		}
	}
}

// charsetParam extracts charset=... from a Content-Type value, leniently.
func charsetParam(s string) string {
	i := indexFold(s, "charset")
	if i < 0 {
		return ""
	}
	s = strings.TrimLeft(s[i+len("charset"):], " \t")
	if !strings.HasPrefix(s, "=") {
		return ""
	}
	s = strings.Trim(strings.TrimLeft(s[1:], " \t"), `"'`)
	if j := strings.IndexAny(s, `;"' `); j >= 0 {
		s = s[:j]
	}
	return s
}

func hasHighBit(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return true
		}
	}
	return false
}
