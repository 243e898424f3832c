package extract

import (
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Dates: a small parser of the forms pages write dates in, with no
// tables built at init (the month names are constant strings scanned on
// use). normalizeDate reads a whole value (a meta tag, a datetime
// attribute, JSON-LD); findDate finds the first date in a line of text
// ("Posted on March 5, 2024 by ..."). Both return ISO 8601: a date
// (2024-03-05) or a date and time (2024-03-05T10:04:00Z, with the offset
// the page gave, or none when it gave none).

// maxDateInput bounds the text the parsers read.
const maxDateInput = 512

// normalizeDate parses s, a date as a page states it, and returns it in
// ISO 8601, or "" when s holds no date it can read.
func normalizeDate(s string) string {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > maxDateInput {
		return ""
	}
	if d, ok := isoDate(s); ok {
		return d
	}
	if d, ok := rfcDate(s); ok {
		return d
	}
	if d, ok := unixDate(s); ok {
		return d
	}
	d, _ := textDate(s, true)
	return d
}

// findDate returns the first date written in text, in ISO 8601, or "".
// Numbers alone (a year, a count) are not dates: it needs a year with a
// month, named or numeric.
func findDate(text string) string {
	if len(text) > maxDateInput {
		text = clip(text, maxDateInput)
	}
	// Every form findDate reads has a four-digit year: most text has
	// none, and the scan below tries each word against the month names.
	if !hasDigitRun(text, 4) {
		return ""
	}
	return scanDate(text)
}

// hasDigitRun reports whether s holds n ASCII digits in a row.
func hasDigitRun(s string, n int) bool {
	run := 0
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			if run++; run >= n {
				return true
			}
		} else {
			run = 0
		}
	}
	return false
}

// scanDate is findDate without the year pre-check.
func scanDate(text string) string {
	d, _ := scanDateAt(text)
	return d
}

// dateIndex is the byte offset of the first date written in text, or -1.
func dateIndex(text string) int {
	if len(text) > maxDateInput {
		text = clip(text, maxDateInput)
	}
	if !hasDigitRun(text, 4) {
		return -1
	}
	_, i := scanDateAt(text)
	return i
}

// scanDateAt returns the first date in text, in ISO 8601, and the byte
// offset it starts at; "" and -1 when there is none.
func scanDateAt(text string) (string, int) {
	for i := 0; i < len(text); {
		// Try each position that starts a digit run or a word.
		if d, ok := isoDate(text[i:]); ok {
			return d, i
		}
		if d, n := textDate(text[i:], false); n > 0 {
			return d, i
		}
		// Skip to the next token start.
		r, size := utf8.DecodeRuneInString(text[i:])
		i += size
		if isDateWordRune(r) || isDigit(r) {
			for i < len(text) {
				r2, s2 := utf8.DecodeRuneInString(text[i:])
				if !(isDateWordRune(r2) || isDigit(r2)) || isDigit(r) != isDigit(r2) {
					break
				}
				i += s2
			}
		}
	}
	return "", -1
}

func isDigit(r rune) bool { return '0' <= r && r <= '9' }

func isDateWordRune(r rune) bool { return unicode.IsLetter(r) }

// isoDate reads an ISO 8601 / RFC 3339 date at the start of s:
// YYYY-MM-DD (or / or . between), optionally followed by T or a space and
// HH:MM[:SS[.frac]] and an offset (Z, ±HH:MM, ±HHMM, ±HH). Anything may
// follow a date alone; a time must end the value or be followed by a
// space.
func isoDate(s string) (string, bool) {
	y, n := readDigits(s, 4, 4)
	if n == 0 || len(s) < 8 {
		return "", false
	}
	sep := s[4]
	if sep != '-' && sep != '/' && sep != '.' {
		if sep < '0' || sep > '9' {
			return "", false
		}
		// YYYYMMDD, only as a whole value.
		if len(s) != 8 {
			return "", false
		}
		m, _ := readDigits(s[4:], 2, 2)
		d, _ := readDigits(s[6:], 2, 2)
		return ymd(y, m, d)
	}
	m, mn := readDigits(s[5:], 1, 2)
	if mn == 0 || len(s) < 5+mn+2 || s[5+mn] != sep {
		return "", false
	}
	d, dn := readDigits(s[6+mn:], 1, 2)
	if dn == 0 {
		return "", false
	}
	date, ok := ymd(y, m, d)
	if !ok {
		return "", false
	}
	rest := s[6+mn+dn:]
	if len(rest) > 0 && isDigit(rune(rest[0])) {
		return "", false
	}
	if len(rest) < 6 || (rest[0] != 'T' && rest[0] != ' ' && rest[0] != 't') {
		return date, true
	}
	clock, ok := isoClock(rest[1:])
	if !ok {
		return date, true
	}
	return date + "T" + clock, true
}

// isoClock reads HH:MM[:SS[.frac]][offset] and returns HH:MM:SS plus the
// offset (Z or ±HH:MM) when there is one.
func isoClock(s string) (string, bool) {
	h, hn := readDigits(s, 2, 2)
	if hn == 0 || len(s) < 5 || s[2] != ':' {
		return "", false
	}
	mi, mn := readDigits(s[3:], 2, 2)
	if mn == 0 || h > 23 || mi > 59 {
		return "", false
	}
	sec, i := 0, 5
	if i < len(s) && s[i] == ':' {
		v, n := readDigits(s[i+1:], 2, 2)
		if n == 0 || v > 60 {
			return "", false
		}
		sec, i = v, i+3
		if i < len(s) && (s[i] == '.' || s[i] == ',') {
			j := i + 1
			for j < len(s) && isDigit(rune(s[j])) {
				j++
			}
			i = j
		}
	}
	clock := pad2(h) + ":" + pad2(mi) + ":" + pad2(min(sec, 59))
	rest := strings.TrimLeft(s[i:], " ")
	switch {
	case rest == "":
		return clock, true
	case rest[0] == 'Z' || rest[0] == 'z':
		return clock + "Z", true
	case rest[0] == '+' || rest[0] == '-':
		oh, on := readDigits(rest[1:], 2, 2)
		if on == 0 || oh > 14 {
			return clock, true
		}
		om := 0
		r := rest[3:]
		r = strings.TrimPrefix(r, ":")
		if v, n := readDigits(r, 2, 2); n > 0 && v < 60 {
			om = v
		}
		if oh == 0 && om == 0 {
			return clock + "Z", true
		}
		return clock + rest[:1] + pad2(oh) + ":" + pad2(om), true
	case strings.HasPrefix(strings.ToUpper(rest), "UTC") || strings.HasPrefix(strings.ToUpper(rest), "GMT"):
		return clock + "Z", true
	}
	return clock, true
}

// rfcLayouts are the RFC 1123, 822 and 850 and ANSI C forms, with and
// without the weekday.
var rfcLayouts = [...]string{
	time.RFC1123Z, time.RFC1123, time.RFC822Z, time.RFC822, time.RFC850, time.ANSIC,
	"2 Jan 2006 15:04:05 -0700", "2 Jan 2006 15:04:05 MST", "Mon, 2 Jan 2006 15:04:05 -0700",
	"Mon, 2 Jan 2006 15:04:05 MST", "Mon Jan 2 15:04:05 MST 2006", "Mon Jan 02 2006 15:04:05 GMT-0700",
}

func rfcDate(s string) (string, bool) {
	if len(s) < 15 || !strings.ContainsRune(s, ':') {
		return "", false
	}
	if i := strings.Index(s, " ("); i > 0 { // "... GMT+0100 (Central European Time)"
		s = s[:i]
	}
	for _, l := range rfcLayouts {
		t, err := time.Parse(l, s)
		if err != nil {
			continue
		}
		if t.Year() < minYear || t.Year() > maxYear {
			return "", false
		}
		name, off := t.Zone()
		switch {
		case name == "UTC" || name == "GMT" || name == "" && off == 0 && strings.Contains(l, "-0700"):
			return t.UTC().Format("2006-01-02T15:04:05Z"), true
		case off != 0 || strings.Contains(l, "-0700"):
			return t.Format("2006-01-02T15:04:05-07:00"), true
		}
		// A zone name other than UTC whose offset Go cannot know: the
		// local time as written.
		return t.Format("2006-01-02T15:04:05"), true
	}
	return "", false
}

// unixDate reads seconds (10 digits) or milliseconds (13) since the epoch.
func unixDate(s string) (string, bool) {
	if (len(s) != 10 && len(s) != 13) || strings.TrimLeft(s, "0123456789") != "" {
		return "", false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return "", false
	}
	if len(s) == 13 {
		v /= 1000
	}
	t := time.Unix(v, 0).UTC()
	if t.Year() < minYear || t.Year() > maxYear {
		return "", false
	}
	return t.Format("2006-01-02T15:04:05Z"), true
}

// Years a page date may have.
const (
	minYear = 1900
	maxYear = 2100
)

// dateToken is one token of a text date.
type dateToken struct {
	num   int  // the value of a digit run
	width int  // digits in the run; 0 for a word
	month int  // 1-12 when the word names a month
	sep   byte // the punctuation before the next token: '/', '.', '-', ',' or ' '
	end   int  // byte offset just past the token
}

// textDate reads a date written in words or numbers at the start of s:
// "March 5, 2024", "Mar. 5th 2024", "5 March 2024", "5. März 2024",
// "5 de marzo de 2024", "2024/03/05", "05.03.2024", "3/5/2024" (month
// first when the first number can be a month: the form of the pages that
// write slashes). With whole true, s must hold the date and little else
// ("Posted on", a weekday and a time may surround it). It returns the date
// and the bytes read, 0 when there is none.
func textDate(s string, whole bool) (string, int) {
	var toks [3]dateToken
	n := 0
	i := 0
	for n < len(toks) && i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case isDigit(r):
			j := i
			v := 0
			for j < len(s) && isDigit(rune(s[j])) && j-i < 5 {
				v = v*10 + int(s[j]-'0')
				j++
			}
			if j < len(s) && isDigit(rune(s[j])) {
				return "", 0
			}
			width := j - i
			// ordinal suffixes: 1st 2nd 3rd 4th, 1er
			for _, suf := range [...]string{"st", "nd", "rd", "th", "er", "º", "°"} {
				if len(s) >= j+len(suf) && strings.EqualFold(s[j:j+len(suf)], suf) &&
					(j+len(suf) == len(s) || !unicode.IsLetter(rune(s[j+len(suf)]))) {
					j += len(suf)
					break
				}
			}
			toks[n] = dateToken{num: v, width: width, end: j}
			i = j
		case unicode.IsLetter(r):
			j := i
			for j < len(s) {
				r2, s2 := utf8.DecodeRuneInString(s[j:])
				if !unicode.IsLetter(r2) {
					break
				}
				j += s2
			}
			w := s[i:j]
			m := monthOf(w)
			if m == 0 {
				switch {
				case n > 0 && isFiller(w): // 5 de marzo de 2024
				case n > 0:
					goto done
				case !whole || !isFiller(w) && !isWeekday(w):
					return "", 0
				}
				i = j
				continue
			}
			toks[n] = dateToken{month: m, end: j}
			i = j
			if i < len(s) && s[i] == '.' { // "Mar."
				i++
			}
		default:
			if n == 0 {
				if !whole {
					return "", 0
				}
				i += size
				continue
			}
			// punctuation and spaces between tokens
			j := i
			sep := byte(' ')
			for j < len(s) {
				c := s[j]
				if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
					j++
					continue
				}
				if c == 0xc2 && j+1 < len(s) && s[j+1] == 0xa0 { // no-break space
					j += 2
					continue
				}
				if c == '/' || c == '.' || c == '-' || c == ',' {
					if sep == ' ' {
						sep = c
					}
					j++
					continue
				}
				break
			}
			if j == i {
				goto done
			}
			toks[n-1].sep = sep
			i = j
			continue
		}
		n++
	}
done:
	return datePattern(toks[:n])
}

// datePattern matches the tokens of a text date against the forms
// textDate reads and returns the date with the bytes it used.
func datePattern(t []dateToken) (string, int) {
	num := func(k, minW, maxW int) bool { return k < len(t) && t[k].width >= minW && t[k].width <= maxW }
	month := func(k int) bool { return k < len(t) && t[k].month != 0 }
	switch {
	case month(0) && num(1, 1, 2) && num(2, 4, 4): // March 5, 2024
		if d, ok := ymd(t[2].num, t[0].month, t[1].num); ok {
			return d, t[2].end
		}
	case num(0, 1, 2) && month(1) && num(2, 4, 4): // 5 March 2024
		if d, ok := ymd(t[2].num, t[1].month, t[0].num); ok {
			return d, t[2].end
		}
	case num(0, 4, 4) && month(1) && num(2, 1, 2): // 2024 March 5
		if d, ok := ymd(t[0].num, t[1].month, t[2].num); ok {
			return d, t[2].end
		}
	case num(0, 4, 4) && num(1, 1, 2) && num(2, 1, 2) && t[0].sep != ' ' && t[0].sep == t[1].sep && t[0].sep != ',': // 2024/03/05
		if d, ok := ymd(t[0].num, t[1].num, t[2].num); ok {
			return d, t[2].end
		}
	case num(0, 1, 2) && num(1, 1, 2) && num(2, 4, 4) && t[0].sep != ' ' && t[0].sep == t[1].sep && t[0].sep != ',':
		a, b := t[0].num, t[1].num
		if t[0].sep == '/' && a <= 12 { // 3/5/2024: month first
			a, b = b, a
		}
		if d, ok := ymd(t[2].num, b, a); ok { // 05.03.2024, 05-03-2024: day first
			return d, t[2].end
		}
	}
	return "", 0
}

func ymd(y, m, d int) (string, bool) {
	if y < minYear || y > maxYear || m < 1 || m > 12 || d < 1 || d > daysIn(y, m) {
		return "", false
	}
	return strconv.Itoa(y) + "-" + pad2(m) + "-" + pad2(d), true
}

func daysIn(y, m int) int {
	return time.Date(y, time.Month(m)+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

func pad2(v int) string {
	if v < 10 {
		return "0" + strconv.Itoa(v)
	}
	return strconv.Itoa(v)
}

// readDigits reads between minN and maxN ASCII digits at the start of s and
// returns their value and count (0 when there are fewer than minN).
func readDigits(s string, minN, maxN int) (int, int) {
	v, i := 0, 0
	for i < len(s) && i < maxN && isDigit(rune(s[i])) {
		v = v*10 + int(s[i]-'0')
		i++
	}
	if i < minN {
		return 0, 0
	}
	return v, i
}

// monthNames lists month names and their usual abbreviations, lower case,
// in English, German, French, Spanish, Italian, Portuguese and Dutch: a
// constant string per month, read by monthOf with no table built.
var monthNames = [12]string{
	"january jan januar janv janvier enero ene gennaio genn gen janeiro januari jänner",
	"february feb febr februar février fevrier févr fev fév febrero febbraio fevereiro februari",
	"march mar märz maerz mär mrz mars marzo março marco maart mrt",
	"april apr avril avr abril abr aprile",
	"may mai mayo maggio mag maio mei",
	"june jun juni juin junio giugno giu junho",
	"july jul juli juillet juil julio luglio lug julho",
	"august aug août aout agosto ago augustus",
	"september sep sept septembre septiembre settembre set setembro",
	"october oct oktober okt octobre octubre ottobre ott outubro out",
	"november nov novembre noviembre novembro",
	"december dec dezember dez décembre decembre déc diciembre dic dicembre dezembro",
}

// monthInitials holds the first letter of every name in monthNames.
const monthInitials = "adefgjlmnos"

// monthOf is the month (1-12) word names, or 0.
func monthOf(word string) int {
	if len(word) < 3 || len(word) > 12 {
		return 0
	}
	// Most words are no month: rule them out by their first letter
	// before the names are scanned.
	if r, _ := utf8.DecodeRuneInString(word); !strings.ContainsRune(monthInitials, unicode.ToLower(r)) {
		return 0
	}
	var buf [16]byte
	lw := buf[:0]
	for _, r := range word {
		lw = utf8.AppendRune(lw, unicode.ToLower(r))
	}
	w := string(lw)
	for m, names := range monthNames {
		for names != "" {
			name := names
			if k := strings.IndexByte(names, ' '); k >= 0 {
				name, names = names[:k], names[k+1:]
			} else {
				names = ""
			}
			if name == w {
				return m + 1
			}
		}
	}
	return 0
}

// isFiller reports the words a date line puts around or inside a date:
// "de" (5 de marzo de 2024), "of", "the", and what comes before it.
func isFiller(w string) bool {
	switch strings.ToLower(w) {
	case "de", "of", "the", "del", "le", "el", "am", "den", "on", "posted", "published", "updated", "date",
		"at", "publié", "publicado", "veröffentlicht", "pubblicato", "gepubliceerd", "em":
		return true
	}
	return false
}

func isWeekday(w string) bool {
	if len(w) < 3 {
		return false
	}
	lw := strings.ToLower(w)
	for _, d := range [...]string{"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"} {
		if strings.HasPrefix(d, lw) {
			return true
		}
	}
	return false
}
