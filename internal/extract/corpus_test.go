package extract

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"

	"github.com/airlockhq/airlock"
)

// The development corpus: Mozilla Readability's test pages, with the plain
// text of Readability.js's output as the truth (see its README).
const corpusBase = "http://fakehost/test/page.html"

// corpusDir is the corpus location: $AIRLOCK_EXTRACT_CORPUS, else the copy
// in testdata (Apache-2.0, see its README), so a fresh clone needs nothing
// beside it.
func corpusDir() string {
	if d := os.Getenv("AIRLOCK_EXTRACT_CORPUS"); d != "" {
		return d
	}
	return filepath.Join("testdata", "readability")
}

type corpusCase struct {
	name  string
	src   []byte
	truth string
	meta  map[string]any
}

var (
	corpusOnce  sync.Once
	corpusCases []corpusCase
	corpusErr   error
)

// loadCorpus reads the corpus once per test binary. A missing corpus fails
// the caller with directions, never skips.
func loadCorpus(tb testing.TB) []corpusCase {
	tb.Helper()
	corpusOnce.Do(func() {
		dir := corpusDir()
		b, err := os.ReadFile(filepath.Join(dir, "truth.json"))
		if err != nil {
			corpusErr = fmt.Errorf("extraction corpus not found (%v): restore internal/extract/testdata/readability or set AIRLOCK_EXTRACT_CORPUS to a copy of Mozilla Readability's test-pages with truth.json", err)
			return
		}
		var truth map[string]struct {
			ArticleBody string `json:"articleBody"`
		}
		if err := json.Unmarshal(b, &truth); err != nil {
			corpusErr = err
			return
		}
		for name, t := range truth {
			src, err := os.ReadFile(filepath.Join(dir, name, "source.html"))
			if err != nil {
				corpusErr = err
				return
			}
			c := corpusCase{name: name, src: src, truth: t.ArticleBody}
			if mb, err := os.ReadFile(filepath.Join(dir, name, "expected-metadata.json")); err == nil {
				_ = json.Unmarshal(mb, &c.meta)
			}
			corpusCases = append(corpusCases, c)
		}
		sort.Slice(corpusCases, func(i, j int) bool { return corpusCases[i].name < corpusCases[j].name })
	})
	if corpusErr != nil {
		tb.Fatal(corpusErr)
	}
	return corpusCases
}

// prf is the score of score_extract.py: word 4-gram shingle multisets
// compared per page; precision averaged over pages with a prediction,
// recall over pages with a truth; F1 of the two averages.
type prf struct{ p, r, f float64 }

func pagePR(truth, pred string) (p, r float64, hasP, hasR bool) {
	count := func(s string) map[uint64]int {
		m := map[uint64]int{}
		for _, h := range shingles(words(s)) {
			m[h]++
		}
		return m
	}
	t, q := count(truth), count(pred)
	var tp, fp, fn float64
	for k, a := range t {
		b := q[k]
		tp += float64(min(a, b))
		fn += float64(max(0, a-b))
	}
	for k, b := range q {
		fp += float64(max(0, b-t[k]))
	}
	if tp+fp+fn == 0 {
		return 0, 0, true, true
	}
	if fp == 0 && fn == 0 {
		return 1, 1, true, true
	}
	if tp+fp > 0 {
		p, hasP = tp/(tp+fp), true
	}
	if tp+fn > 0 {
		r, hasR = tp/(tp+fn), true
	}
	return p, r, hasP, hasR
}

func score(truths, preds []string) prf {
	var sp, sr float64
	var np, nr int
	for i := range truths {
		p, r, hasP, hasR := pagePR(truths[i], preds[i])
		if hasP {
			sp += p
			np++
		}
		if hasR {
			sr += r
			nr++
		}
	}
	var s prf
	if np > 0 {
		s.p = sp / float64(np)
	}
	if nr > 0 {
		s.r = sr / float64(nr)
	}
	if s.p+s.r > 0 {
		s.f = 2 * s.p * s.r / (s.p + s.r)
	}
	return s
}

func TestScoreMatchesScorer(t *testing.T) {
	t.Parallel()
	// Values computed with the formulas of the project's extraction scorer
	// (score_extract.py, kept outside this repository; not read here).
	tests := []struct {
		name        string
		truth, pred string
		p, r        float64
		hasP        bool
	}{
		{"equal", "one two three four five", "one two three four five", 1, 1, true},
		{"empty prediction", "one two three four five", "", 0, 0, false},
		{"one shingle of four", "a b c d e f g", "a b c d x y z", 0.25, 0.25, true},
		{"short texts", "über café", "über café", 1, 1, true},
		{"punctuation ignored, case kept", "Hello, world: it's here.", "hello world it s here", 0.5, 0.5, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, r, hasP, _ := pagePR(tt.truth, tt.pred)
			if hasP != tt.hasP || (hasP && (fmt.Sprintf("%.3f", p) != fmt.Sprintf("%.3f", tt.p) || fmt.Sprintf("%.3f", r) != fmt.Sprintf("%.3f", tt.r))) {
				t.Errorf("pagePR = %.3f %.3f %v, want %.3f %.3f %v", p, r, hasP, tt.p, tt.r, tt.hasP)
			}
		})
	}
}

// corpusF1Floor is just under what the pipeline scores on the corpus
// (F1 0.973 when this was written; go-trafilatura alone, fallback on,
// scores 0.942 through the same scorer, see the bench module): a drop
// below it is a regression.
const corpusF1Floor = 0.970

var (
	corpusPagesOnce sync.Once
	corpusPages     []*airlock.Page
	corpusPageErrs  []error
)

// extractCorpus extracts every corpus page once per test binary, as many at
// once as the package's pool allows.
func extractCorpus(tb testing.TB) ([]corpusCase, []*airlock.Page) {
	cases := loadCorpus(tb)
	corpusPagesOnce.Do(func() {
		corpusPages = make([]*airlock.Page, len(cases))
		corpusPageErrs = make([]error, len(cases))
		var wg sync.WaitGroup
		for i, c := range cases {
			wg.Add(1)
			go func() {
				defer wg.Done()
				corpusPages[i], corpusPageErrs[i] = Extract(context.Background(), Input{URL: corpusBase, Body: c.src}, Options{})
			}()
		}
		wg.Wait()
	})
	for i, err := range corpusPageErrs {
		if err != nil {
			// A bot wall here is a false detection: these are all articles.
			tb.Fatalf("%s: %v", cases[i].name, err)
		}
	}
	return cases, corpusPages
}

// TestCorpusQuality runs the whole extraction over the corpus and checks
// the F1 of the text against the floor; extractCorpus fails it if any page
// errs, bot walls included.
func TestCorpusQuality(t *testing.T) {
	t.Parallel()
	cases, pages := extractCorpus(t)
	truths := make([]string, len(cases))
	preds := make([]string, len(cases))
	for i, c := range cases {
		truths[i], preds[i] = c.truth, pages[i].Text
	}
	s := score(truths, preds)
	t.Logf("corpus: F1 %.4f P %.4f R %.4f (%d pages)", s.f, s.p, s.r, len(cases))
	if s.f < corpusF1Floor {
		t.Errorf("corpus F1 %.4f is below the floor %.3f", s.f, corpusF1Floor)
	}
}
