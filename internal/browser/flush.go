package browser

import (
	"context"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/runtime"
)

// DefaultFlushTimeout bounds the wait for the pages' storage writes at
// Close (unless Options.FlushTimeout says otherwise): a page that keeps a
// transaction open (or overrides indexedDB) cannot hold a session open.
const DefaultFlushTimeout = 2 * time.Second

// flushIDB resolves once every IndexedDB transaction the page has begun is
// over: a read-only transaction over all of a database's stores is queued
// behind every read-write transaction begun before it on those stores, so
// its completion is a barrier. It is our own script, evaluated by Close,
// never a caller's.
const flushIDB = `(async () => {
  if (typeof indexedDB === "undefined" || !indexedDB.databases) return;
  const dbs = await indexedDB.databases();
  await Promise.all(dbs.map(d => new Promise(done => {
    let r;
    try { r = indexedDB.open(d.name); } catch (e) { return done(); }
    r.onerror = r.onblocked = () => done();
    r.onupgradeneeded = () => { try { r.transaction.abort(); } catch (e) {} done(); };
    r.onsuccess = () => {
      const db = r.result, names = Array.from(db.objectStoreNames);
      if (!names.length) { db.close(); return done(); }
      const tx = db.transaction(names, "readonly");
      tx.oncomplete = tx.onabort = tx.onerror = () => { db.close(); done(); };
    };
  })));
})()`

// flushStorage waits, in every tab, for the IndexedDB writes the page has
// begun to commit, so that a session closed right after an action keeps
// what the action stored (localStorage and cookies are flushed by the
// graceful Browser.close that follows). Bounded by d; failures are
// ignored: the browser is closing anyway.
func (b *instance) flushStorage(ctx context.Context, d time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for _, tb := range b.tabs {
		if tb.target == nil {
			continue
		}
		_, _ = cdp.Call(ctx, tb.target, runtime.Evaluate, runtime.EvaluateParams{Expression: flushIDB, AwaitPromise: new(true), Silent: new(true)})
	}
}
