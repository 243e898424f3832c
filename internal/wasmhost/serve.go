package wasmhost

import (
	"bufio"
	"bytes"
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
	DefaultClientRate       = 50.0    // requests per second per client
	DefaultClientBurst      = 100
	// DefaultClientShare: a client's instances at once default to this
	// fraction of what the host's budget holds for the guest.
	DefaultClientShare = 0.25
	// clientTableMax bounds the per-client table; idle entries are
	// dropped when it is full.
	clientTableMax = 65536
)

// ServeConfig configures a Handler.
type ServeConfig struct {
	// Guest handles each request in a fresh instance (required). Its
	// host's Budget caps the instances running at once.
	Guest *Guest
	// ClientRate and ClientBurst limit requests per client, and
	// ClientInstances its instances at once (0: the defaults; for
	// ClientInstances, DefaultClientShare of what the host's budget holds
	// for the guest, at least 1). A client is an IPv4 address or an IPv6
	// /64, so that one host's block of addresses is one client.
	ClientRate      float64
	ClientBurst     int
	ClientInstances int
	// MaxBody and MaxResponse cap request and response bodies (0: the
	// defaults).
	MaxBody, MaxResponse int64
	Logger               *slog.Logger
}

// Handler is the server flip: the host owns the listening socket, and per
// request it checks the client's rate and its instances at once (429 with
// Retry-After, before any guest CPU), the body size (413), the host's
// budget of instances (503 with Retry-After) and the principal (503 when
// revoked, 429 past the tenant's rate), then runs a fresh instance of the
// guest with the request as an HTTP/1.1 message on stdin and answers what
// it writes on stdout: an HTTP/1.x response message, or plain bytes, which
// are a 200 body. A revocation of the principal stops a running instance
// (503). A guest that exits non-zero, passes its deadline or its memory
// cap, or answers too much is a 502. Each request that reaches the gate is
// one decision (broker "serve") recording its outcome. Its outbound calls
// go through the engine like any guest's. Safe for concurrent use.
type Handler struct {
	cfg     ServeConfig
	logger  *slog.Logger
	mu      sync.Mutex
	clients map[netip.Prefix]*client
	runs    atomic.Int64
}

// client is the state of one client key.
type client struct {
	lim    *rate.Limiter
	active int // instances running for it
}

// NewHandler builds a Handler.
func NewHandler(cfg ServeConfig) (*Handler, error) {
	if cfg.Guest == nil {
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonConfig, "wasmhost: a served guest needs a guest")
	}
	if cfg.ClientRate < 0 || cfg.ClientBurst < 0 || cfg.ClientInstances < 0 || cfg.MaxBody < 0 || cfg.MaxResponse < 0 {
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonConfig, "wasmhost: a negative limit for a served guest")
	}
	if cfg.ClientInstances == 0 {
		fits := cfg.Guest.h.budget.fits(cfg.Guest.profile.Memory)
		cfg.ClientInstances = max(1, int(float64(fits)*DefaultClientShare))
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
	h := &Handler{cfg: cfg, logger: cfg.Logger, clients: map[netip.Prefix]*client{}}
	if h.logger == nil {
		h.logger = slog.New(slog.DiscardHandler)
	}
	return h, nil
}

// Runs returns how many guest instances the handler has started.
func (h *Handler) Runs() int64 { return h.runs.Load() }

// ClientInstances returns the instances one client may run at once.
func (h *Handler) ClientInstances() int { return h.cfg.ClientInstances }

// clientKey is the limits' key of a client address: an IPv4 address, or
// the /64 of an IPv6 address (one host's usual allocation, so that
// rotating through it does not make new clients). A v4-mapped address is
// its IPv4 address.
func clientKey(ip netip.Addr) netip.Prefix {
	ip = ip.Unmap()
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, err := ip.WithZone("").Prefix(bits)
	if err != nil { // the zero Addr: one key for whatever has no address
		return netip.Prefix{}
	}
	return p
}

// admitClient checks the client's rate and its instances at once, and
// takes one of its instance slots; release gives it back. On refusal it
// returns the reason and when to retry.
func (h *Handler) admitClient(key netip.Prefix) (release func(), reason airlock.Reason, retry time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.clients[key]
	if c == nil {
		if len(h.clients) >= clientTableMax {
			for k, x := range h.clients {
				if x.active == 0 && x.lim.Tokens() >= float64(h.cfg.ClientBurst) { // idle: full bucket
					delete(h.clients, k)
				}
			}
			if len(h.clients) >= clientTableMax {
				return nil, airlock.ReasonClientRate, time.Second
			}
		}
		c = &client{lim: rate.NewLimiter(rate.Limit(h.cfg.ClientRate), h.cfg.ClientBurst)}
		h.clients[key] = c
	}
	if c.active >= h.cfg.ClientInstances {
		return nil, airlock.ReasonClientInstances, budgetRetryAfter
	}
	r := c.lim.Reserve()
	if d := r.Delay(); d > 0 {
		r.Cancel()
		return nil, airlock.ReasonClientRate, d
	}
	c.active++
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			c.active--
		})
	}, "", 0
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ap, _ := netip.ParseAddrPort(r.RemoteAddr)
	ip := ap.Addr().Unmap()
	release, reason, retry := h.admitClient(clientKey(ip))
	if release == nil {
		setRetryAfter(w, retry)
		msg := "too many requests from %s"
		if reason == airlock.ReasonClientInstances {
			msg = "too many requests at once from %s"
		}
		h.fail(w, http.StatusTooManyRequests, airlock.Errorf(airlock.CodeRateLimited, reason, msg, clientKey(ip)))
		return
	}
	defer release()
	if r.ContentLength > h.cfg.MaxBody {
		h.fail(w, http.StatusRequestEntityTooLarge, airlock.Errorf(airlock.CodeTooLarge, airlock.ReasonBody, "request body of %d bytes; at most %d", r.ContentLength, h.cfg.MaxBody))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, h.cfg.MaxBody+1))
	if err != nil {
		h.fail(w, http.StatusBadRequest, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonBody, "read the request body: %v", err))
		return
	}
	if int64(len(body)) > h.cfg.MaxBody {
		h.fail(w, http.StatusRequestEntityTooLarge, airlock.Errorf(airlock.CodeTooLarge, airlock.ReasonBody, "request body over %d bytes", h.cfg.MaxBody))
		return
	}
	inv, err := h.cfg.Guest.Start(r.Context(), "serve", cut(r.Method+" "+r.URL.Path, 256))
	if err != nil {
		status := http.StatusServiceUnavailable
		switch airlock.CodeOf(err) {
		case airlock.CodeRateLimited:
			status = http.StatusTooManyRequests
		case airlock.CodeDenied:
			status = http.StatusForbidden
		}
		setRetryAfter(w, airlock.RetryAfter(err))
		h.fail(w, status, err)
		return
	}
	id := inv.ID()
	w.Header().Set("X-Airlock-Decision", id)

	var out bytes.Buffer
	h.runs.Add(1)
	res, err := inv.Run(RunOptions{Stdin: bytes.NewReader(requestMessage(r, body, ip, id)), Stdout: &out, MaxStdout: h.cfg.MaxResponse + 1})
	switch {
	case err != nil:
		h.logger.Warn("served guest failed", slog.String("decision_id", id), slog.String("error", err.Error()))
		status := http.StatusBadGateway
		switch airlock.CodeOf(err) {
		case airlock.CodeRevoked, airlock.CodeUnavailable: // revoked or shutting down meanwhile
			status = http.StatusServiceUnavailable
		}
		h.fail(w, status, err)
		return
	case res.ExitCode != 0:
		h.fail(w, http.StatusBadGateway, airlock.Errorf(airlock.CodeUpstream, airlock.ReasonGuestExit, "the guest exited with code %d", res.ExitCode))
		return
	case int64(out.Len()) > h.cfg.MaxResponse:
		h.fail(w, http.StatusBadGateway, airlock.Errorf(airlock.CodeTooLarge, airlock.ReasonResponse, "the guest's response is over %d bytes", h.cfg.MaxResponse))
		return
	}
	h.respond(w, out.Bytes())
}

func setRetryAfter(w http.ResponseWriter, d time.Duration) {
	if d > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(d.Seconds()))))
	}
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
		h.fail(w, http.StatusBadGateway, airlock.Errorf(airlock.CodeUpstream, airlock.ReasonResponse, "the guest's response is malformed: %s", cut(err.Error(), 200)))
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 {
		h.fail(w, http.StatusBadGateway, airlock.Errorf(airlock.CodeUpstream, airlock.ReasonResponse, "the guest answered status %d", resp.StatusCode))
		return
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		h.fail(w, http.StatusBadGateway, airlock.Errorf(airlock.CodeUpstream, airlock.ReasonResponse, "the guest's response body is malformed: %s", cut(err.Error(), 200)))
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
