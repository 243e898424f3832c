package hostile

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// Hostile handlers beyond those of egress/egresstest. Each runs in the
// parent process; those that stream stop when the client goes away.

// endless streams chunks of filler under contentType until the client
// goes away: a body without end.
func endless(contentType string) http.Handler {
	chunk := []byte(strings.Repeat("<p>endless</p>\n", 2048))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		for {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
}

// manyHeaders answers with n header field lines, each distinct, then a
// short body. It hijacks the connection to write them as they are.
func manyHeaders(n int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer conn.Close()
		if k := buf.Reader.Buffered(); k > 0 {
			buf.Reader.Discard(k)
		}
		var b bytes.Buffer
		b.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n")
		for i := range n {
			fmt.Fprintf(&b, "X-H%d: v\r\n", i)
		}
		b.WriteString("Content-Length: 2\r\n\r\nok")
		conn.Write(b.Bytes()) // the client may hang up part way: that is the point
	})
}

// static serves body with contentType, and optionally contentEncoding.
func static(contentType, contentEncoding string, body []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		if contentEncoding != "" {
			w.Header().Set("Content-Encoding", contentEncoding)
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	})
}

// gzipped compresses at gzip.BestSpeed: several times faster than the
// default under the race detector, and what the cases serve stays well
// under the wire cap.
func gzipped(b []byte) []byte {
	var out bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&out, gzip.BestSpeed)
	zw.Write(b)
	zw.Close()
	return out.Bytes()
}

// gzipRepeat returns gzip(prefix + n copies of unit + suffix), streamed,
// without holding the decoded bytes.
func gzipRepeat(prefix, unit, suffix string, n int) []byte {
	var out bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&out, gzip.BestSpeed) // 64 MiB of spaces: 82 KB
	io.WriteString(zw, prefix)
	block := []byte(strings.Repeat(unit, max(1, (64<<10)/len(unit))))
	per := len(block) / len(unit)
	for left := n; left > 0; left -= per {
		k := min(left, per)
		zw.Write(block[:k*len(unit)])
	}
	io.WriteString(zw, suffix)
	zw.Close()
	return out.Bytes()
}

// b62 writes i in base 62.
func b62(i int) string {
	const digits = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 62 {
		b = append(b, digits[i%62])
	}
	for l, r := 0, len(b)-1; l < r; l, r = l+1, r-1 {
		b[l], b[r] = b[r], b[l]
	}
	return string(b)
}

// Million-link page: millionLinks <a> elements, the first distinctLinks
// with distinct relative targets, the rest among 62 one-character ones, so
// that the page stays under the extractor's 10 MiB input cap.
const (
	millionLinks  = 1_000_000
	distinctLinks = 150_000
)

// millionLinksGzipped is millionLinksPage gzipped, built once for the
// cases that serve it.
var millionLinksGzipped = sync.OnceValue(func() []byte { return gzipped(millionLinksPage()) })

func millionLinksPage() []byte {
	var b bytes.Buffer
	b.Grow(10 << 20)
	b.WriteString("<!doctype html><title>links</title><body>")
	for i := range millionLinks {
		id := i
		if i >= distinctLinks {
			id = i % 62
		}
		b.WriteString("<a href=")
		b.WriteString(b62(id))
		b.WriteByte('>')
	}
	return b.Bytes()
}

// site serves a small HTML site: "/" links to /a and /b, which link back.
// Paths in extra are served by their handlers instead.
func site(extra map[string]http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h, ok := extra[r.URL.Path]; ok {
			h.ServeHTTP(w, r)
			return
		}
		for prefix, h := range extra {
			if len(prefix) > 1 && strings.HasSuffix(prefix, "/") && strings.HasPrefix(r.URL.Path, prefix) {
				h.ServeHTTP(w, r)
				return
			}
		}
		switch r.URL.Path {
		case "/", "/a", "/b":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, "<!doctype html><title>%s</title><p>Page %s of a small site, with enough text to be content.</p><a href=/a>a</a> <a href=/b>b</a>", r.URL.Path, r.URL.Path)
		default:
			http.NotFound(w, r)
		}
	})
}

// bigRobots streams a robots.txt of size bytes: rules that allow
// everything, then comment lines.
func bigRobots(size int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", strconv.Itoa(size))
		head := "User-agent: *\nAllow: /\n"
		io.WriteString(w, head)
		line := []byte("# " + strings.Repeat("padding ", 7) + "\n") // 60 bytes
		block := bytes.Repeat(line, 1024)
		for left := size - len(head); left > 0; {
			k := min(left, len(block))
			if _, err := w.Write(block[:k]); err != nil {
				return
			}
			left -= k
		}
	})
}

// endlessSitemap streams a <urlset> without end.
func endlessSitemap() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		io.WriteString(w, `<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`)
		var b bytes.Buffer
		for i := 0; ; i++ {
			b.Reset()
			for j := range 512 {
				fmt.Fprintf(&b, "<url><loc>/p%d</loc></url>\n", i*512+j)
			}
			if _, err := w.Write(b.Bytes()); err != nil {
				return
			}
		}
	})
}

// nestedSitemaps serves /sitemap.xml and every /sm/N.xml as a sitemap
// index of fanout more indexes: an endless tree of indexes.
func nestedSitemaps(fanout int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/sm/"), ".xml"))
		var b bytes.Buffer
		b.WriteString(`<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`)
		for i := range fanout {
			fmt.Fprintf(&b, "<sitemap><loc>/sm/%d.xml</loc></sitemap>", n*fanout+i+1)
		}
		b.WriteString("</sitemapindex>")
		w.Write(b.Bytes())
	})
}

// seededBytes returns n bytes from a fixed seed.
func seededBytes(n int) []byte {
	r := rand.New(rand.NewPCG(14, 14))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// pdfFile assembles a PDF from numbered objects (object i+1 is objs[i])
// with a correct cross-reference table; object 1 is the catalog.
func pdfFile(objs ...string) []byte {
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offsets := make([]int, len(objs))
	for i, o := range objs {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	return b.Bytes()
}

// cyclicPDF is a PDF whose page tree node lists itself as its kid.
func cyclicPDF() []byte {
	return pdfFile(
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Count 5 /Kids [2 0 R] >>",
	)
}

// hugeStreamPDF is a PDF whose page content stream declares a length of
// about 4 GB and has a few bytes.
func hugeStreamPDF() []byte {
	return pdfFile(
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Count 1 /Kids [3 0 R] >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
		"<< /Length 4000000000 >>\nstream\nBT /F1 12 Tf (hello) Tj ET\nendstream",
	)
}

// contentBombPDF is a one-page PDF whose content stream is a flate bomb:
// n text-showing operators compressed into a few hundred KB (550 KB for
// 16 Mi of them, at the speed level).
func contentBombPDF(n int) []byte {
	var z bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&z, zlib.BestSpeed)
	block := []byte(strings.Repeat("(A) Tj\n", 8192))
	for left := n; left > 0; left -= 8192 {
		k := min(left, 8192)
		zw.Write(block[:k*7])
	}
	zw.Close()
	return pdfFile(
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Count 1 /Kids [3 0 R] >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
		fmt.Sprintf("<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream", z.Len(), z.Bytes()),
	)
}
