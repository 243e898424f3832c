package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxStdioLine bounds one inbound line of the stdio transport, in bytes; a
// longer line is answered with an invalid-request error and skipped.
const MaxStdioLine = 16 << 20

// methodCancelled is the notification by which a client gives up a request
// (it is then never answered).
const methodCancelled = "notifications/cancelled"

// stdioTransport is the newline-delimited JSON-RPC transport of ServeStdio.
// It differs from the SDK's IOTransport in the two ways a piped client
// needs: at EOF the connection reports the end only once every request it
// has read has been answered (the SDK's would end the session and drop
// them), and a line that is not a JSON-RPC message gets an error reply
// (-32700 parse error, or -32600 invalid request) and the server goes on
// (the SDK's would end the session with an error).
type stdioTransport struct {
	in  io.Reader
	out io.Writer
}

// Connect implements sdkmcp.Transport. It starts the goroutine reading in;
// that goroutine ends when in does (a read of stdin cannot be interrupted).
func (t *stdioTransport) Connect(context.Context) (sdkmcp.Connection, error) {
	c := &stdioConn{
		out:      t.out,
		incoming: make(chan jsonrpc.Message),
		ended:    make(chan struct{}),
		closed:   make(chan struct{}),
		pending:  map[jsonrpc.ID]bool{},
		awaiting: map[jsonrpc.ID]bool{},
		changed:  make(chan struct{}),
	}
	go c.readLoop(t.in)
	return c, nil
}

type stdioConn struct {
	out io.Writer
	wmu sync.Mutex // one whole line per write to out

	incoming chan jsonrpc.Message // decoded messages, in order
	ended    chan struct{}        // closed when the input ended; endErr says how
	endErr   error
	closed   chan struct{}
	close    sync.Once

	mu       sync.Mutex
	pending  map[jsonrpc.ID]bool // requests read and not yet answered
	awaiting map[jsonrpc.ID]bool // requests sent to the client and not yet answered
	changed  chan struct{}       // closed and replaced when pending or awaiting change
}

func (c *stdioConn) SessionID() string { return "" }

// Read returns the next message. At the end of the input it returns the
// input's error (io.EOF) once no request read is left unanswered, or once
// the server waits for an answer from the client, which can never come.
func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.closed:
		return nil, io.EOF
	case m := <-c.incoming:
		return m, nil
	case <-c.ended:
	}
	for {
		c.mu.Lock()
		done := len(c.pending) == 0 || len(c.awaiting) > 0
		changed := c.changed
		c.mu.Unlock()
		if done {
			return nil, c.endErr
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.closed:
			return nil, io.EOF
		case <-changed:
		}
	}
}

// Write writes msg as one line. A response settles the request it answers
// once it is written.
func (c *stdioConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("encode message: %w", err)
	}
	if req, ok := msg.(*jsonrpc.Request); ok && req.ID.IsValid() {
		c.update(func() { c.awaiting[req.ID] = true })
	}
	err = c.writeLine(data)
	if resp, ok := msg.(*jsonrpc.Response); ok {
		c.update(func() { delete(c.pending, resp.ID) })
	}
	return err
}

func (c *stdioConn) writeLine(data []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.out.Write(append(data, '\n'))
	return err
}

// Close ends the connection; it does not close in or out, which belong to
// ServeStdio's caller.
func (c *stdioConn) Close() error {
	c.close.Do(func() { close(c.closed) })
	return nil
}

// update runs f under the lock and wakes a Read waiting at the end of the
// input.
func (c *stdioConn) update(f func()) {
	c.mu.Lock()
	f()
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

func (c *stdioConn) readLoop(in io.Reader) {
	br := bufio.NewReader(in)
	for {
		line, tooLong, err := readLine(br, MaxStdioLine)
		if tooLong {
			c.replyError(nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("Invalid request: a line longer than %d bytes.", MaxStdioLine))
		} else if line = bytes.TrimSpace(line); len(line) > 0 {
			if msg := c.decode(line); msg != nil {
				select {
				case c.incoming <- msg:
				case <-c.closed:
					return
				}
			}
		}
		if err != nil {
			if errors.Is(err, io.ErrClosedPipe) {
				err = io.EOF
			}
			c.endErr = err
			close(c.ended)
			return
		}
	}
}

// decode returns the message of line, or nil after answering a line that
// is not one. It records the requests read and the answers to the server's
// own requests.
func (c *stdioConn) decode(line []byte) jsonrpc.Message {
	if !json.Valid(line) {
		c.replyError(nil, jsonrpc.CodeParseError, "Parse error: the line is not JSON.")
		return nil
	}
	if line[0] == '[' {
		c.replyError(nil, jsonrpc.CodeInvalidRequest, "Invalid request: JSON-RPC batches are not supported; send one message per line.")
		return nil
	}
	msg, err := jsonrpc.DecodeMessage(line)
	if err != nil {
		var probe struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.Unmarshal(line, &probe)
		c.replyError(probe.ID, jsonrpc.CodeInvalidRequest, "Invalid request: not a JSON-RPC 2.0 message ("+err.Error()+").")
		return nil
	}
	switch m := msg.(type) {
	case *jsonrpc.Request:
		if m.ID.IsValid() {
			c.update(func() { c.pending[m.ID] = true })
		} else if m.Method == methodCancelled {
			var p struct {
				RequestID any `json:"requestId"`
			}
			if json.Unmarshal(m.Params, &p) == nil {
				if id, err := jsonrpc.MakeID(p.RequestID); err == nil && id.IsValid() {
					c.update(func() { delete(c.pending, id) })
				}
			}
		}
	case *jsonrpc.Response:
		c.update(func() { delete(c.awaiting, m.ID) })
	}
	return msg
}

// replyError writes an error response. id is the raw id of the offending
// message when it has a usable one, else the reply's id is null.
func (c *stdioConn) replyError(id json.RawMessage, code int64, message string) {
	var v any
	if json.Unmarshal(id, &v) != nil {
		v = nil
	}
	switch v.(type) {
	case string, float64:
	default:
		v = nil
	}
	data, err := json.Marshal(struct {
		JSONRPC string `json:"jsonrpc"`
		ID      any    `json:"id"`
		Error   struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: v, Error: struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	}{code, message}})
	if err == nil {
		_ = c.writeLine(data) // a failed write shows again on the server's next one
	}
}

// readLine reads one line without its newline. A line longer than limit is
// consumed whole and reported as tooLong, with no data.
func readLine(br *bufio.Reader, limit int) (line []byte, tooLong bool, err error) {
	for {
		frag, err := br.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(frag) > limit+1 { // +1: the newline
				tooLong, line = true, nil
			} else {
				line = append(line, frag...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return line, tooLong, err
	}
}
