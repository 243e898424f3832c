package extract

import (
	"strings"
	"testing"
)

func TestNormalizeDate(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"2024-03-05", "2024-03-05"},
		{"2024-03-05T10:04:00Z", "2024-03-05T10:04:00Z"},
		{"2024-03-05T10:04:00.123+01:00", "2024-03-05T10:04:00+01:00"},
		{"2021-11-01T10:52:50+0100", "2021-11-01T10:52:50+01:00"},
		{"2017-11-03 03:01:00.000000", "2017-11-03T03:01:00"},
		{"2018-04-05T06:00", "2018-04-05T06:00:00"},
		{"2024-03-05T10:04:00-00:00", "2024-03-05T10:04:00Z"},
		{"2024/03/05", "2024-03-05"},
		{"20240305", "2024-03-05"},
		{"Tue, 05 Mar 2024 10:04:00 GMT", "2024-03-05T10:04:00Z"},
		{"Tue, 05 Mar 2024 10:04:00 +0200", "2024-03-05T10:04:00+02:00"},
		{"05 Mar 24 10:04 -0500", "2024-03-05T10:04:00-05:00"},
		{"March 5, 2024", "2024-03-05"},
		{"Mar. 5th, 2024", "2024-03-05"},
		{"5 March 2024", "2024-03-05"},
		{"Tuesday, 5 March 2024", "2024-03-05"},
		{"Posted on March 5, 2024", "2024-03-05"},
		{"5. März 2024", "2024-03-05"},
		{"5 de marzo de 2024", "2024-03-05"},
		{"1er février 2024", "2024-02-01"},
		{"05.03.2024", "2024-03-05"},
		{"3/5/2024", "2024-03-05"},
		{"25/12/2024", "2024-12-25"},
		{"1709633040", "2024-03-05T10:04:00Z"},
		{"", ""},
		{"yesterday", ""},
		{"2024", ""},
		{"2024-02-30", ""},
		{"2024-13-01", ""},
		{"March 2024", ""},
		{"12345678901234567890", ""},
		{"by John Smith", ""},
	}
	for _, tt := range tests {
		if got := normalizeDate(tt.in); got != tt.want {
			t.Errorf("normalizeDate(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestFindDate(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"By Jane Doe | Published March 5, 2024 at 10:00", "2024-03-05"},
		{"Posted on 5 March 2024 by admin", "2024-03-05"},
		{"Updated: Tuesday, Mar 5 2024", "2024-03-05"},
		{"Zuletzt aktualisiert am 5. März 2024", "2024-03-05"},
		{"published 2024-03-05T10:00:00Z in News", "2024-03-05T10:00:00Z"},
		{"42 comments, 2024 readers", ""},
		{"The march of time in 1,024 words", ""},
		{"May I say 5 things about 2024?", ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got := findDate(tt.in); got != tt.want {
			t.Errorf("findDate(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func FuzzNormalizeDate(f *testing.F) {
	for _, s := range []string{"2024-03-05T10:04:00Z", "March 5, 2024", "5. März 2024", "Tue, 05 Mar 2024 10:04:00 GMT", "3/5/2024"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d := normalizeDate(s)
		if d != "" && len(d) < 10 {
			t.Fatalf("normalizeDate(%q) = %q", s, d)
		}
		if got, want := findDate(s), scanDate(clip(s, maxDateInput)); got != want {
			t.Fatalf("findDate(%q) = %q, but the full scan finds %q", s, got, want)
		}
	})
}

// The year pre-check of findDate only skips text the full scan finds no
// date in.
func TestFindDateYearPrecheck(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		"March 5, 2024", "5 mars 2024", "2024/03/05", "05.03.2024", "3/5/2024", "20240305",
		"March 5, 202", "Mar 5 24", "5 March 12024", "1/2/3", "March 2024 5", "no digits at all, lorem ipsum",
		"date 2024-3-5", "année ２０２４ mars 5", "Lorem ipsum dolor sit amet, consectetur adipiscing elit.",
	} {
		if got, want := findDate(s), scanDate(s); got != want {
			t.Errorf("findDate(%q) = %q, but the full scan finds %q", s, got, want)
		}
		if !hasDigitRun(s, 4) && findDate(s) != "" {
			t.Errorf("findDate(%q) found a date without a four-digit year", s)
		}
	}
}

// monthOf's first-letter check passes every month name, in any case.
func TestMonthInitials(t *testing.T) {
	t.Parallel()
	for m, names := range monthNames {
		for _, name := range strings.Fields(names) {
			for _, w := range []string{name, strings.ToUpper(name), strings.ToUpper(name[:1]) + name[1:]} {
				if len(w) < 3 {
					continue
				}
				if got := monthOf(w); got != m+1 {
					t.Errorf("monthOf(%q) = %d, want %d", w, got, m+1)
				}
			}
		}
	}
	for _, w := range []string{"page", "Page", "lorem", "K\u212aelvin", "ümlaut", "xyz"} {
		if got := monthOf(w); got != 0 {
			t.Errorf("monthOf(%q) = %d, want 0", w, got)
		}
	}
}
