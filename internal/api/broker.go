package api

import (
	"encoding/hex"
	"net/http"
	"time"

	"github.com/airlockhq/airlock"
)

// exchangeRequest is the body of POST /api/exchange/{lane}:
// airlock.ExchangeRequest with the lane in the path and readable durations.
// Data travels as base64.
type exchangeRequest struct {
	Target   string             `json:"target"`
	Data     []byte             `json:"data"`
	Timeout  duration           `json:"timeout,omitempty"`
	MaxReply int64              `json:"max_reply,omitempty"`
	Idle     duration           `json:"idle,omitempty"`
	Narrow   *airlock.Narrowing `json:"narrow,omitempty"`
}

func (s *server) exchange(w http.ResponseWriter, r *http.Request, c caller) error {
	var req exchangeRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	resp, err := s.en.Exchange(r.Context(), c.principal, airlock.ExchangeRequest{
		Lane: r.PathValue("lane"), Target: req.Target, Data: req.Data, Timeout: time.Duration(req.Timeout),
		MaxReply: req.MaxReply, Idle: time.Duration(req.Idle), Narrow: req.Narrow,
	})
	if err != nil {
		return err
	}
	setDecision(w, resp.DecisionID)
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// signRequest is the body of POST /api/sign; data is base64.
type signRequest struct {
	Name string `json:"name"`
	Data []byte `json:"data"`
}

// signResponse carries HMAC-SHA256(secret, data) in base64 and in hex.
type signResponse struct {
	Signature    []byte `json:"signature"`
	SignatureHex string `json:"signature_hex"`
	DecisionID   string `json:"decision_id"`
}

func (s *server) sign(w http.ResponseWriter, r *http.Request, c caller) error {
	var req signRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	if req.Name == "" {
		return badRequest("name (the secret's name) is required")
	}
	sum, id, err := s.en.Sign(r.Context(), c.principal, req.Name, req.Data)
	if err != nil {
		return err
	}
	setDecision(w, id)
	writeJSON(w, http.StatusOK, signResponse{Signature: sum, SignatureHex: hex.EncodeToString(sum), DecisionID: id})
	return nil
}

// routeRequest is the body of POST /api/routes/{name}:
// airlock.RouteRequest with the name in the path. Body is base64.
type routeRequest struct {
	Method string              `json:"method,omitempty"`
	Path   string              `json:"path"`
	Header map[string][]string `json:"header,omitempty"`
	Body   []byte              `json:"body,omitempty"`
}

func (s *server) callRoute(w http.ResponseWriter, r *http.Request, c caller) error {
	var req routeRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	resp, err := s.en.Route(r.Context(), c.principal, airlock.RouteRequest{
		Name: r.PathValue("name"), Method: req.Method, Path: req.Path, Header: req.Header, Body: req.Body,
	})
	if err != nil {
		return err
	}
	setDecision(w, resp.DecisionID)
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// httpRequest serves POST /api/http: an airlock.HTTPRequest (body base64)
// answered by an airlock.HTTPResponse. The upstream status is in the JSON;
// the API's own status is 200 whenever the exchange happened.
func (s *server) httpRequest(w http.ResponseWriter, r *http.Request, c caller) error {
	var req airlock.HTTPRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	resp, err := s.en.HTTP(r.Context(), c.principal, req)
	if err != nil {
		return err
	}
	setDecision(w, resp.DecisionID)
	writeJSON(w, http.StatusOK, resp)
	return nil
}
