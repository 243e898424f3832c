package browser

import (
	"context"
	"errors"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/io"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
)

// MaxDownloadBytes caps one download (Options.MaxDownloadBytes lowers
// it); a larger body is refused and nothing is saved.
const MaxDownloadBytes = 100 << 20

// DefaultDownloadTimeout bounds a download when ctx has no deadline.
const DefaultDownloadTimeout = 2 * time.Minute

// cleanupTimeout bounds the calls that end a download's request and
// stream, which run even when the download's context has ended.
const cleanupTimeout = 5 * time.Second

// downloadChunk is the size of one IO.read of a download's body.
const downloadChunk = 512 << 10

// Download fetches rawURL as the session and saves the response body,
// whatever its type (a page too), into destPath under the session's files
// directory. The request is a navigation of a background tab of the same
// browser (so the session's cookies go along, layer 1 decides it, ask
// included, and it leaves through the session's proxy, layer 2); its
// response is caught at the headers (Fetch, response stage) and its body
// read as a stream, so the background tab never renders it. The current
// tab does not move and its history does not change.
//
// Errors: denied (path_escape; the policy's reason before any request;
// blocked when layer 1 refused the request or a redirect; the egress
// proxy's reason when layer 2 refused it), too_large (download_size),
// upstream (download_status for a status other than 2xx, download_failed
// for a network error), unavailable (proxy_auth, browser_crashed),
// timeout.
func (s *Session) Download(ctx context.Context, rawURL, destPath string) (Download, error) {
	dest, err := confine(s.opts.FilesDir, destPath)
	if err != nil {
		return Download{}, err
	}
	if fi, err := os.Lstat(dest); err == nil && !fi.Mode().IsRegular() {
		return Download{}, pathErr("download destination %q exists and is not a regular file", destPath)
	}
	if err := s.checkURL(rawURL); err != nil {
		return Download{}, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultDownloadTimeout)
		defer cancel()
	}
	b, err := s.begin()
	if err != nil {
		return Download{}, err
	}
	defer s.mu.Unlock()
	d, err := s.fetchAs(ctx, b, rawURL, dest)
	if err != nil {
		return Download{}, err
	}
	d.Path = destPath
	return d, nil
}

// fetchAs runs one download in a background tab that it closes after.
func (s *Session) fetchAs(ctx context.Context, b *instance, rawURL, dest string) (Download, error) {
	tctx, closeTab := chromedp.NewContext(b.browserCtx)
	defer closeTab() // closes the background tab
	if err := runWithin(ctx, tctx); err != nil {
		return Download{}, cdpErr(ctx, b, "download", err)
	}
	bt := chromedp.FromContext(tctx).Target
	if err := openBlank(ctx, bt); err != nil {
		return Download{}, cdpErr(ctx, b, "download", err)
	}
	dctx, stop := context.WithCancel(ctx)
	defer stop()
	// Subscribe before anything can pause.
	paused := make(chan fetch.EventRequestPaused, 8)
	evs := cdp.Events(dctx, bt, fetch.RequestPaused)
	go func() {
		for ev, err := range evs {
			if err != nil {
				return
			}
			select {
			case paused <- ev:
			case <-dctx.Done():
				return
			}
		}
	}()
	// The response comes from the network, not from the HTTP cache or a
	// service worker of the origin, so the response stage always sees it.
	if _, err := cdp.Call(ctx, bt, network.SetCacheDisabled, network.SetCacheDisabledParams{CacheDisabled: true}); err != nil {
		return Download{}, cdpErr(ctx, b, "download", err)
	}
	if _, err := cdp.Call(ctx, bt, network.SetBypassServiceWorker, network.SetBypassServiceWorkerParams{Bypass: true}); err != nil {
		return Download{}, cdpErr(ctx, b, "download", err)
	}
	if _, err := cdp.Call(ctx, bt, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{
		{URLPattern: "*", ResourceType: network.ResourceTypeDocument, RequestStage: fetch.RequestStageResponse},
	}}); err != nil {
		return Download{}, cdpErr(ctx, b, "download", err)
	}
	type navResult struct {
		text string
		err  error
	}
	navDone := make(chan navResult, 1)
	go func() {
		res, err := cdp.Call(dctx, bt, page.Navigate, page.NavigateParams{URL: rawURL})
		navDone <- navResult{res.ErrorText, err}
	}()
	frame := cdp.FrameID(bt.TargetID)
	logged := s.netlog.count()
	chain := map[string]bool{normURL(rawURL): true} // the URLs of the download's requests
	for {
		select {
		case ev := <-paused:
			if ev.FrameID != frame || (ev.ResponseStatusCode == 0 && ev.ResponseErrorReason == "") ||
				ev.ResponseErrorReason != "" || isRedirect(ev) {
				// Not the download's response (another frame), a network
				// error (the navigation's result says which), or a redirect
				// (its next request goes through layer 1 again).
				if ev.FrameID == frame && isRedirect(ev) && ev.Request != nil && len(chain) < 2*MaxRedirects {
					if u, err := url.Parse(ev.Request.URL); err == nil {
						if next, err := u.Parse(header(ev.ResponseHeaders, "Location")); err == nil {
							chain[normURL(next.String())] = true
						}
					}
				}
				cdp.Call(dctx, bt, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
				continue
			}
			d, err := s.saveBody(ctx, b, bt, ev, rawURL, dest)
			// The background tab renders nothing.
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
			cdp.Call(fctx, bt, fetch.FailRequest, fetch.FailRequestParams{
				RequestID: ev.RequestID, ErrorReason: network.ErrorReasonAborted})
			cancel()
			return d, err
		case nr := <-navDone:
			switch {
			case nr.err != nil:
				return Download{}, downloadErr(ctx, b, rawURL, nr.err)
			case strings.Contains(nr.text, "ERR_BLOCKED_BY_CLIENT"):
				return Download{}, s.blocked(rawURL, logged, chain)
			case strings.Contains(nr.text, "ERR_TUNNEL_CONNECTION_FAILED"):
				if err := s.tunnelRefusal(ctx, rawURL, chain); err != nil {
					return Download{}, err
				}
				fallthrough
			case nr.text != "":
				return Download{}, airlock.Errorf(airlock.CodeUpstream, airlock.ReasonDownloadFailed, "browser: download %s: %s", rawURL, nr.text)
			}
			return Download{}, airlock.Errorf(airlock.CodeUpstream, airlock.ReasonDownloadFailed, "browser: download %s: the navigation ended without a response", rawURL)
		case <-ctx.Done():
			return Download{}, downloadErr(ctx, b, rawURL, ctx.Err())
		}
	}
}

// normURL spells a URL as Chromium reports it, near enough to match it:
// scheme and host in lower case, the path "/" when empty, no fragment.
func normURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	u.Scheme, u.Host, u.Fragment = strings.ToLower(u.Scheme), strings.ToLower(u.Host), ""
	if u.Path == "" && u.Opaque == "" {
		u.Path = "/"
	}
	return u.String()
}

// blocked is layer 1's refusal of the download's document request (the
// URL itself, or a redirect's target: the URLs of chain), with the reason
// layer 1 logged for it when the network log still has it (among the
// entries after the first logged), else reason blocked.
func (s *Session) blocked(rawURL string, logged int, chain map[string]bool) error {
	for _, e := range slices.Backward(s.netlog.refusedSince(logged, NetworkLogCapacity)) {
		if e.ResourceType == string(network.ResourceTypeDocument) && chain[normURL(e.URL)] && e.Reason != "" {
			return airlock.Errorf(airlock.CodeDenied, airlock.Reason(e.Reason), "browser: download %s: %s refused by policy (%s)", rawURL, e.URL, e.Reason)
		}
	}
	return airlock.Errorf(airlock.CodeDenied, airlock.ReasonBlocked, "browser: download %s: blocked by policy", rawURL)
}

// tunnelWait bounds how long a download whose tunnel failed waits for
// layer 2's report of a refusal (RefusedTunnel), which may trail
// Chromium's error.
const tunnelWait = time.Second

// tunnelRefusal is layer 2's refusal of the tunnel to the host of one of
// the download's https URLs (chain), when RefusedTunnel reported one; nil
// when none came within tunnelWait (the tunnel failed otherwise).
func (s *Session) tunnelRefusal(ctx context.Context, rawURL string, chain map[string]bool) error {
	var hosts []string
	for raw := range chain {
		if u, err := url.Parse(raw); err == nil && u.Scheme == "https" && u.Hostname() != "" {
			port := u.Port()
			if port == "" {
				port = "443"
			}
			hosts = append(hosts, net.JoinHostPort(strings.ToLower(u.Hostname()), port))
		}
	}
	if len(hosts) == 0 {
		return nil
	}
	deadline := time.Now().Add(tunnelWait)
	for {
		for _, hp := range hosts {
			if reason, ok := s.tunnels.find(hp); ok {
				return airlock.Errorf(airlock.CodeDenied, airlock.Reason(reason), "browser: download %s: the egress proxy refused the tunnel to %s (%s)", rawURL, hp, reason)
			}
		}
		if !time.Now().Before(deadline) || ctx.Err() != nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// RefusedTunnel records that layer 2 refused this session a CONNECT to
// hostport, with its reason: Chromium reports only
// ERR_TUNNEL_CONNECTION_FAILED, and a download then names the refusal.
// The session's proxy calls it for each refused tunnel.
func (s *Session) RefusedTunnel(hostport, reason string) {
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		hostport = net.JoinHostPort(strings.ToLower(strings.Trim(h, "[]")), p)
	}
	if reason == "" {
		reason = "blocked"
	}
	s.tunnels.add(hostport, reason)
}

// tunnelLog keeps the tunnels layer 2 refused lately (at most maxSockets,
// for socketTTL).
type tunnelLog struct {
	mu   sync.Mutex
	recs []tunnelRec
}

type tunnelRec struct {
	hostport, reason string
	at               time.Time
}

func (l *tunnelLog) add(hostport, reason string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.recs) >= maxSockets {
		l.recs = l.recs[1:]
	}
	l.recs = append(l.recs, tunnelRec{hostport: hostport, reason: reason, at: time.Now()})
}

// find returns the reason of the latest recent refusal of hostport.
func (l *tunnelLog) find(hostport string) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	for i := len(l.recs) - 1; i >= 0; i-- {
		if r := l.recs[i]; r.hostport == hostport && now.Sub(r.at) < socketTTL {
			return r.reason, true
		}
	}
	return "", false
}

// isRedirect reports a redirect response, which Chromium follows.
func isRedirect(ev fetch.EventRequestPaused) bool {
	switch ev.ResponseStatusCode {
	case 301, 302, 303, 307, 308:
		return header(ev.ResponseHeaders, "Location") != ""
	}
	return false
}

func header(hs []*fetch.HeaderEntry, name string) string {
	for _, h := range hs {
		if h != nil && strings.EqualFold(h.Name, name) {
			return h.Value
		}
	}
	return ""
}

// saveBody checks the paused response's headers (the egress proxy's own
// refusal, the status, the declared length) and streams its body into
// dest through a temporary file beside it, at most the session's cap.
func (s *Session) saveBody(ctx context.Context, b *instance, bt *chromedp.Target, ev fetch.EventRequestPaused, rawURL, dest string) (Download, error) {
	if code := header(ev.ResponseHeaders, egress.HeaderAirlockCode); code != "" {
		c := airlock.Code(code)
		if !c.Valid() {
			c = airlock.CodeInternal
		}
		reason := header(ev.ResponseHeaders, egress.HeaderAirlockReason)
		return Download{}, airlock.Errorf(c, airlock.Reason(reason), "browser: download %s: refused by the egress proxy (%s %s)", rawURL, code, reason)
	}
	status := ev.ResponseStatusCode
	if status == http.StatusProxyAuthRequired {
		return Download{}, airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonProxyAuth, "browser: download %s: the egress proxy refused the session's credentials", rawURL)
	}
	if status < 200 || status > 299 {
		return Download{}, airlock.Errorf(airlock.CodeUpstream, airlock.ReasonDownloadStatus, "browser: download %s: the server answered HTTP %d", rawURL, status)
	}
	limit := s.opts.MaxDownloadBytes
	if limit <= 0 || limit > MaxDownloadBytes {
		limit = MaxDownloadBytes
	}
	tooLarge := func() error {
		return airlock.Errorf(airlock.CodeTooLarge, airlock.ReasonDownloadSize, "browser: download %s: over the %d-byte cap", rawURL, limit)
	}
	if n, err := strconv.ParseInt(header(ev.ResponseHeaders, "Content-Length"), 10, 64); err == nil && n > limit {
		return Download{}, tooLarge()
	}
	stream, err := cdp.Call(ctx, bt, fetch.TakeResponseBodyAsStream, fetch.TakeResponseBodyAsStreamParams{RequestID: ev.RequestID})
	if err != nil {
		return Download{}, downloadErr(ctx, b, rawURL, err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		cdp.Call(cctx, bt, io.Close, io.CloseParams{Handle: stream.Stream})
	}()
	if err := os.MkdirAll(filepath.Dir(dest), 0o700); err != nil {
		return Download{}, airlock.Errorf(airlock.CodeInternal, airlock.ReasonFilesDir, "browser: download: %v", err)
	}
	f, err := os.CreateTemp(filepath.Dir(dest), ".download-*")
	if err != nil {
		return Download{}, airlock.Errorf(airlock.CodeInternal, airlock.ReasonFilesDir, "browser: download: %v", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op once renamed
	var n int64
	for {
		chunk, err := cdp.Call(ctx, bt, io.Read, io.ReadParams{Handle: stream.Stream, Size: downloadChunk})
		if err != nil {
			f.Close()
			return Download{}, downloadErr(ctx, b, rawURL, err)
		}
		n += int64(len(chunk.Data))
		if n > limit {
			f.Close()
			return Download{}, tooLarge()
		}
		if _, err := f.Write(chunk.Data); err != nil {
			f.Close()
			return Download{}, airlock.Errorf(airlock.CodeInternal, airlock.ReasonFilesDir, "browser: download: %v", err)
		}
		if chunk.EOF {
			break
		}
	}
	if err := f.Close(); err != nil {
		return Download{}, airlock.Errorf(airlock.CodeInternal, airlock.ReasonFilesDir, "browser: download: %v", err)
	}
	if err := os.Rename(tmp, dest); err != nil {
		return Download{}, airlock.Errorf(airlock.CodeInternal, airlock.ReasonFilesDir, "browser: download: %v", err)
	}
	final := rawURL
	if ev.Request != nil {
		final = ev.Request.URL
	}
	return Download{Bytes: n, Name: suggestedName(header(ev.ResponseHeaders, "Content-Disposition"), final),
		ContentType: header(ev.ResponseHeaders, "Content-Type")}, nil
}

// suggestedName is the file name the server suggests: Content-Disposition's
// filename (filename* included), else the URL's last path segment, without
// directories or control characters; "" when there is none.
func suggestedName(disposition, rawURL string) string {
	var name string
	if _, params, err := mime.ParseMediaType(disposition); err == nil {
		name = params["filename"]
	}
	if name == "" {
		if u, err := url.Parse(rawURL); err == nil {
			name = path.Base(u.Path)
		}
	}
	name = path.Base(strings.ReplaceAll(name, `\`, "/"))
	name = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, name)
	if name == "." || name == "/" || name == ".." {
		return ""
	}
	return name
}

// downloadErr turns a failed wait or protocol call into the vocabulary.
func downloadErr(ctx context.Context, b *instance, raw string, err error) error {
	if ctx.Err() != nil && !b.lost() {
		return airlock.Errorf(airlock.CodeTimeout, airlock.ReasonBrowserTimeout, "browser: download %s: no response in time", raw)
	}
	if err == nil {
		err = errors.New("event stream ended")
	}
	return cdpErr(ctx, b, "download", err)
}
