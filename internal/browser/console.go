package browser

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Bounds of the console log.
const (
	// ConsoleCapacity is how many messages the session keeps; older ones
	// are dropped first.
	ConsoleCapacity = 500
	// MaxConsoleText caps one message's text (bytes, cut at a rune).
	MaxConsoleText = 4096
)

// ConsoleMessage is one console API call of the page (console.log, .warn,
// .error, ...).
type ConsoleMessage struct {
	Level string    `json:"level"` // the console method: log, info, warning, error, debug, ...
	Text  string    `json:"text"`  // the arguments, space-separated
	URL   string    `json:"url,omitempty"`
	Time  time.Time `json:"time"`
}

// ConsoleLog is the session's console messages, oldest first.
type ConsoleLog struct {
	Messages []ConsoleMessage `json:"messages"`
	Dropped  int              `json:"dropped,omitempty"` // messages pushed out of the ring so far
}

// consoleRing is a bounded ring of console messages. It lives as long as
// the Session, across Restart.
type consoleRing struct {
	mu      sync.Mutex
	msgs    []ConsoleMessage
	next    int // where the next message goes once the ring is full
	dropped int
}

func (r *consoleRing) add(m ConsoleMessage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.msgs) < ConsoleCapacity {
		r.msgs = append(r.msgs, m)
		return
	}
	r.msgs[r.next] = m
	r.next = (r.next + 1) % ConsoleCapacity
	r.dropped++
}

func (r *consoleRing) snapshot() ConsoleLog {
	if r == nil {
		return ConsoleLog{Messages: []ConsoleMessage{}}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]ConsoleMessage, 0, len(r.msgs))
	out = append(out, r.msgs[r.next:]...)
	out = append(out, r.msgs[:r.next]...)
	return ConsoleLog{Messages: out, Dropped: r.dropped}
}

// Console returns the console messages collected so far (the last
// ConsoleCapacity), oldest first. It does not touch the browser.
func (s *Session) Console() ConsoleLog { return s.console.snapshot() }

// watchConsole collects Runtime.consoleAPICalled of b's page target into
// the session's ring until ctx ends. chromedp enables Runtime on the target.
func (s *Session) watchConsole(ctx context.Context, b *instance, t *chromedp.Target) {
	s.watchSockets(ctx, b, t)
	if s.console == nil {
		return
	}
	calls := cdp.Events(ctx, t, runtime.ConsoleAPICalled)
	b.events.Add(1)
	go func() {
		defer b.events.Done()
		for ev, err := range calls {
			if err != nil {
				return
			}
			s.console.add(consoleMessage(ev))
		}
	}()
}

func consoleMessage(ev runtime.EventConsoleAPICalled) ConsoleMessage {
	parts := make([]string, 0, len(ev.Args))
	for _, a := range ev.Args {
		parts = append(parts, remoteText(a))
	}
	m := ConsoleMessage{Level: string(ev.Type), Text: cut(strings.Join(parts, " "), MaxConsoleText), Time: time.Now().UTC()}
	if ev.StackTrace != nil && len(ev.StackTrace.CallFrames) > 0 {
		m.URL = ev.StackTrace.CallFrames[0].URL
	}
	return m
}

// remoteText renders one console argument as the DevTools console would,
// roughly: strings bare, primitives as JSON, objects by description.
func remoteText(o *runtime.RemoteObject) string {
	switch {
	case o == nil:
		return ""
	case len(o.Value) > 0:
		var str string
		if err := json.Unmarshal(o.Value, &str); err == nil {
			return str
		}
		return string(o.Value)
	case o.UnserializableValue != "":
		return string(o.UnserializableValue)
	case o.Description != "":
		return o.Description
	}
	return string(o.Type)
}

// cut shortens s to at most n bytes without splitting a rune.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
