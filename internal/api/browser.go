package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

// browserSessionsResponse is the answer of GET /api/browser/sessions.
type browserSessionsResponse struct {
	Sessions []engine.BrowserSessionInfo `json:"sessions"`
}

// interactRequest is the body of POST /api/browser/sessions/{id}/interact.
type interactRequest struct {
	Actions     []json.RawMessage `json:"actions"`
	StopOnError bool              `json:"stop_on_error,omitempty"`
}

// approvalRequest is the body of POST
// /api/browser/sessions/{id}/approvals/{approval}.
type approvalRequest struct {
	Approve bool `json:"approve"`
}

func (s *server) browserOpen(w http.ResponseWriter, r *http.Request, c caller) error {
	var req engine.BrowserOpenRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	info, err := s.en.BrowserOpen(r.Context(), c.principal, req)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/browser/sessions/"+info.ID)
	writeJSON(w, http.StatusCreated, info)
	return nil
}

func (s *server) browserSessions(w http.ResponseWriter, r *http.Request, c caller) error {
	sessions := s.en.BrowserSessions(c.principal)
	if sessions == nil {
		sessions = []engine.BrowserSessionInfo{}
	}
	writeJSON(w, http.StatusOK, browserSessionsResponse{Sessions: sessions})
	return nil
}

func (s *server) browserClose(w http.ResponseWriter, r *http.Request, c caller) error {
	q, err := queryParams(r, "wipe")
	if err != nil {
		return err
	}
	wipe := false
	switch q.Get("wipe") {
	case "", "false", "0":
	case "true", "1":
		wipe = true
	default:
		return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonQuery, "wipe %q: want true or false", q.Get("wipe"))
	}
	if err := s.en.BrowserClose(r.Context(), c.principal, r.PathValue("id"), wipe); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *server) browserOp(w http.ResponseWriter, r *http.Request, c caller) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return badRequest("read the body: %v", err)
	}
	op, err := engine.ParseBrowserOp(body)
	if err != nil {
		return err
	}
	res, err := s.en.BrowserDo(r.Context(), c.principal, r.PathValue("id"), op)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *server) browserInteract(w http.ResponseWriter, r *http.Request, c caller) error {
	var req interactRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	if len(req.Actions) == 0 {
		return badRequest("actions: at least one step is required")
	}
	actions := make([]engine.BrowserAction, 0, len(req.Actions))
	for i, raw := range req.Actions {
		a, err := engine.ParseBrowserAction(raw)
		if err != nil {
			return badRequest("actions[%d]: %v", i, err)
		}
		actions = append(actions, a)
	}
	res, err := s.en.BrowserInteract(r.Context(), c.principal, r.PathValue("id"), actions, req.StopOnError)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *server) browserApproval(w http.ResponseWriter, r *http.Request, c caller) error {
	var req approvalRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	if err := s.en.BrowserApprove(r.Context(), c.approver, r.PathValue("id"), r.PathValue("approval"), req.Approve); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// browserEvents streams a session's events as server-sent events, each
// named by its type (browser_event, browser_policy_denied,
// browser_approval_required, browser_crashed), until the session closes or
// the client goes. A slow reader loses events rather than stalling the
// browser. A comment line every HeartbeatInterval keeps an idle stream
// open.
func (s *server) browserEvents(w http.ResponseWriter, r *http.Request, c caller) error {
	events, cancel, err := s.en.BrowserEvents(c.principal, r.PathValue("id"))
	if err != nil {
		return err
	}
	defer cancel()
	ctx, cancelCtx := context.WithCancel(r.Context())
	defer cancelCtx()
	if s.opts.Streams != nil {
		// The server is shutting down: end the stream.
		stop := context.AfterFunc(s.opts.Streams, cancelCtx)
		defer stop()
	}
	streamSSE(s, ctx, w, "events of browser session "+r.PathValue("id"), events, func(ev engine.BrowserEvent) ([]byte, bool, error) {
		js, err := json.Marshal(ev)
		if err != nil {
			return nil, false, err
		}
		return []byte("event: " + ev.Type + "\ndata: " + string(js) + "\n\n"), false, nil
	})
	return nil
}
