package api

import (
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
)

// TestCrawlJobNoLinksAndFormats: the native crawl job takes the scope and
// format controls the Firecrawl routes use: no_links fetches the seed
// alone, and formats raw_html keeps its body as served.
func TestCrawlJobNoLinksAndFormats(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	job := f.startJob(acmeToken, map[string]any{"seed": f.site.URL + "/docs", "depth": 3, "no_links": true,
		"formats": []string{"markdown", "raw_html"}})
	if !job.Request.NoLinks || strings.Join(job.Request.Formats, ",") != "markdown,raw_html" {
		t.Errorf("job request = %+v", job.Request)
	}
	resp := f.stream("/api/crawls/"+job.ID+"/events", acmeToken)
	readSSE(t, resp.Body, func(m sseMsg) bool { return m.event == "end" })
	resp.Body.Close()
	var got jobResponse
	f.do("GET", "/api/crawls/"+job.ID, acmeToken, nil).decode(t, &got)
	if got.Job == nil || got.Job.State != airlock.JobDone || len(got.Pages) != 1 {
		t.Fatalf("job = %+v with %d pages, want done with the seed alone", got.Job, len(got.Pages))
	}
	if p := got.Pages[0].Page; p.URL != f.site.URL+"/docs" || !strings.Contains(p.RawHTML, "<title>Page /docs</title>") {
		t.Errorf("page %s raw_html %.100q, want the seed as served", p.URL, p.RawHTML)
	}
	// A format the crawl does not know is refused.
	wantError(t, f.do("POST", "/api/crawls", acmeToken, map[string]any{"seed": f.site.URL + "/", "formats": []string{"rawHtml"}}),
		400, airlock.CodeInvalid, "")
}
