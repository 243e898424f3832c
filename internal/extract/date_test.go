package extract

import "testing"

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
		_ = findDate(s)
	})
}
