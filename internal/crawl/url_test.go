package crawl

import (
	"errors"
	"net/url"
	"testing"
)

func TestNormalize(t *testing.T) {
	tests := []struct {
		in, want string
		err      error
	}{
		{in: "http://example.com", want: "http://example.com/"},
		{in: "HTTP://Example.COM/Path", want: "http://example.com/Path"},
		{in: "http://example.com.:80/a", want: "http://example.com/a"},
		{in: "https://example.com:443/", want: "https://example.com/"},
		{in: "https://example.com:80/", want: "https://example.com:80/"},
		{in: "http://example.com:8080/", want: "http://example.com:8080/"},
		{in: "http://example.com:/", want: "http://example.com/"},
		{in: "http://example.com/a#frag", want: "http://example.com/a"},
		{in: "http://example.com/a?", want: "http://example.com/a"},
		{in: "http://example.com/%7ejoe", want: "http://example.com/~joe"},
		{in: "http://example.com/%7Ejoe", want: "http://example.com/~joe"},
		{in: "http://example.com/a%2fb", want: "http://example.com/a%2Fb"},
		{in: "http://example.com/%41%42%2d", want: "http://example.com/AB-"},
		{in: "http://example.com/caf%c3%a9", want: "http://example.com/caf%C3%A9"},
		{in: "http://example.com/café", want: "http://example.com/caf%C3%A9"},
		{in: "http://example.com/a b", want: "http://example.com/a%20b"},
		{in: "http://example.com/?q=a b&r=<x>", want: "http://example.com/?q=a%20b&r=%3Cx%3E"},
		{in: "http://example.com/?q=%7e&r=%2f", want: "http://example.com/?q=~&r=%2F"},
		{in: "http://example.com/?b=2&a=1", want: "http://example.com/?b=2&a=1"},
		{in: "http://example.com/?utm_source=x", want: "http://example.com/?utm_source=x"},
		{in: "http://example.com/a/./b/../c", want: "http://example.com/a/c"},
		{in: "http://example.com/a/%2E%2E/c", want: "http://example.com/c"},
		{in: "http://example.com/a/..", want: "http://example.com/"},
		{in: "http://example.com/../../a", want: "http://example.com/a"},
		{in: "http://example.com/a//b/", want: "http://example.com/a//b/"},
		{in: "http://[::1]:80/", want: "http://[::1]/"},
		{in: "http://[2001:DB8::1]:8080/x", want: "http://[2001:db8::1]:8080/x"},
		{in: "http://user@example.com/", want: "http://user@example.com/"},
		{in: "ftp://example.com/", err: ErrScheme},
		{in: "mailto:me@example.com", err: ErrScheme},
		{in: "/relative", err: ErrScheme},
		{in: "http:opaque", err: ErrNoHost},
		{in: "http:///path", err: ErrNoHost},
	}
	for _, tt := range tests {
		got, err := Normalize(tt.in)
		if tt.err != nil {
			if !errors.Is(err, tt.err) {
				t.Errorf("Normalize(%q) = %q, %v; want error %v", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Normalize(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			continue
		}
		// Idempotent, and still the same URL for net/url.
		if again, err := Normalize(got); err != nil || again != got {
			t.Errorf("Normalize(%q) = %q, %v; not idempotent", got, again, err)
		}
		if _, err := url.Parse(got); err != nil {
			t.Errorf("url.Parse(%q): %v", got, err)
		}
	}
}

func TestPreEscape(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"/a", "/a"},
		{"  /a b\t ", "/a%20b"},
		{"/a\n/b", "/a/b"},
		{"/über/%2F1", "/%C3%BCber/%2F1"},
		{"http://a.test/ü?q=é#ë", "http://a.test/%C3%BC?q=%C3%A9#%C3%AB"},
		{"//a.test/ü", "//a.test/%C3%BC"},
		{"http://bücher.test/ü", "http://bücher.test/%C3%BC"},
		{"http://bücher.test", "http://bücher.test"},
		{"ü/x://y", "%C3%BC/x://y"},
	} {
		if got := preEscape(tt.in); got != tt.want {
			t.Errorf("preEscape(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	// The reason for it: a path with both is fetched as written.
	if got, _ := Normalize("http://a.test/über/%2F1"); got != "http://a.test/%C3%BCber/%2F1" {
		t.Errorf("Normalize kept %q", got)
	}
}

func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"http://a.test/x/../y?q=%7e#f", "HTTPS://A.TEST:443/%2f", "http://[::1]/a b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := Normalize(s)
		if err != nil {
			return
		}
		again, err := Normalize(got)
		if err != nil || again != got {
			t.Fatalf("Normalize(%q) = %q; Normalize of that = %q, %v", s, got, again, err)
		}
	})
}

func TestScopeContains(t *testing.T) {
	tests := []struct {
		seed       string
		subdomains bool
		host       string
		want       bool
	}{
		{"example.com", false, "example.com", true},
		{"example.com", false, "www.example.com", false},
		{"example.com", true, "www.example.com", true},
		{"example.com", true, "a.b.example.com", true},
		{"example.com", true, "badexample.com", false},
		{"www.example.com", true, "example.com", true},
		{"www.example.com", true, "blog.example.com", true},
		{"www.example.com", false, "example.com", false},
		{"docs.example.com", true, "example.com", false},
		{"127.0.0.1", true, "0.0.1", false},
		{"127.0.0.1", true, "127.0.0.1", true},
	}
	for _, tt := range tests {
		if got := newScope(tt.seed, tt.subdomains).contains(tt.host); got != tt.want {
			t.Errorf("scope(%q, subdomains %v).contains(%q) = %v, want %v", tt.seed, tt.subdomains, tt.host, got, tt.want)
		}
	}
}
