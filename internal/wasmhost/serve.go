package wasmhost

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/airlockhq/airlock"
)

// Defaults of the server flip.
const (
	DefaultServeMaxBody     = 4 << 20 // request body cap (413 above it)
	DefaultServeMaxResponse = 8 << 20 // response cap (502 above it)
	DefaultClientRate       = 50.0    // requests per second per client IP
	DefaultClientBurst      = 100
	// clientTableMax bounds the per-IP limiter table; idle entries are
	// dropped when it is full.
	clientTableMax = 65536
)

// Admitter runs the gate for one inbound request: revoked, tenant rate.
// *engine.Engine satisfies it.
type Admitter interface {
	Admit(ctx context.Context, p airlock.Principal, target string) (string, error)
}

// ServeConfig configures a Handler.
type ServeConfig struct {
	// Guest handles each request in a fresh instance (required).
	Guest *Guest
	// Admitter is asked before each request reaches the guest (required).
	Admitter Admitter
	// ClientRate and ClientBurst limit requests per client IP (0: the
	// defaults).
	ClientRate  float64
	ClientBurst int
	// MaxBody and MaxResponse cap request and response bodies (0: the
	// defaults).
	MaxBody, MaxResponse int64
	Logger               *slog.Logger
}

// Handler is the server flip: the host owns the listening socket, and per
// request it checks the client's rate (429, before any guest CPU), the body
// size (413) and the principal (503 when revoked, 429 past the tenant's
// rate), then runs a fresh instance of the guest with the request as an
// HTTP/1.1 message on stdin and answers what it writes on stdout: an
// HTTP/1.x response message, or plain bytes, which are a 200 body. A guest
// that exits non-zero, passes its deadline or its memory cap, or answers
// too much is a 502. Its outbound calls go through the engine like any
// guest's. Safe for concurrent use.
type Handler struct {
	cfg     ServeConfig
	logger  *slog.Logger
	mu      sync.Mutex
	clients map[netip.Addr]*rate.Limiter
	runs    atomic.Int64
}

// NewHandler builds a Handler.
func NewHandler(cfg ServeConfig) (*Handler, error) {
	if cfg.Guest == nil || cfg.Admitter == nil {
		return nil, airlock.Errorf(airlock.CodeInvalid, "config", "wasmhost: a served guest needs a guest and an admitter")
	}
	if cfg.ClientRate <= 0 {
		cfg.ClientRate = DefaultClientRate
	}
	if cfg.ClientBurst <= 0 {
		cfg.ClientBurst = DefaultClientBurst
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultServeMaxBody
	}
	if cfg.MaxResponse <= 0 {
		cfg.MaxResponse = DefaultServeMaxResponse
	}
	h := &Handler{cfg: cfg, logger: cfg.Logger, clients: map[netip.Addr]*rate.Limiter{}}
	if h.logger == nil {
		h.logger = slog.New(slog.DiscardHandler)
	}
	return h, nil
}

// Runs returns how many guest instances the handler has started.
func (h *Handler) Runs() int64 { return h.runs.Load() }

func (h *Handler) allowClient(ip netip.Addr) (bool, time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	l := h.clients[ip]
	if l == nil {
		if len(h.clients) >= clientTableMax {
			for a, x := range h.clients {
				if x.Tokens() >= float64(h.cfg.ClientBurst) { // idle: full bucket
					delete(h.clients, a)
				}
			}
			if len(h.clients) >= clientTableMax {
				return false, time.Second
			}
		}
		l = rate.NewLimiter(rate.Limit(h.cfg.ClientRate), h.cfg.ClientBurst)
		h.clients[ip] = l
	}
	r := l.Reserve()
	if d := r.Delay(); d > 0 {
		r.Cancel()
		return false, d
	}
	return true, 0
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ap, _ := netip.ParseAddrPort(r.RemoteAddr)
	ip := ap.Addr().Unmap()
	if ok, retry := h.allowClient(ip); !ok {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(retry.Seconds()))))
		h.fail(w, http.StatusTooManyRequests, airlock.Errorf(airlock.CodeRateLimited, "client_rate", "too many requests from %s", ip))
		return
	}
	if r.ContentLength > h.cfg.MaxBody {
		h.fail(w, http.StatusRequestEntityTooLarge, airlock.Errorf(airlock.CodeTooLarge, "body", "request body of %d bytes; at most %d", r.ContentLength, h.cfg.MaxBody))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, h.cfg.MaxBody+1))
	if err != nil {
		h.fail(w, http.StatusBadRequest, airlock.Errorf(airlock.CodeInvalid, "body", "read the request body: %v", err))
		return
	}
	if int64(len(body)) > h.cfg.MaxBody {
		h.fail(w, http.StatusRequestEntityTooLarge, airlock.Errorf(airlock.CodeTooLarge, "body", "request body over %d bytes", h.cfg.MaxBody))
		return
	}
	g := h.cfg.Guest
	id, err := h.cfg.Admitter.Admit(r.Context(), g.Principal(), cut(r.Method+" "+r.URL.Path, 256))
	if err != nil {
		status := http.StatusServiceUnavailable
		switch airlock.CodeOf(err) {
		case airlock.CodeRateLimited:
			status = http.StatusTooManyRequests
		case airlock.CodeDenied:
			status = http.StatusForbidden
		}
		h.fail(w, status, err)
		return
	}
	w.Header().Set("X-Airlock-Decision", id)

	var out bytes.Buffer
	h.runs.Add(1)
	res, err := g.Run(r.Context(), RunOptions{Stdin: bytes.NewReader(requestMessage(r, body, ip, id)), Stdout: &out, MaxStdout: h.cfg.MaxResponse + 1})
	switch {
	case err != nil:
		h.logger.Warn("served guest failed", slog.String("decision_id", id), slog.String("error", err.Error()))
		h.fail(w, http.StatusBadGateway, err)
		return
	case res.ExitCode != 0:
		h.fail(w, http.StatusBadGateway, airlock.Errorf(airlock.CodeUpstream, "guest_exit", "the guest exited with code %d", res.ExitCode))
		return
	case int64(out.Len()) > h.cfg.MaxResponse:
		h.fail(w, http.StatusBadGateway, airlock.Errorf(airlock.CodeTooLarge, "response", "the guest's response is over %d bytes", h.cfg.MaxResponse))
		return
	}
	h.respond(w, out.Bytes())
}

// requestMessage renders the request the guest reads on stdin.
func requestMessage(r *http.Request, body []byte, ip netip.Addr, id string) []byte {
	var b bytes.Buffer
	uri := r.URL.RequestURI()
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", r.Method, uri, r.Host)
	hdr := r.Header.Clone()
	for k := range hdr {
		if strings.HasPrefix(k, "X-Airlock-") {
			delete(hdr, k) // only the host sets these
		}
	}
	for _, k := range []string{"Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive", "Upgrade", "Te", "Trailer", "Proxy-Connection"} {
		hdr.Del(k)
	}
	hdr.Set("Content-Length", strconv.Itoa(len(body)))
	hdr.Set("X-Airlock-Client-Ip", ip.String())
	hdr.Set("X-Airlock-Decision", id)
	hdr.Write(&b)
	b.WriteString("\r\n")
	b.Write(body)
	return b.Bytes()
}

// respond answers the guest's output: a response message, or plain bytes
// as a 200 body.
func (h *Handler) respond(w http.ResponseWriter, out []byte) {
	if !bytes.HasPrefix(out, []byte("HTTP/1.")) {
		w.Header().Set("Content-Type", http.DetectContentType(out))
		w.Header().Set("Content-Length", strconv.Itoa(len(out)))
		w.WriteHeader(http.StatusOK)
		w.Write(out)
		return
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(out)), nil)
	if err != nil {
		h.fail(w, http.StatusBadGateway, airlock.Errorf(airlock.CodeUpstream, "response", "the guest's response is malformed: %s", cut(err.Error(), 200)))
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 {
		h.fail(w, http.StatusBadGateway, airlock.Errorf(airlock.CodeUpstream, "response", "the guest answered status %d", resp.StatusCode))
		return
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		h.fail(w, http.StatusBadGateway, airlock.Errorf(airlock.CodeUpstream, "response", "the guest's response body is malformed: %s", cut(err.Error(), 200)))
		return
	}
	for k, vs := range resp.Header {
		switch k {
		case "Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive", "Upgrade", "Trailer", "X-Airlock-Decision":
			continue
		}
		w.Header()[k] = vs
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(resp.StatusCode)
	w.Write(body)
}

func (h *Handler) fail(w http.ResponseWriter, status int, err error) {
	pub := airlock.Public(err, "")
	if pub.DecisionID != "" {
		w.Header().Set("X-Airlock-Decision", pub.DecisionID)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(airlock.ErrorBody{Error: pub})
}
