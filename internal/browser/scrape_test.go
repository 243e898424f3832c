package browser

import (
	"maps"
	"testing"

	"github.com/chromedp/cdproto/network"

	"github.com/airlockhq/airlock"
)

func TestMobileUA(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/131.0.0.0 Safari/537.36",
			"Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36"},
		{"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36",
			"Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36"},
	} {
		if got := mobileUA(c.in); got != c.want {
			t.Errorf("mobileUA(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestScrapeSteps(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		a      airlock.PageAction
		reason airlock.Reason // "" : accepted
		want   ScrapeStep
	}{
		{"wait ms", airlock.PageAction{Type: "wait", Milliseconds: 5}, "", ScrapeStep{Kind: StepWait, MS: 5}},
		{"wait selector", airlock.PageAction{Type: "wait", Selector: "#a"}, "", ScrapeStep{Kind: StepWait, Selector: "#a"}},
		{"wait neither", airlock.PageAction{Type: "wait"}, airlock.ReasonBrowserAction, ScrapeStep{}},
		{"wait both", airlock.PageAction{Type: "wait", Selector: "#a", Milliseconds: 1}, airlock.ReasonBrowserAction, ScrapeStep{}},
		{"wait with text", airlock.PageAction{Type: "wait", Milliseconds: 1, Text: "x"}, airlock.ReasonBrowserAction, ScrapeStep{}},
		{"click", airlock.PageAction{Type: "click", Selector: "b"}, "", ScrapeStep{Kind: StepClick, Selector: "b"}},
		{"click no selector", airlock.PageAction{Type: "click"}, airlock.ReasonBrowserAction, ScrapeStep{}},
		{"write", airlock.PageAction{Type: "write", Text: "hi"}, "", ScrapeStep{Kind: StepWrite, Text: "hi"}},
		{"write with selector", airlock.PageAction{Type: "write", Text: "hi", Selector: "x"}, airlock.ReasonBrowserAction, ScrapeStep{}},
		{"press", airlock.PageAction{Type: "press", Key: "Enter"}, "", ScrapeStep{Kind: StepPress, Key: "Enter"}},
		{"press unknown", airlock.PageAction{Type: "press", Key: "Hyper"}, airlock.ReasonBrowserAction, ScrapeStep{}},
		{"scroll", airlock.PageAction{Type: "scroll"}, "", ScrapeStep{Kind: StepScroll}},
		{"scroll up in", airlock.PageAction{Type: "scroll", Direction: "up", Selector: "#s"}, "", ScrapeStep{Kind: StepScroll, Up: true, Selector: "#s"}},
		{"scroll left", airlock.PageAction{Type: "scroll", Direction: "left"}, airlock.ReasonBrowserAction, ScrapeStep{}},
		{"screenshot", airlock.PageAction{Type: "screenshot", FullPage: true}, "", ScrapeStep{Kind: StepScreenshot, FullPage: true}},
		{"javascript", airlock.PageAction{Type: "executeJavascript", Text: "1"}, airlock.ReasonUnsupportedAction, ScrapeStep{}},
		{"no type", airlock.PageAction{Selector: "x"}, airlock.ReasonUnsupportedAction, ScrapeStep{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			steps, err := ScrapeSteps([]airlock.PageAction{c.a})
			if c.reason != "" {
				if airlock.CodeOf(err) != airlock.CodeInvalid || airlock.ReasonOf(err) != c.reason {
					t.Errorf("err = %v, want invalid %s", err, c.reason)
				}
				return
			}
			if err != nil || len(steps) != 1 || steps[0] != c.want {
				t.Errorf("got %+v, %v; want %+v", steps, err, c.want)
			}
		})
	}
}

func TestOriginHeaders(t *testing.T) {
	t.Parallel()
	oh, err := newOriginHeaders("HTTP://Example.com/a?b", map[string]string{"X-Test": "v", "accept-language": "fr"})
	if err != nil {
		t.Fatal(err)
	}
	have := network.Headers{"Accept-Language": "en", "Referer": "http://example.com/"}
	for _, c := range []struct {
		url  string
		want bool
	}{
		{"http://example.com:80/x", true},
		{"http://EXAMPLE.com/y#f", true},
		{"https://example.com/", false},
		{"http://example.com:8080/", false},
		{"http://sub.example.com/", false},
		{"http://example.com.evil/", false},
		{"data:text/html,x", false},
	} {
		got := oh.headersFor(c.url, have)
		if (got != nil) != c.want {
			t.Errorf("%s: %v, want headers %v", c.url, got, c.want)
			continue
		}
		if got == nil {
			continue
		}
		m := map[string]string{}
		for _, e := range got {
			m[e.Name] = e.Value
		}
		if want := map[string]string{"X-Test": "v", "accept-language": "fr", "Referer": "http://example.com/"}; !maps.Equal(m, want) {
			t.Errorf("%s: headers %v, want %v (the caller's replace the browser's of the same name)", c.url, m, want)
		}
	}
	if (*originHeaders)(nil).headersFor("http://example.com/", have) != nil {
		t.Error("no caller headers: want the request's own")
	}
}
