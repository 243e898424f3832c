package firecrawl

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
)

// TestActiveCrawlOf: an active crawl's entry names its URL without a
// password, and its options only the Firecrawl fields Airlock's crawl
// took: never the provider, proxy, TLS profile or narrowing the job
// runs with, whoever set them.
func TestActiveCrawlOf(t *testing.T) {
	t.Parallel()
	job := airlock.CrawlJob{ID: "01J0", Tenant: "acme", State: airlock.JobRunning, Request: airlock.CrawlRequest{
		Seed: "http://user:s3cret@10.1.2.3:8080/a", Depth: 3, MaxPages: 40, Concurrency: 2, Sitemap: true,
		Delay: airlock.Duration(1500 * time.Millisecond), Timeout: airlock.Duration(9 * time.Second),
		Provider: "internal-crawler", Proxy: "corp-egress", TLSProfile: "chrome", External: true,
		Formats: []string{airlock.FormatLinks, airlock.FormatRawHTML}, Cache: true,
	}}
	b, err := json.Marshal(activeCrawlOf(job))
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, bad := range []string{"s3cret", "internal-crawler", "corp-egress", "chrome", "provider", "proxy"} {
		if strings.Contains(got, bad) {
			t.Errorf("active crawl entry has %q: %s", bad, got)
		}
	}
	want := `{"id":"01J0","teamId":"acme","url":"http://user:xxxxx@10.1.2.3:8080/a","options":{"maxDiscoveryDepth":3,"sitemap":"include","limit":40,` +
		`"allowExternalLinks":true,"allowSubdomains":false,"ignoreRobotsTxt":false,"delay":1.5,"maxConcurrency":2,` +
		`"scrapeOptions":{"formats":["links","rawHtml"],"timeout":9000}}}`
	if got != want {
		t.Errorf("active crawl entry:\n got %s\nwant %s", got, want)
	}
}
