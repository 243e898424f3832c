package egress

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/google/go-cmp/cmp"
	"github.com/klauspost/compress/zstd"
)

// The encoders here are the standard library's where it has one, so that the
// decoders (klauspost's) are checked against a second implementation.

type flushWriter interface {
	io.Writer
	Flush() error
	Close() error
}

// newEncoder returns a writer applying coding c. "deflate-raw" is deflate
// without the zlib wrapper, which some servers send.
func newEncoder(t testing.TB, c string, w io.Writer) flushWriter {
	t.Helper()
	var (
		fw  flushWriter
		err error
	)
	switch c {
	case "gzip", "x-gzip":
		fw, err = gzip.NewWriterLevel(w, gzip.BestCompression)
	case "deflate":
		fw, err = zlib.NewWriterLevel(w, zlib.BestCompression)
	case "deflate-raw":
		fw, err = flate.NewWriter(w, flate.BestCompression)
	case "br":
		fw = brotli.NewWriterOptions(w, brotli.WriterOptions{Quality: 5, LGWin: 22})
	case "zstd":
		// No checksum, so that compressRepeated may repeat blocks.
		fw, err = zstd.NewWriter(w, zstd.WithEncoderCRC(false), zstd.WithEncoderConcurrency(1),
			zstd.WithWindowSize(4<<20))
	default:
		t.Fatalf("newEncoder: unknown coding %q", c)
	}
	if err != nil {
		t.Fatal(err)
	}
	return fw
}

// encode applies the codings of a Content-Encoding value in order.
func encode(t testing.TB, contentEncoding string, data []byte) []byte {
	t.Helper()
	for c := range strings.SplitSeq(contentEncoding, ",") {
		c = strings.TrimSpace(c)
		if c == "" || c == "identity" {
			continue
		}
		var buf bytes.Buffer
		w := newEncoder(t, c, &buf)
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		data = buf.Bytes()
	}
	return data
}

// compressRepeated returns coding c applied to chunk repeated n times. It
// streams chunks into the compressor, flushing after each, until one chunk's
// output equals the previous one's; from then on the compressor is in a steady
// state, so the rest is that output repeated. This makes a 200 MB bomb in
// milliseconds, even under -race. gzip is built from raw deflate so that its
// trailer can be computed for the whole input.
func compressRepeated(t testing.TB, c string, chunk []byte, n int) []byte {
	t.Helper()
	inner := c
	if c == "gzip" {
		inner = "deflate-raw"
	}
	var out, buf bytes.Buffer
	if c == "gzip" {
		out.Write([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff})
	}
	w := newEncoder(t, inner, &buf)
	var prev []byte
	for i := 0; i < n; i++ {
		if prev != nil && bytes.Equal(buf.Bytes(), prev) {
			out.Write(prev) // steady state: the compressor would emit the same
			continue
		}
		prev = bytes.Clone(buf.Bytes())
		out.Write(prev)
		buf.Reset()
		if _, err := w.Write(chunk); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	out.Write(buf.Bytes())
	if c == "gzip" {
		var crc uint32
		for range n {
			crc = crc32.Update(crc, crc32.IEEETable, chunk)
		}
		out.Write(binary.LittleEndian.AppendUint32(nil, crc))
		out.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(chunk)*n)))
	}
	return out.Bytes()
}

// sample is compressible text with some entropy.
func sample(n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	words := []string{"airlock ", "egress ", "policy ", "deny ", "allow ", "fetch ", "\n", "<p>", "</p>"}
	var b bytes.Buffer
	for b.Len() < n {
		if r.IntN(10) == 0 {
			fmt.Fprintf(&b, "%x", r.Uint64())
		}
		b.WriteString(words[r.IntN(len(words))])
	}
	return b.Bytes()[:n]
}

// countingBody is a body that counts the bytes read from it and records Close.
type countingBody struct {
	r      io.Reader
	n      int64
	reads  int
	closed bool
}

func (b *countingBody) Read(p []byte) (int, error) {
	b.reads++
	n, err := b.r.Read(p)
	b.n += int64(n)
	return n, err
}

func (b *countingBody) Close() error { b.closed = true; return nil }

func newBody(data []byte) *countingBody { return &countingBody{r: bytes.NewReader(data)} }

// errFields is what the tests compare of an *Error.
type errFields struct {
	Code   Code
	Reason Reason
	Op     string
}

func fieldsOf(t *testing.T, err error) errFields {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("got error %v (%T), want an *Error", err, err)
	}
	return errFields{e.Code, e.Reason, e.Op}
}

func TestDecodeParseContentEncoding(t *testing.T) {
	tests := []struct {
		in   string
		want []string // decoding order
	}{
		{in: "", want: nil},
		{in: "identity", want: nil},
		{in: "gzip", want: []string{"gzip"}},
		{in: "x-gzip", want: []string{"gzip"}},
		{in: " GZip ", want: []string{"gzip"}},
		{in: "BR", want: []string{"br"}},
		{in: "gzip, br", want: []string{"br", "gzip"}},
		{in: "deflate,zstd", want: []string{"zstd", "deflate"}},
		{in: "identity, gzip, identity, br", want: []string{"br", "gzip"}},
		{in: ",gzip,,", want: []string{"gzip"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseContentEncoding(tt.in)
			if err != nil {
				t.Fatalf("parseContentEncoding(%q): %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parseContentEncoding(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestDecodeBodyRoundtrip(t *testing.T) {
	t.Parallel()
	data := sample(100 << 10)
	tests := []struct {
		name   string
		header string // Content-Encoding
		encode string // codings to apply, when they differ from header
	}{
		{name: "none", header: ""},
		{name: "identity", header: "identity"},
		{name: "gzip", header: "gzip"},
		{name: "x-gzip", header: "x-gzip"},
		{name: "deflate zlib", header: "deflate"},
		{name: "deflate raw", header: "deflate", encode: "deflate-raw"},
		{name: "br", header: "br"},
		{name: "zstd", header: "zstd"},
		{name: "upper case", header: "GZIP", encode: "gzip"},
		{name: "stacked gzip br", header: "gzip, br"},
		{name: "stacked br gzip", header: "br, gzip"},
		{name: "stacked zstd deflate", header: "zstd, deflate"},
		{name: "stacked with identity", header: "gzip, identity, br", encode: "gzip, br"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enc := tt.encode
			if enc == "" {
				enc = tt.header
			}
			body := newBody(encode(t, enc, data))
			rc, err := decodeBody(body, tt.header, DefaultMaxBodyBytes, DefaultMaxDecodedBytes)
			if err != nil {
				t.Fatalf("decodeBody: %v", err)
			}
			got, err := io.ReadAll(rc)
			if err != nil {
				t.Fatalf("ReadAll: %v", err)
			}
			if !bytes.Equal(got, data) {
				t.Errorf("got %d bytes, want the %d bytes encoded", len(got), len(data))
			}
			if err := rc.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			if !body.closed {
				t.Error("Close did not close the body")
			}
		})
	}
}

func TestDecodeBodyStackedOrder(t *testing.T) {
	// "gzip, br" means gzip was applied first: the wire is br(gzip(data)).
	data := sample(4 << 10)
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	w.Write(data)
	w.Close()
	var wire bytes.Buffer
	bw := brotli.NewWriter(&wire)
	bw.Write(gz.Bytes())
	bw.Close()

	rc, err := decodeBody(newBody(wire.Bytes()), "gzip, br", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("gzip, br: got %d bytes, %v; want %d bytes", len(got), err, len(data))
	}
	rc, err = decodeBody(newBody(wire.Bytes()), "br, gzip", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(rc); ReasonOf(err) != ReasonEncoding {
		t.Errorf("br, gzip on br(gzip(data)): got %v, want reason %s", err, ReasonEncoding)
	}
}

func TestDecodeBodyRefused(t *testing.T) {
	tests := []struct {
		header     string
		wantDetail string
	}{
		{header: "gzip, br, zstd", wantDetail: "more than 2"},
		{header: "gzip, gzip, gzip", wantDetail: "more than 2"},
		{header: "gzip, identity, br, identity, deflate", wantDetail: "more than 2"},
		{header: "compress", wantDetail: `"compress"`},
		{header: "gzip, Foo", wantDetail: `"Foo"`},
		{header: "gzip;q=1", wantDetail: `"gzip;q=1"`},
		{header: "x-deflate", wantDetail: `"x-deflate"`},
		{header: strings.Repeat("a", 1000), wantDetail: `"` + strings.Repeat("a", 64) + `..."`},
	}
	for _, tt := range tests {
		t.Run(truncate(tt.header, 20), func(t *testing.T) {
			body := newBody([]byte("x"))
			rc, err := decodeBody(body, tt.header, 0, 0)
			if rc != nil {
				t.Errorf("got a reader, want none")
			}
			want := errFields{Code: CodeUpstream, Reason: ReasonEncoding, Op: "read"}
			if diff := cmp.Diff(want, fieldsOf(t, err)); diff != "" {
				t.Errorf("decodeBody(%q) error (-want +got):\n%s", tt.header, diff)
			}
			if !strings.Contains(err.Error(), tt.wantDetail) {
				t.Errorf("got %q, want it to contain %q", err, tt.wantDetail)
			}
			if body.reads != 0 {
				t.Errorf("the body was read %d times, want 0", body.reads)
			}
		})
	}
}

func TestDecodeBodyCaps(t *testing.T) {
	data := sample(10000)
	gz := encode(t, "gzip", data)
	n, w := int64(len(data)), int64(len(gz))
	tests := []struct {
		name       string
		header     string
		wire       []byte
		wireCap    int64
		decodedCap int64
		wantReason Reason // "" for success
		wantN      int64  // bytes returned before the error; -1: don't check
	}{
		{name: "identity wire cap", wire: data, wireCap: n, wantN: n},
		{name: "identity wire cap+1", wire: data, wireCap: n - 1, wantReason: ReasonBodyTooLarge, wantN: n - 1},
		{name: "identity decoded cap", wire: data, decodedCap: n, wantN: n},
		{name: "identity decoded cap+1", wire: data, decodedCap: n - 1, wantReason: ReasonDecodedTooLarge, wantN: n - 1},
		{name: "identity both caps", wire: data, wireCap: n, decodedCap: n, wantN: n},
		{name: "gzip wire cap", header: "gzip", wire: gz, wireCap: w, wantN: n},
		{name: "gzip wire cap+1", header: "gzip", wire: gz, wireCap: w - 1, wantReason: ReasonBodyTooLarge, wantN: -1},
		{name: "gzip decoded cap", header: "gzip", wire: gz, decodedCap: n, wantN: n},
		{name: "gzip decoded cap+1", header: "gzip", wire: gz, decodedCap: n - 1, wantReason: ReasonDecodedTooLarge, wantN: n - 1},
		{name: "gzip both caps", header: "gzip", wire: gz, wireCap: w, decodedCap: n, wantN: n},
		{name: "no caps", header: "gzip", wire: gz, wantN: n},
		{name: "negative caps", header: "gzip", wire: gz, wireCap: -1, decodedCap: -1, wantN: n},
		{name: "cap 1", wire: data, wireCap: 1, wantReason: ReasonBodyTooLarge, wantN: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc, err := decodeBody(newBody(tt.wire), tt.header, tt.wireCap, tt.decodedCap)
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			got, err := io.ReadAll(rc)
			if tt.wantN >= 0 && int64(len(got)) != tt.wantN {
				t.Errorf("got %d bytes, want %d", len(got), tt.wantN)
			}
			if !bytes.HasPrefix(data, got) {
				t.Errorf("the bytes read are not a prefix of the data")
			}
			if tt.wantReason == "" {
				if err != nil {
					t.Fatalf("got %v, want no error", err)
				}
				return
			}
			want := errFields{Code: CodeTooLarge, Reason: tt.wantReason, Op: "read"}
			if diff := cmp.Diff(want, fieldsOf(t, err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if !errors.Is(err, ErrTooLarge) {
				t.Errorf("errors.Is(%v, ErrTooLarge) = false, want true", err)
			}
			if _, err2 := rc.Read(make([]byte, 10)); err2 != err {
				t.Errorf("second Read: got %v, want the same error %v", err2, err)
			}
		})
	}
}

func TestDecodeBodyBomb(t *testing.T) {
	const (
		decodedCap = 1 << 20
		chunks     = 200 // MB of zeros
	)
	zeros := make([]byte, 1<<20)
	stored := bytes.Repeat([]byte{0, 0, 0, 0xff, 0xff}, 200000) // empty, non-final stored blocks
	tests := []struct {
		name       string
		header     string
		wire       func(t *testing.T) []byte
		wantN      int64
		wantReason Reason
	}{
		{name: "gzip", header: "gzip", wantN: decodedCap, wire: func(t *testing.T) []byte {
			return compressRepeated(t, "gzip", zeros, chunks)
		}},
		{name: "br", header: "br", wantN: decodedCap, wire: func(t *testing.T) []byte {
			return compressRepeated(t, "br", zeros, chunks)
		}},
		{name: "zstd", header: "zstd", wantN: decodedCap, wire: func(t *testing.T) []byte {
			return compressRepeated(t, "zstd", zeros, chunks)
		}},
		{name: "double gzip", header: "gzip, gzip", wantN: decodedCap, wire: func(t *testing.T) []byte {
			return encode(t, "gzip", compressRepeated(t, "gzip", zeros, chunks))
		}},
		// An intermediate layer that expands hugely into a final layer that
		// decodes to nothing: the intermediate output is capped too.
		{name: "empty deflate blocks in gzip", header: "deflate, gzip", wantN: 0, wire: func(t *testing.T) []byte {
			return compressRepeated(t, "gzip", stored, chunks)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wire := tt.wire(t)
			t.Logf("%d bytes on the wire", len(wire))
			body := newBody(wire)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()

			rc, err := decodeBody(body, tt.header, DefaultMaxBodyBytes, decodedCap)
			if err != nil {
				t.Fatal(err)
			}
			n, err := io.Copy(io.Discard, rc)
			rc.Close()

			runtime.ReadMemStats(&after)
			t.Logf("decoded %d bytes from %d wire bytes in %v, %d MB allocated",
				n, body.n, time.Since(start), (after.TotalAlloc-before.TotalAlloc)>>20)
			want := errFields{Code: CodeTooLarge, Reason: ReasonDecodedTooLarge, Op: "read"}
			if diff := cmp.Diff(want, fieldsOf(t, err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if n != tt.wantN {
				t.Errorf("got %d bytes, want %d", n, tt.wantN)
			}
			// Streaming: the decoders stopped just past the cap, so little
			// of the wire was read...
			if body.n > 64<<10 {
				t.Errorf("read %d of %d wire bytes, want at most 64 KB", body.n, len(wire))
			}
			// ...and nothing near the 200 MB the bomb holds was allocated.
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 32<<20 {
				t.Errorf("allocated %d MB, want less than 32", alloc>>20)
			}
		})
	}
}

// TestDecodeBombMaker checks the bomb maker against the reference decoders,
// on a bomb small enough to decode.
func TestDecodeBombMaker(t *testing.T) {
	chunk := sample(1 << 16)
	for _, c := range []string{"gzip", "br", "zstd"} {
		t.Run(c, func(t *testing.T) {
			wire := compressRepeated(t, c, chunk, 40)
			var r io.Reader
			switch c {
			case "gzip":
				zr, err := gzip.NewReader(bytes.NewReader(wire))
				if err != nil {
					t.Fatal(err)
				}
				r = zr
			case "br":
				r = brotli.NewReader(bytes.NewReader(wire))
			case "zstd":
				zr, err := zstd.NewReader(bytes.NewReader(wire))
				if err != nil {
					t.Fatal(err)
				}
				defer zr.Close()
				r = zr
			}
			got, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			if want := bytes.Repeat(chunk, 40); !bytes.Equal(got, want) {
				t.Errorf("got %d bytes, want %d", len(got), len(want))
			}
		})
	}
}

// zstdFrame returns a zstd frame holding "hello" in one raw block, with the
// given frame header descriptor and the header fields after it.
func zstdFrame(fhd byte, fields ...byte) []byte {
	b := []byte{0x28, 0xb5, 0x2f, 0xfd, fhd}
	b = append(b, fields...)
	b = append(b, 1|5<<3, 0, 0) // last raw block of 5 bytes
	return append(b, "hello"...)
}

func TestDecodeBodyZstdWindow(t *testing.T) {
	// Window_Descriptor: exponent in the high 5 bits (window log - 10),
	// mantissa in the low 3 (eighths of the window added).
	tests := []struct {
		name    string
		wire    []byte
		wantErr bool
	}{
		{name: "1 MB window", wire: zstdFrame(0, 10<<3)},
		{name: "8 MB window", wire: zstdFrame(0, 13<<3)},
		{name: "9 MB window", wire: zstdFrame(0, 13<<3|1), wantErr: true},
		{name: "16 MB window", wire: zstdFrame(0, 14<<3), wantErr: true},
		{name: "2 GB window", wire: zstdFrame(0, 21<<3), wantErr: true},
		// A single-segment frame's window is its content size (4-byte field).
		{name: "single segment 5 B", wire: zstdFrame(2<<6|1<<5, 5, 0, 0, 0), wantErr: false},
		{name: "single segment 16 MB", wire: zstdFrame(2<<6|1<<5, 0, 0, 0, 1), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc, err := decodeBody(newBody(tt.wire), "zstd", 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			got, err := io.ReadAll(rc)
			if !tt.wantErr {
				if err != nil || string(got) != "hello" {
					t.Fatalf("got %q, %v; want %q", got, err, "hello")
				}
				return
			}
			want := errFields{Code: CodeUpstream, Reason: ReasonEncoding, Op: "read"}
			if diff := cmp.Diff(want, fieldsOf(t, err)); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if len(got) != 0 {
				t.Errorf("got %d bytes, want none", len(got))
			}
		})
	}
}

func TestDecodeBodyCorrupt(t *testing.T) {
	data := sample(20000)
	flip := func(b []byte, i int) []byte {
		b = bytes.Clone(b)
		b[i] ^= 0x55
		return b
	}
	gz := encode(t, "gzip", data)
	tests := []struct {
		name   string
		header string
		wire   []byte
	}{
		{name: "gzip bad magic", header: "gzip", wire: flip(gz, 0)},
		{name: "gzip bad data", header: "gzip", wire: flip(gz, len(gz)/2)},
		{name: "gzip bad crc", header: "gzip", wire: flip(gz, len(gz)-6)},
		{name: "gzip truncated", header: "gzip", wire: gz[:len(gz)-3]},
		{name: "gzip trailing garbage", header: "gzip", wire: append(bytes.Clone(gz), "garbage"...)},
		{name: "gzip one byte", header: "gzip", wire: []byte{0x1f}},
		{name: "deflate bad checksum", header: "deflate", wire: flip(encode(t, "deflate", data), len(encode(t, "deflate", data))-1)},
		{name: "deflate garbage", header: "deflate", wire: []byte("this is not deflate at all")},
		{name: "deflate truncated", header: "deflate", wire: encode(t, "deflate-raw", data)[:100]},
		{name: "br garbage", header: "br", wire: []byte("this is not brotli at all")},
		{name: "br truncated", header: "br", wire: encode(t, "br", data)[:100]},
		{name: "zstd garbage", header: "zstd", wire: []byte("this is not zstd at all")},
		{name: "zstd truncated", header: "zstd", wire: encode(t, "zstd", data)[:100]},
		{name: "plain text as gzip", header: "gzip", wire: data},
		{name: "stacked inner corrupt", header: "gzip, br", wire: encode(t, "br", flip(gz, len(gz)/2))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc, err := decodeBody(newBody(tt.wire), tt.header, DefaultMaxBodyBytes, DefaultMaxDecodedBytes)
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			_, err = io.ReadAll(rc)
			want := errFields{Code: CodeUpstream, Reason: ReasonEncoding, Op: "read"}
			if diff := cmp.Diff(want, fieldsOf(t, err)); diff != "" {
				t.Fatalf("error (-want +got):\n%s", diff)
			}
			if errors.Unwrap(err) == nil {
				t.Errorf("%v wraps no cause", err)
			}
			if _, err2 := rc.Read(make([]byte, 1)); err2 != err {
				t.Errorf("second Read: got %v, want the same error", err2)
			}
		})
	}
}

func TestDecodeBodyEmpty(t *testing.T) {
	for _, h := range []string{"", "gzip", "deflate", "br", "zstd", "gzip, br"} {
		t.Run(h, func(t *testing.T) {
			rc, err := decodeBody(newBody(nil), h, 1, 1)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(rc)
			if err != nil || len(got) != 0 {
				t.Errorf("got %q, %v; want an empty body", got, err)
			}
		})
	}
}

func TestDecodeBodyLazy(t *testing.T) {
	body := newBody(encode(t, "gzip", []byte("hello")))
	rc, err := decodeBody(body, "gzip", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if body.reads != 0 {
		t.Errorf("decodeBody read the body %d times, want 0", body.reads)
	}
	if err := rc.Close(); err != nil {
		t.Fatal(err)
	}
	if body.reads != 0 || !body.closed {
		t.Errorf("after Close: %d reads, closed %v; want 0, true", body.reads, body.closed)
	}
	if _, err := rc.Read(make([]byte, 1)); err == nil {
		t.Error("Read after Close: got no error")
	}
	if err := rc.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

type errBody struct{ err error }

func (b errBody) Read([]byte) (int, error) { return 0, b.err }
func (errBody) Close() error               { return nil }

func TestDecodeBodyWireError(t *testing.T) {
	// The body's own errors (a reset connection, a deadline) are not
	// encoding errors: they come back as they are, for the caller to classify.
	cause := errors.New("connection reset")
	for _, h := range []string{"", "gzip", "deflate", "br", "zstd", "gzip, br"} {
		t.Run(h, func(t *testing.T) {
			rc, err := decodeBody(errBody{cause}, h, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadAll(rc); err != cause {
				t.Errorf("got %v, want %v", err, cause)
			}
		})
	}
}

func TestDecodeBodyCloseUnblocksRead(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	rc, err := decodeBody(pr, "gzip", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	var readErr error
	go func() {
		defer wg.Done()
		_, readErr = rc.Read(make([]byte, 10))
	}()
	time.Sleep(10 * time.Millisecond) // let Read block on the pipe
	if err := rc.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if readErr == nil {
		t.Error("Read: got no error after Close")
	}
}

func FuzzDecodeBody(f *testing.F) {
	const wireCap, decodedCap = 1 << 20, 1 << 16
	data := sample(2000)
	for _, h := range []string{"", "gzip", "deflate", "br", "zstd", "gzip, br", "zstd, deflate"} {
		f.Add(encode(f, h, data), h)
	}
	f.Add(encode(f, "deflate-raw", data), "deflate")
	f.Add(compressRepeated(f, "gzip", make([]byte, 1<<16), 4), "gzip")
	f.Add(zstdFrame(0, 14<<3), "zstd")
	f.Add([]byte{}, "gzip, gzip, gzip")
	f.Fuzz(func(t *testing.T, wire []byte, header string) {
		rc, err := decodeBody(io.NopCloser(bytes.NewReader(wire)), header, wireCap, decodedCap)
		if err != nil {
			fieldsOf(t, err)
			return
		}
		defer rc.Close()
		var total int
		buf := make([]byte, 4096)
		for {
			n, err := rc.Read(buf)
			total += n
			if total > decodedCap {
				t.Fatalf("read %d bytes, past the cap of %d", total, decodedCap)
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				fieldsOf(t, err)
				if _, err2 := rc.Read(buf); err2 != err {
					t.Fatalf("second Read: got %v, want the same %v", err2, err)
				}
				break
			}
		}
	})
}

func BenchmarkDecodeGzip(b *testing.B) {
	data := sample(10 << 10)
	gz := encode(b, "gzip", data)
	r := bytes.NewReader(gz)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		r.Reset(gz)
		rc, err := decodeBody(io.NopCloser(r), "gzip", DefaultMaxBodyBytes, DefaultMaxDecodedBytes)
		if err != nil {
			b.Fatal(err)
		}
		if n, err := io.Copy(io.Discard, rc); err != nil || n != int64(len(data)) {
			b.Fatalf("got %d bytes, %v", n, err)
		}
		rc.Close()
	}
}
