// Package api is Airlock's HTTP API: JSON over HTTP in front of the engine
// facade. It owns bearer authentication (tenant and admin tokens), the one
// table from error codes to HTTP statuses, request body limits, write
// deadlines, the access log, server-sent events for crawl jobs and the
// OpenAPI 3.1 document of every route. It holds no policy: every call
// reaches the same engine method, and the same gate, as the CLI and MCP.
//
// Usage (what `airlock serve` does):
//
//	h := api.New(en, api.Options{Logger: logger, Version: engine.Version, MCP: mcpHandler})
//	srv := &http.Server{Addr: "127.0.0.1:8080", Handler: h, ReadHeaderTimeout: 10 * time.Second}
//	err := srv.ListenAndServe()
//
// The handler sets a write deadline on every response itself (see
// Options.WriteTimeout): leave http.Server.WriteTimeout at zero, or
// server-sent event streams are cut at it.
//
// Routes (the OpenAPI document at GET /api/openapi.json has the schemas):
//
//	POST   /api/browse                 fetch, crawl or search, rendered as json, org, md or text
//	POST   /api/crawls                 start a crawl job (202)
//	GET    /api/crawls                 the tenant's crawl jobs
//	GET    /api/crawls/{id}            a job, with its pages after a cursor
//	GET    /api/crawls/{id}/events     server-sent events: page, progress, end
//	DELETE /api/crawls/{id}            cancel a job
//	POST   /api/exchange/{lane}        one-shot tcp, udp or tls exchange
//	POST   /api/sign                   HMAC-SHA256 with a named secret
//	POST   /api/routes/{name}          a credentialed route
//	POST   /api/http                   a generic HTTP request under policy
//	GET    /api/audit                  the audit log (a tenant sees its own records)
//	GET    /api/audit/stats            decision counts by broker, outcome and reason
//	POST   /api/admin/revoke           revoke a tenant or tenant/instance (admin token)
//	POST   /api/admin/unrevoke         lift a revocation (admin token)
//	GET    /healthz, /readyz, /metrics, /api/openapi.json
//	*      /mcp                        Options.MCP, when set
//	*      /v2/...                     Firecrawl's v2 API (package firecrawl; docs/firecrawl.md),
//	                                   not in the OpenAPI document
package api
