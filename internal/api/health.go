package api

import (
	"net/http"

	"github.com/airlockhq/airlock"
)

// healthResponse is the answer of /healthz and of a ready /readyz.
type healthResponse struct {
	Status  string `json:"status"`
	Version string `json:"version"`
}

// healthz says the process is up; it checks nothing else.
func (s *server) healthz(w http.ResponseWriter, r *http.Request, _ caller) error {
	writeJSON(w, http.StatusOK, healthResponse{Status: "ok", Version: s.opts.Version})
	return nil
}

// readyz asks Options.Ready; not ready is 503 unavailable (not_ready)
// whatever the cause, with the cause's reason and public message (e.g.
// "not ready: revocations_stale: the shared revocation set is lost: ...").
func (s *server) readyz(w http.ResponseWriter, r *http.Request, _ caller) error {
	if s.opts.Ready != nil {
		if err := s.opts.Ready(r.Context()); err != nil {
			pub := airlock.Public(err, "")
			cause := pub.Message
			if pub.Reason != "" {
				cause = string(pub.Reason) + ": " + cause
			}
			return airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonNotReady, "not ready: %s", cause)
		}
	}
	writeJSON(w, http.StatusOK, healthResponse{Status: "ready", Version: s.opts.Version})
	return nil
}

// metrics serves the engine's Prometheus registry.
func (s *server) metrics(w http.ResponseWriter, r *http.Request, _ caller) error {
	s.en.Metrics().ServeHTTP(w, r)
	return nil
}

// openAPI serves the OpenAPI 3.1 document of this API.
func (s *server) openAPI(w http.ResponseWriter, r *http.Request, _ caller) error {
	writeBody(w, http.StatusOK, "application/json", s.openapi)
	return nil
}
