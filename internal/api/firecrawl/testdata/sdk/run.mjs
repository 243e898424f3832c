// Drives Airlock's Firecrawl-compatible routes with the official Firecrawl
// JS SDK, unmodified. Run by TestSDK inside a network namespace that has
// only loopback; the SDK is always given a loopback apiUrl. Prints one JSON
// object with what each call returned or threw.
import Firecrawl from "@mendable/firecrawl-js";

const api = process.env.FC_API;
const site = process.env.FC_SITE;
if (!/^http:\/\/127\.0\.0\.1:\d+$/.test(api ?? "")) {
  throw new Error(`FC_API must be a loopback URL, got ${api}`);
}
const app = new Firecrawl({ apiKey: process.env.FC_TOKEN, apiUrl: api });

function failure(e) {
  return { error: String(e?.message ?? e), status: e?.status ?? null, details: e?.details ?? null };
}

async function attempt(fn) {
  try {
    return { ok: await fn() };
  } catch (e) {
    return failure(e);
  }
}

// together(calls) awaits calls started at once (an object of promises)
// and gives their results under the same names.
async function together(calls) {
  return Object.fromEntries(await Promise.all(Object.entries(calls).map(async ([name, call]) => [name, await call])));
}

// The calls up to the cancel are independent of each other: they run at
// once, so that the SDK's pollers (at least a second between polls) wait
// together, in two waves of three crawl jobs (a tenant runs at most four
// at once). The cancel runs after them: it lists the active crawls and
// expects its own alone.
const out = await together({
  scrape: attempt(async () => {
    const d = await app.scrape(`${site}/docs/a`, { formats: ["markdown", "links", "rawHtml"] });
    return { markdown: d.markdown, links: d.links, rawHtml: d.rawHtml, metadata: d.metadata, html: d.html ?? null };
  }),
  scrapeHtml: attempt(async () => {
    const d = await app.scrape(`${site}/docs/a`, { formats: ["html"], excludeTags: ["ul"] });
    return { html: d.html, markdown: d.markdown ?? null, metadata: d.metadata };
  }),
  scrapeActions: attempt(async () => {
    const d = await app.scrape(`${site}/docs/a`, {
      formats: ["markdown", "screenshot"],
      actions: [
        { type: "wait", milliseconds: 100 },
        { type: "click", selector: "a[href='/docs/b']" },
        { type: "wait", selector: "h1" },
        { type: "screenshot" },
      ],
    });
    return { markdown: d.markdown, screenshot: d.screenshot, actions: d.actions, metadata: d.metadata };
  }),
  scrapeJavascript: attempt(() =>
    app.scrape(`${site}/docs/a`, { actions: [{ type: "executeJavascript", script: "document.title" }] }),
  ),
  scrape404: attempt(async () => {
    const d = await app.scrape(`${site}/missing`, { formats: ["markdown"] });
    return { markdown: d.markdown, metadata: d.metadata };
  }),
  scrapeSummary: attempt(() => app.scrape(`${site}/docs/a`, { formats: ["summary"] })),
  map: attempt(() => app.map(`${site}/`, { limit: 100 })),
  search: attempt(() => app.search("airlock", { limit: 3 })),
  crawl: attempt(() => app.crawl(`${site}/`, { limit: 10, sitemap: "skip", pollInterval: 1, timeout: 60 })),
  crawlPaths: attempt(() =>
    app.crawl(`${site}/`, { includePaths: ["^/docs/"], excludePaths: ["/b$"], sitemap: "skip", pollInterval: 1, timeout: 60 }),
  ),
  crawlFormats: attempt(() =>
    app.crawl(`${site}/docs/b`, {
      maxDiscoveryDepth: 0,
      sitemap: "skip",
      scrapeOptions: { formats: ["links", "rawHtml"] },
      pollInterval: 1,
      timeout: 60,
    }),
  ),
});
Object.assign(
  out,
  await together({
    crawlSitemapOnly: attempt(() => app.crawl(`${site}/`, { sitemap: "only", pollInterval: 1, timeout: 60 })),
    crawlErrors: attempt(async () => {
      const started = await app.startCrawl(`${site}/outward`, { allowExternalLinks: true, sitemap: "skip" });
      let status = await app.getCrawlStatus(started.id);
      for (let i = 0; status.status === "scraping" && i < 600; i++) {
        await new Promise((r) => setTimeout(r, 100));
        status = await app.getCrawlStatus(started.id);
      }
      return { status: status.status, errors: await app.getCrawlErrors(started.id) };
    }),
    batch: attempt(() =>
      app.batchScrape([`${site}/docs/a`, `${site}/blog/x`], { options: { formats: ["markdown"] }, pollInterval: 1, timeout: 60 }),
    ),
  }),
);
out.cancel = await attempt(async () => {
  const started = await app.startCrawl(`${site}/slow`, { sitemap: "skip", limit: 3 });
  const during = await app.getActiveCrawls();
  const cancelled = await app.cancelCrawl(started.id);
  const status = await app.getCrawlStatus(started.id);
  const after = await app.getActiveCrawls();
  return { id: started.id, during, cancelled, status: status.status, after };
});
const locked = new Firecrawl({ apiKey: process.env.FC_LOCKED_TOKEN, apiUrl: api });
out.refused = await attempt(() => locked.scrape(`${site}/docs/a`));
const nobody = new Firecrawl({ apiKey: "alk_nobody", apiUrl: api });
out.unauthorized = await attempt(() => nobody.scrape(`${site}/docs/a`));
console.log(JSON.stringify(out));
