package crawl

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// siteNamePage is a page whose og:site_name lower-cases to a different
// byte length than its spelling in og:title ("Ⱥ" is 2 bytes, "ⱥ" 3).
func siteNamePage(site, title string) []byte {
	pad := strings.Repeat("<p>Lorem ipsum dolor sit amet, consectetur adipiscing elit.</p>\n", 45)
	return []byte(`<html><head><meta property="og:site_name" content="` + site + `"><meta property="og:title" content="` +
		title + `"></head><body>` + pad)
}

// TestDiscoverSiteNameCaseLength: cutting a site's name off a title whose
// letters change byte length when lower-cased neither panics nor cuts
// inside a character, and a match that differs only in case still cuts.
func TestDiscoverSiteNameCaseLength(t *testing.T) {
	for _, tc := range []struct{ site, title, want string }{
		{"ⱥⱥⱥⱥ", "ȺȺȺȺ | ab", "ȺȺȺȺ | ab"},
		{"ⱥⱥⱥⱥ", "ab | ȺȺȺȺ", "ab | ȺȺȺȺ"},
		{"ȺȺȺȺ", "ab cd | ⱥⱥⱥⱥ", "ab cd | ⱥⱥⱥⱥ"},
		{"ȺȺ", "ȺȺȺȺ ⱥⱥⱥⱥ | x", "ȺȺȺȺ ⱥⱥⱥⱥ | x"},
		{"ȺȺȺȺ", "ab cd | ȺȺȺȺ", "ab cd"},
		{"site", "ab cd | SITE", "ab cd"},
		{"Site", "sITE - ab cd", "ab cd"},
		{"Ⱥb", "one two | ȺB", "one two"},
	} {
		resp := htmlResponse("https://site.example/p", siteNamePage(tc.site, tc.title))
		ex, ok := discover(resp)
		if !ok {
			t.Fatalf("%q/%q: Discover declined the page", tc.site, tc.title)
		}
		if ex.Page.Title != tc.want {
			t.Errorf("site %q, title %q: Title %q, want %q", tc.site, tc.title, ex.Page.Title, tc.want)
		}
	}
}

// TestDiscoverMetaKeysCapped: one <meta> naming many keys adds no more
// than the meta cap, and no key longer than the key cap.
func TestDiscoverMetaKeysCapped(t *testing.T) {
	var keys strings.Builder
	for i := range 20000 {
		keys.WriteString(" k")
		keys.WriteString(strings.Repeat("x", i%7))
		keys.WriteString(string(rune('a' + i%26)))
		keys.WriteString(strings.Repeat("0", 0))
		keys.WriteString(itoa(i))
	}
	long := strings.Repeat("y", discoverMaxKey+1)
	body := `<html><head><meta property="` + long + ` short` + keys.String() + `" content="` + strings.Repeat("x", 4000) + `"></head><body>` +
		strings.Repeat("<p>Lorem ipsum dolor sit amet, consectetur adipiscing elit.</p>\n", 45)
	ex, ok := discover(htmlResponse("https://site.example/p", []byte(body)))
	if !ok {
		t.Fatal("Discover declined the page")
	}
	if n := len(ex.Page.Meta); n > discoverMaxMeta {
		t.Errorf("%d meta entries, want at most %d", n, discoverMaxMeta)
	}
	for k := range ex.Page.Meta {
		if len(k) > discoverMaxKey {
			t.Errorf("meta key of %d bytes, want at most %d", len(k), discoverMaxKey)
		}
	}
	if _, ok := ex.Page.Meta["short"]; !ok {
		t.Error("the short key after the over-long one is missing")
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

// discover is Discover without a context to end.
func discover(resp *airlock.HTTPResponse) (Extracted, bool) {
	ex, ok, err := Discover(context.Background(), resp)
	if err != nil {
		panic(fmt.Sprintf("Discover without a deadline: %v", err))
	}
	return ex, ok
}

// TestDiscoverStopsWithContext: Discover looks at its context while it
// reads, and answers its error on a page that takes long to read (250
// nested <b>, then 2.4 million <hr>).
func TestDiscoverStopsWithContext(t *testing.T) {
	body := []byte(strings.Repeat("<p>Lorem ipsum dolor sit amet, consectetur adipiscing elit.</p>\n", 45) +
		strings.Repeat("<b>", 250) + strings.Repeat("<hr>", 2_400_000))
	resp := htmlResponse("https://site.example/p", body)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan error, 1)
	go func() {
		_, ok, err := Discover(ctx, resp)
		if ok {
			err = errors.New("Discover read the page")
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Discover with a cancelled context: %v, want context.Canceled", err)
		}
		if c := airlock.CodeOf(err); c != airlock.CodeTimeout {
			t.Errorf("code %q, want %q", c, airlock.CodeTimeout)
		}
	case <-time.After(2 * time.Minute): // a hang guard only
		t.Fatal("Discover did not stop")
	}
	dctx, dcancel := context.WithDeadline(context.Background(), time.Unix(1, 0))
	defer dcancel()
	if _, _, err := Discover(dctx, resp); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Discover past its deadline: %v, want context.DeadlineExceeded", err)
	}
}
