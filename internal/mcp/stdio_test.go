package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/airlockhq/airlock"
)

// TestStdioBadLines checks the replies to lines that are not JSON-RPC
// messages: each gets its error, with the id when the line has a usable
// one, and the session goes on to answer the request after them.
func TestStdioBadLines(t *testing.T) {
	t.Parallel()
	en := newEngine(t, loopback)
	ctx := testCtx(t)
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,`,
		`{"jsonrpc":"1.0","id":7,"method":"tools/list"}`,
		`[{"jsonrpc":"2.0","id":8,"method":"tools/list"}]`,
		`"just a string"`,
		``,
		`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`,
	}, "\n") // no newline after the last line
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- ServeStdio(ctx, en, en.Principal(), strings.NewReader(in), pw, Options{})
		pw.Close()
	}()
	type reply struct {
		ID     any             `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	var got []reply
	sc := bufio.NewScanner(pr)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r reply
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("reply %q: %v", sc.Text(), err)
		}
		got = append(got, r)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ServeStdio: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("ServeStdio did not return at EOF")
	}
	// Replies come as their requests finish: compare them unordered.
	want := map[string]int{"1 0": 1, "<nil> -32700": 1, "7 -32600": 1, "<nil> -32600": 2, "9 0": 1}
	have := map[string]int{}
	for _, g := range got {
		code := 0
		if g.Error != nil {
			code = g.Error.Code
			if !strings.HasSuffix(g.Error.Message, ".") {
				t.Errorf("error message %q is not a sentence", g.Error.Message)
			}
		}
		have[fmt.Sprintf("%v %d", g.ID, code)]++
	}
	if !maps.Equal(have, want) {
		t.Errorf("replies (id code): %v, want %v", have, want)
	}
}

func TestReadLineTooLong(t *testing.T) {
	t.Parallel()
	br := bufio.NewReaderSize(strings.NewReader(strings.Repeat("x", 100)+"\nok\n"), 16)
	line, tooLong, err := readLine(br, 50)
	if !tooLong || line != nil || err != nil {
		t.Fatalf("long line: %q %v %v", line, tooLong, err)
	}
	line, tooLong, err = readLine(br, 50)
	if tooLong || string(line) != "ok\n" || err != nil {
		t.Fatalf("next line: %q %v %v", line, tooLong, err)
	}
	if _, _, err = readLine(br, 50); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
}

// TestStdioEOFWhileAwaitingTheClient: a request whose handler waits for an
// answer from the client (a ping here; an elicitation alike) cannot be
// answered once stdin is closed, so EOF ends the session instead of
// waiting for it forever.
func TestStdioEOFWhileAwaitingTheClient(t *testing.T) {
	t.Parallel()
	en := newEngine(t, loopback)
	ctx := testCtx(t)
	s := NewServer(en, func(context.Context) airlock.Principal { return en.Principal() }, Options{})
	asked := make(chan struct{})
	s.AddTool(&sdkmcp.Tool{Name: "ask", InputSchema: &jsonschema.Schema{Type: "object"}},
		func(ctx context.Context, req *sdkmcp.CallToolRequest) (*sdkmcp.CallToolResult, error) {
			close(asked)
			return nil, req.Session.Ping(ctx, nil)
		})
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ask","arguments":{}}}`,
	}, "\n") + "\n"
	var out strings.Builder
	ss, err := s.Connect(ctx, &stdioTransport{in: strings.NewReader(in), out: &lockedWriter{w: &out}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ss.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the session did not end at EOF while the server awaited the client")
	}
	select {
	case <-asked:
	default:
		t.Error("the tool was never called")
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
