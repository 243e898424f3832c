// Package extractbench benchmarks a crawl with full extraction against the
// extraction alone (BenchmarkCrawlExtract). It is a package of its own so
// that the extractor, whose dependencies build about 30 MB of tables when
// they load, stays out of package crawl's test binary, whose memory
// benchmarks measure the crawler's own heap.
package extractbench
