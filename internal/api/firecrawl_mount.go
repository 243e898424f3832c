package api

import (
	"context"
	"net/http"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/api/firecrawl"
)

// FirecrawlPrefix is where the Firecrawl-compatible routes are mounted
// (internal/api/firecrawl; docs/firecrawl.md).
const FirecrawlPrefix = "/v2/"

// mountFirecrawl serves Firecrawl's v2 API under FirecrawlPrefix with this
// server's body limit, write deadline and access log; the routes
// authenticate with the same tenant tokens.
func (s *server) mountFirecrawl() {
	fc := firecrawl.New(s.en, firecrawl.Options{
		Logger: s.log,
		OnCaller: func(r *http.Request, p airlock.Principal) {
			if info, ok := r.Context().Value(logInfoKey{}).(*logInfo); ok {
				info.tenant, info.instance = p.Tenant, p.Instance
			}
		},
	})
	s.mux.Handle(FirecrawlPrefix, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
		ctx, cancel := context.WithTimeout(r.Context(), s.callTimeout())
		defer cancel()
		r = r.WithContext(ctx)
		r.Body = http.MaxBytesReader(w, r.Body, s.opts.MaxBody)
		fc.ServeHTTP(w, r)
	}))
}
