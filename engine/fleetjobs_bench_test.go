package engine_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
	"github.com/airlockhq/airlock/internal/crawl/crawltest"
	"github.com/airlockhq/airlock/internal/fleet/fleettest"
)

// BenchmarkFleetCrawlJob runs a 1,000-page crawl job (full extraction) on
// an engine without Redis, on one replica and on three sharing one Redis,
// in this process: pages/s is
// the job's pages over its wall time, redis-cpu-ms/1000pages what the
// Redis server spent (INFO cpu) for each 1,000 pages. On a small machine the replicas
// share its cores, so three are no faster than one; across machines each
// brings its own.
//
//	go test -run XXX -bench FleetCrawlJob -benchtime 3x ./engine/
func BenchmarkFleetCrawlJob(b *testing.B) {
	const pages = 1000
	for _, n := range []int{0, 1, 3} {
		name := "replicas=" + strconv.Itoa(n)
		if n == 0 {
			name = "embedded" // no Redis: the job's state in the process
		}
		b.Run(name, func(b *testing.B) {
			url := ""
			var srv *fleettest.Server
			if n > 0 {
				srv = fleettest.Start(b)
				url = srv.URL(0)
			}
			es := make([]*engine.Engine, max(n, 1))
			for i := range es {
				cfg := fleetCrawlConfig(url)
				if n == 0 {
					cfg.State = engine.StateConfig{}
				}
				e, err := engine.New(context.Background(), cfg)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { e.Close(context.Background()) })
				es[i] = e
			}
			site := crawltest.NewTreeSite(b, pages, "", 0)
			p := airlock.Principal{Tenant: "acme"}
			var total, elapsed float64
			var redisCPU time.Duration
			for b.Loop() {
				var cpu0 time.Duration
				if srv != nil {
					cpu0 = srv.CPU(b)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				job, err := es[0].StartCrawlJob(ctx, p, airlock.CrawlRequest{Seed: site.URL + "/p0", MaxPages: pages,
					Depth: 40, Concurrency: 8, PerHostConcurrency: 8})
				if err != nil {
					b.Fatal(err)
				}
				for {
					j, err := es[0].CrawlJob(ctx, p, job.ID)
					if err != nil {
						b.Fatal(err)
					}
					if j.FinishedAt != nil {
						if j.State != airlock.JobDone || j.Pages != pages {
							b.Fatalf("job %s with %d pages", j.State, j.Pages)
						}
						total += float64(j.Pages)
						elapsed += j.FinishedAt.Sub(j.CreatedAt).Seconds()
						if srv != nil {
							redisCPU += srv.CPU(b) - cpu0
						}
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
				cancel()
			}
			b.ReportMetric(total/elapsed, "pages/s")
			if srv != nil {
				b.ReportMetric(float64(redisCPU.Milliseconds())*1000/total, "redis-cpu-ms/1000pages")
			}
		})
	}
}
