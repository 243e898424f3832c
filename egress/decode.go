package egress

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
)

// DefaultMaxBodyBytes is the default cap on the bytes of a response body read
// from the wire, before any content decoding. Reading past it is an error
// (CodeTooLarge, ReasonBodyTooLarge), never a silent truncation.
const DefaultMaxBodyBytes = 10 << 20

// DefaultMaxDecodedBytes is the default cap on a response body after content
// decoding. It bounds decompression bombs: reading past it is an error
// (CodeTooLarge, ReasonDecodedTooLarge).
const DefaultMaxDecodedBytes = 50 << 20

// MaxContentCodings is how many content codings (identity aside) a response
// may stack in Content-Encoding. More are refused (CodeUpstream,
// ReasonEncoding): real servers use one, and each layer multiplies the work a
// hostile body can cause.
const MaxContentCodings = 2

// zstdMaxWindow caps the zstd window, and so the memory a zstd frame can make
// the decoder allocate. Frames that declare a larger window are refused.
const zstdMaxWindow = 8 << 20

// decodeBufSize is the read buffer under each decoder. The flate, gzip and
// zlib readers use it directly instead of allocating their own.
const decodeBufSize = 4 << 10

// errBodyClosed is returned by Read after Close, as net/http does for its
// bodies. It is a programming error, not an upstream failure.
var errBodyClosed = errors.New("egress: read on closed body")

// decodeBody wraps body so that reading it yields the content with the
// codings of contentEncoding removed. contentEncoding is the value of the
// Content-Encoding header; join several field lines with ", " first.
//
// wireCap bounds the bytes read from body and decodedCap the bytes produced by
// every decoding stage (the intermediate output of stacked codings included);
// a cap <= 0 means no cap. Both are enforced lazily by Read, which streams and
// never buffers a whole body: reading past a cap returns an *Error with
// CodeTooLarge and ReasonBodyTooLarge or ReasonDecodedTooLarge. Corrupt coded
// data makes Read return an *Error with CodeUpstream and ReasonEncoding
// wrapping the decoder's error; an error from body itself is returned as it
// is. Errors are sticky. An empty coded stream decodes to an empty body, as in
// browsers and net/http.
//
// decodeBody itself does no I/O: it fails only when contentEncoding names an
// unknown coding or more than MaxContentCodings codings (CodeUpstream,
// ReasonEncoding). Close closes the decoders and body, and may be called
// concurrently with Read to abort it, as with an http.Response body.
func decodeBody(body io.ReadCloser, contentEncoding string, wireCap, decodedCap int64) (io.ReadCloser, error) {
	codings, err := parseContentEncoding(contentEncoding)
	if err != nil {
		return nil, err
	}
	d := &decodeReader{
		body:       body,
		codings:    codings,
		decodedCap: decodedCap,
	}
	d.wire = capReader{r: body, cap: wireCap, reason: ReasonBodyTooLarge}
	if len(codings) == 0 {
		// No decoders: the decoded body is the wire body, under both caps.
		d.stages = []*capReader{{r: &d.wire, cap: decodedCap, reason: ReasonDecodedTooLarge}}
		d.top = d.stages[0]
	}
	return d, nil
}

// parseContentEncoding returns the codings of a Content-Encoding value in the
// order they must be removed, which is the reverse of the order the sender
// applied them.
func parseContentEncoding(v string) ([]string, error) {
	var codings []string
	for tok := range strings.SplitSeq(v, ",") {
		c := strings.ToLower(strings.TrimSpace(tok))
		switch c {
		case "", "identity":
			continue // RFC 9110 lists may hold empty elements.
		case "gzip", "x-gzip":
			c = "gzip"
		case "deflate", "br", "zstd":
		default:
			return nil, &Error{Code: CodeUpstream, Reason: ReasonEncoding, Op: "read",
				Detail: fmt.Sprintf("unsupported content coding %q", truncate(strings.TrimSpace(tok), 64))}
		}
		if len(codings) == MaxContentCodings {
			return nil, &Error{Code: CodeUpstream, Reason: ReasonEncoding, Op: "read",
				Detail: fmt.Sprintf("more than %d content codings", MaxContentCodings)}
		}
		codings = append(codings, c)
	}
	for i, j := 0, len(codings)-1; i < j; i, j = i+1, j-1 {
		codings[i], codings[j] = codings[j], codings[i]
	}
	return codings, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// decodeReader is the io.ReadCloser decodeBody returns. The decoder chain is
// built on the first Read, so that decodeBody does no I/O.
type decodeReader struct {
	body       io.ReadCloser
	codings    []string // in decoding order
	decodedCap int64
	closeOnce  sync.Once
	closeErr   error

	mu      sync.Mutex // guards everything below; held across Read
	wire    capReader
	stages  []*capReader // the output of each decoder, wire side first
	top     io.Reader    // the last stage, nil until built
	closers []func()     // the decoders' Close, called by Close
	err     error        // sticky
	closed  bool
}

func (d *decodeReader) Read(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err != nil {
		return 0, d.err
	}
	if d.top == nil {
		if err := d.build(); err != nil {
			d.err = err
			return 0, err
		}
	}
	n, err := d.top.Read(p)
	if err != nil {
		err = d.classify()
		d.err = err
	}
	return n, err
}

// build stacks one decoder per coding on the wire reader.
func (d *decodeReader) build() error {
	var src io.Reader = &d.wire
	for _, c := range d.codings {
		br := bufio.NewReaderSize(src, decodeBufSize)
		dec, closer, err := newDecoder(c, br)
		st := &capReader{r: dec, cap: d.decodedCap, reason: ReasonDecodedTooLarge, coding: c}
		d.stages = append(d.stages, st)
		if closer != nil {
			d.closers = append(d.closers, closer)
		}
		if err != nil {
			st.err = err
			return d.classify()
		}
		src = st
	}
	d.top = src
	return nil
}

// newDecoder returns a reader that removes coding c from src. A src that is
// empty from the start decodes to nothing.
func newDecoder(c string, src *bufio.Reader) (io.Reader, func(), error) {
	if _, err := src.Peek(1); err == io.EOF {
		return eofReader{}, nil, nil
	}
	switch c {
	case "gzip":
		zr, err := gzip.NewReader(src)
		if err != nil {
			return nil, nil, err
		}
		return zr, func() { zr.Close() }, nil
	case "deflate":
		// HTTP's deflate is zlib (RFC 1950), but servers have long sent raw
		// deflate (RFC 1951); browsers accept both, so sniff the zlib header.
		if h, _ := src.Peek(2); len(h) == 2 && isZlibHeader(h[0], h[1]) {
			zr, err := zlib.NewReader(src)
			if err != nil {
				return nil, nil, err
			}
			return zr, func() { zr.Close() }, nil
		}
		fr := flate.NewReader(src)
		return fr, func() { fr.Close() }, nil
	case "br":
		return brotli.NewReader(src), nil, nil // the window is at most 16 MB
	case "zstd":
		zr, err := zstd.NewReader(src,
			zstd.WithDecoderConcurrency(1), // decode in the caller's goroutine
			zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(zstdMaxWindow),
			// Also bounds single-segment frames, whose window is their size.
			zstd.WithDecoderMaxMemory(zstdMaxWindow),
		)
		if err != nil {
			return nil, nil, err
		}
		return zr, zr.Close, nil
	}
	panic("egress: unknown content coding " + c) // parseContentEncoding let it through
}

// isZlibHeader reports whether cmf and flg start a zlib stream: deflate with a
// window of at most 32 KB and a valid header check.
func isZlibHeader(cmf, flg byte) bool {
	return cmf&0x0f == 8 && cmf>>4 <= 7 && (uint16(cmf)<<8|uint16(flg))%31 == 0
}

// classify picks the error Read returns once some reader in the chain has
// failed or ended. The failure nearest the wire is the cause: a wire error
// (a cap or the body's own), then a cap or decoder error of a stage.
func (d *decodeReader) classify() error {
	if d.wire.err != nil {
		return d.wire.err
	}
	for _, st := range d.stages {
		if st.err == nil {
			continue
		}
		var e *Error
		if errors.As(st.err, &e) {
			return st.err
		}
		return &Error{Code: CodeUpstream, Reason: ReasonEncoding, Op: "read",
			Detail: "corrupt " + st.coding + " data", Err: st.err}
	}
	return io.EOF
}

// Close closes body, then the decoders. It is safe to call more than once and
// concurrently with Read; closing body first unblocks a Read waiting on it.
func (d *decodeReader) Close() error {
	d.closeOnce.Do(func() { d.closeErr = d.body.Close() })
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.closed {
		d.closed = true
		for _, c := range d.closers {
			c()
		}
		d.closers = nil
		if d.err == nil {
			d.err = errBodyClosed
		}
	}
	return d.closeErr
}

// capReader counts the bytes read through it and fails, with CodeTooLarge and
// reason, when r holds more than cap bytes (cap <= 0: no cap). It asks r for
// at most one byte past the cap, so an r of exactly cap bytes is fine. It
// records its first error other than io.EOF, for classify.
type capReader struct {
	r      io.Reader
	cap    int64
	n      int64
	reason Reason
	coding string // the coding removed by r, "" for the wire
	err    error
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if c.cap > 0 {
		if room := c.cap - c.n + 1; int64(len(p)) > room {
			p = p[:room]
		}
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.cap > 0 && c.n > c.cap {
		n -= int(c.n - c.cap)
		c.n = c.cap
		c.err = &Error{Code: CodeTooLarge, Reason: c.reason, Op: "read",
			Detail: fmt.Sprintf("%s exceeds %d bytes (%s raises the cap)", c.what(), c.cap, c.key())}
		return n, c.err
	}
	if err != nil && err != io.EOF {
		c.err = err
	}
	return n, err
}

func (c *capReader) what() string {
	if c.reason == ReasonBodyTooLarge {
		return "body"
	}
	return "decoded body"
}

// key is the configuration key of the cap (Client.MaxBodyBytes or
// MaxDecodedBytes), so that the error says what an operator can raise.
func (c *capReader) key() string {
	if c.reason == ReasonBodyTooLarge {
		return "egress.max_body_bytes"
	}
	return "egress.max_decoded_bytes"
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }
