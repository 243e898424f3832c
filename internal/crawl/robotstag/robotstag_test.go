package robotstag

import "testing"

func TestDirectives(t *testing.T) {
	tests := []struct {
		list              string
		noindex, nofollow bool
	}{
		{"", false, false},
		{"noindex, follow", true, false},
		{"NOFOLLOW", false, true},
		{" None ", true, true},
		{"noarchive, nosnippet", false, false},
		{"noindex,nofollow", true, true},
	}
	for _, tt := range tests {
		ni, nf := Directives(tt.list)
		if ni != tt.noindex || nf != tt.nofollow {
			t.Errorf("Directives(%q) = %v, %v; want %v, %v", tt.list, ni, nf, tt.noindex, tt.nofollow)
		}
	}
}

func TestHeader(t *testing.T) {
	tests := []struct {
		values            []string
		noindex, nofollow bool
	}{
		{nil, false, false},
		{[]string{"noindex"}, true, false},
		{[]string{"noarchive", "nofollow"}, false, true},
		{[]string{"googlebot: noindex, nofollow"}, false, false},
		{[]string{"Airlock: none"}, true, true},
		{[]string{"airlock : noindex"}, true, false},
		{[]string{"otherbot: noindex, airlock: nofollow"}, false, true},
		{[]string{"airlock: noindex, otherbot: nofollow"}, true, false},
		{[]string{"googlebot: noindex", "nofollow"}, false, true}, // an agent addresses only its own value
		{[]string{"max-snippet: 20, noindex"}, true, false},
		{[]string{"noindex, unavailable_after: 25 Jun 2010 15:00:00 PST"}, true, false},
		{[]string{"unavailable_after: Friday, 25 Jun 2010 15:00:00 PST, nofollow"}, false, true},
		{[]string{"googlebot: indexifembedded, noindex"}, false, false},
		{[]string{": noindex"}, false, false}, // no agent, and ": noindex" is no directive
	}
	for _, tt := range tests {
		ni, nf := Header(tt.values)
		if ni != tt.noindex || nf != tt.nofollow {
			t.Errorf("Header(%q) = %v, %v; want %v, %v", tt.values, ni, nf, tt.noindex, tt.nofollow)
		}
	}
}
