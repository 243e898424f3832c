package api

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
	"github.com/airlockhq/airlock/internal/child"
)

// Sizes of TestBrowserAPINeverCrashes: fixed, small enough for CI. The
// sequences are dealt to propShards shards that run at once (each with its
// own session at a time and its own generator, seeded propSeed+shard):
// the test waits on Chromium far more than it computes. Each sequence
// opens a session, which launches Chromium, and most close it, which
// waits for Chromium to exit: launches and exits are most of the test's
// time and CPU, so the 240 requests come as 20 sequences of 12 steps
// rather than 40 of 6.
const (
	propSeed      = 15
	propSequences = 20
	propSteps     = 12
	propShards    = 4
)

// TestBrowserAPINeverCrashes drives random sequences of ops, interact steps
// and session events (before any navigate, after close, after Chromium is
// killed, bad refs, bad selectors, bad bodies) against real Chromium
// through the HTTP API, with a fixed seed. After every request the server
// must still answer /healthz, and every reply must be typed: a JSON result,
// or an error body whose code is one of the vocabulary's; every failed
// interact step carries a typed error too. A panic anywhere in the server
// (chromedp's own goroutines included) ends the test binary, and with it
// the test.
func TestBrowserAPINeverCrashes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		switch r.URL.Path {
		case "/two":
			w.Write([]byte(`<!doctype html><title>Two</title><p id="p">two</p><a href="/">Home</a>`))
		default:
			w.Write([]byte(`<!doctype html><title>Prop</title><h1>Hi</h1><input id="q" aria-label="Query">
<button id="go" onclick="location.href='/two'">Go</button><a href="/two">Two</a>
<select id="s" aria-label="Pick"><option value="a">A</option><option value="b">B</option></select>
<input type="checkbox" id="c" style="display: none"><label for="c">Agree</label>`))
		}
	}))
	t.Cleanup(page.Close)

	start := time.Now()
	var mu sync.Mutex
	total := propStats{codes: map[airlock.Code]int{}}
	t.Run("shards", func(t *testing.T) {
		for shard := range propShards {
			t.Run(fmt.Sprint(shard), func(t *testing.T) {
				t.Parallel()
				st := propShard(t, f.with(t), page.URL, shard)
				mu.Lock()
				defer mu.Unlock()
				total.add(st)
			})
		}
	})
	if t.Failed() {
		return
	}
	requests, errorsSeen, kills, codes := total.requests, total.errorsSeen, total.kills, total.codes
	t.Logf("%d sequences × %d steps in %d shards, seeds %d+shard: %d requests, %d Chromium kills, %d error replies %v, in %v",
		propSequences, propSteps, propShards, propSeed, requests, kills, errorsSeen, codes, time.Since(start).Round(time.Millisecond))
	if kills == 0 || errorsSeen == 0 || errorsSeen == requests {
		t.Fatalf("the sequences did not exercise what they should: %d kills, %d of %d replies errors", kills, errorsSeen, requests)
	}
}

// propStats counts what the sequences of TestBrowserAPINeverCrashes saw.
type propStats struct {
	requests, errorsSeen, kills int
	codes                       map[airlock.Code]int
}

func (p *propStats) add(o propStats) {
	p.requests += o.requests
	p.errorsSeen += o.errorsSeen
	p.kills += o.kills
	for c, n := range o.codes {
		p.codes[c] += n
	}
}

// propShard runs the sequences shard, shard+propShards, ... of
// TestBrowserAPINeverCrashes against the page server at pageURL, from a
// generator seeded propSeed+shard.
func propShard(t *testing.T, f *fixture, pageURL string, shard int) propStats {
	st := propStats{codes: map[airlock.Code]int{}}
	rng := rand.New(rand.NewPCG(propSeed+uint64(shard), propSeed))
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	refs := func() string { return pick("@e1", "@e2", "@e3", "e3", "@e999", "nope", "@", "@e0") }
	sels := func() string {
		return pick("h1", "#q", "#go", "#s", "#p", "#missing", "[[[", "div >>> p", "a:has(", "::x")
	}
	urls := func() string {
		return pick(pageURL+"/", pageURL+"/two", "http://127.0.0.1:1/", "javascript:alert(1)", "about:blank", "file:///etc/passwd", "not a url")
	}
	step := func() map[string]any {
		switch rng.IntN(8) {
		case 0:
			return map[string]any{"action": "goto", "url": urls()}
		case 1:
			return map[string]any{"action": "click", "selector": sels(), "timeout_ms": 200}
		case 2:
			return map[string]any{"action": "extract_text", "selector": sels(), "timeout_ms": 200}
		case 3:
			return map[string]any{"action": "extract_text"}
		case 4:
			return map[string]any{"action": "wait_for_selector", "selector": sels(), "state": pick("visible", "hidden", "attached", "detached"), "timeout_ms": 200}
		case 5:
			return map[string]any{"action": "fill", "selector": sels(), "text": "x", "timeout_ms": 200}
		case 6:
			if rng.IntN(3) == 0 {
				return map[string]any{"action": "press", "key": pick("Enter", "Tab", "a")}
			}
			return map[string]any{"action": "press", "key": pick("Enter", "Tab", "a"), "selector": sels(), "timeout_ms": 200}
		}
		return map[string]any{"action": "select", "selector": sels(), "value": "b", "timeout_ms": 200}
	}
	op := func() map[string]any {
		switch rng.IntN(16) {
		case 0, 1:
			return map[string]any{"kind": "navigate", "url": urls()}
		case 2:
			return map[string]any{"kind": "snapshot", "interactive_only": rng.IntN(2) == 0}
		case 3:
			return map[string]any{"kind": pick("click", "dblclick", "hover", "check", "uncheck"), "ref": refs()}
		case 4:
			return map[string]any{"kind": "fill", "ref": refs(), "text": "hello"}
		case 5:
			return map[string]any{"kind": "press", "key": "Enter", "ref": refs()}
		case 6:
			return map[string]any{"kind": "select", "ref": refs(), "value": "b"}
		case 7:
			return map[string]any{"kind": "wait_for", "selector": sels(), "timeout_ms": 200}
		case 8:
			return map[string]any{"kind": "wait_for", "role": pick("button", "heading", "nothing"), "timeout_ms": 200}
		case 9:
			return map[string]any{"kind": "read", "mode": pick("main_content", "article", "raw")}
		case 10:
			return map[string]any{"kind": pick("get_state", "back", "forward", "console", "network_log")}
		case 11:
			return map[string]any{"kind": "new_tab"}
		case 12:
			return map[string]any{"kind": "close_tab"}
		case 13:
			return map[string]any{"kind": "screenshot"}
		case 14:
			return map[string]any{"kind": pick("click", "evaluate", "navigate"), "url": 7}
		}
		return map[string]any{"kind": "upload", "ref": refs(), "path": "../x"}
	}

	for seq := shard; seq < propSequences; seq += propShards {
		r := f.do("POST", "/api/browser/sessions", acmeToken, map[string]any{"policy": map[string]any{"allowed_origins": []string{pageURL}}})
		if r.StatusCode != http.StatusCreated {
			t.Fatalf("seq %d: open: %s", seq, r)
		}
		var info engine.BrowserSessionInfo
		r.decode(t, &info)
		base := "/api/browser/sessions/" + info.ID
		open := true
		for i := range propSteps {
			var method, path, what string
			var body any
			switch n := rng.IntN(20); {
			case n < 9:
				method, path, body = "POST", base+"/ops", op()
			case n < 17:
				var steps []map[string]any
				for range 1 + rng.IntN(3) {
					steps = append(steps, step())
				}
				method, path, body = "POST", base+"/interact", map[string]any{"actions": steps, "stop_on_error": rng.IntN(2) == 0}
			case n == 17:
				method, path, body = "POST", base+"/ops", pick(`{"kind":`, `[]`, `{"kind":"click","ref":"@e1"} x`, `null`)
			case n == 18:
				what = "kill"
			default:
				method, path = "DELETE", base
			}
			desc := fmt.Sprintf("seq %d step %d", seq, i)
			if what == "kill" {
				if killChromium(t, info.FilesDir) > 0 {
					st.kills++
				}
				desc += " (after killing Chromium)"
				method, path, body = "POST", base+"/ops", op()
			}
			js, _ := json.Marshal(body)
			desc += fmt.Sprintf(": %s %s %s", method, path, cutStr(string(js), 300))
			r := f.do(method, path, acmeToken, body)
			st.requests++
			if method == "DELETE" && r.StatusCode == http.StatusNoContent {
				open = false
			} else if c := checkTyped(t, desc, r); c != "" {
				st.errorsSeen++
				st.codes[c]++
			}
			if h := f.do("GET", "/healthz", "", nil); h.StatusCode != http.StatusOK {
				t.Fatalf("%s: /healthz answers %s", desc, h)
			}
		}
		if open {
			if r := f.do("DELETE", base, acmeToken, nil); r.StatusCode != http.StatusNoContent {
				t.Fatalf("seq %d: close: %s", seq, r)
			}
		}
	}
	return st
}

// checkTyped fails the test unless r is a typed reply: a JSON object that
// is either a result (2xx) or {"error":{code,reason,message}} with a code
// of the vocabulary. For an interact result, every failed step must carry
// such an error. It returns the error's code ("" for a result).
func checkTyped(t *testing.T, desc string, r result) airlock.Code {
	t.Helper()
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s: Content-Type %q: %s", desc, ct, r)
	}
	if r.StatusCode >= 200 && r.StatusCode < 300 {
		var res struct {
			Results *[]struct {
				OK    bool           `json:"ok"`
				Error *airlock.Error `json:"error"`
			} `json:"results"`
		}
		if err := json.Unmarshal(r.body, &res); err != nil {
			t.Fatalf("%s: result is not a JSON object: %s", desc, r)
		}
		if res.Results != nil {
			for j, a := range *res.Results {
				if !a.OK && (a.Error == nil || !a.Error.Code.Valid() || a.Error.Reason == "" || a.Error.Message == "") {
					t.Fatalf("%s: step %d failed without a typed error: %s", desc, j, r)
				}
				if a.Error != nil && a.Error.Code == airlock.CodeInternal && a.Error.Reason == "browser_panic" {
					t.Fatalf("%s: step %d panicked: %s", desc, j, r)
				}
			}
		}
		return ""
	}
	var eb airlock.ErrorBody
	if err := json.Unmarshal(r.body, &eb); err != nil || !eb.Error.Code.Valid() || eb.Error.Reason == "" || eb.Error.Message == "" {
		t.Fatalf("%s: untyped error reply: %s", desc, r)
	}
	if eb.Error.Code == airlock.CodeInternal {
		t.Logf("%s: %s", desc, r)
	}
	if eb.Error.Reason == "browser_panic" {
		t.Fatalf("%s: the op panicked: %s", desc, r)
	}
	return eb.Error.Code
}

// killChromium kills, as a crash would, the Chromium processes of the
// session whose files directory is filesDir (its profile is beside it),
// and returns how many there were (none when an earlier kill left the
// session crashed, or it is closed).
func killChromium(t *testing.T, filesDir string) int {
	t.Helper()
	if filesDir == "" {
		t.Fatal("the session reports no files directory")
	}
	arg := "--user-data-dir=" + filepath.Join(filepath.Dir(filesDir), "profile")
	procs := child.Find(func(cmdline string) bool { return child.HasArg(cmdline, arg) })
	for _, p := range procs {
		p.Kill()
	}
	return len(procs)
}

func cutStr(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return strings.TrimSpace(s)
}
