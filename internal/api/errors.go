package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"

	"github.com/airlockhq/airlock"
)

// statusOf is the one table from error codes to HTTP statuses.
var statusOf = map[airlock.Code]int{
	airlock.CodeDenied:      http.StatusForbidden,
	airlock.CodeInvalid:     http.StatusBadRequest,
	airlock.CodeNotFound:    http.StatusNotFound,
	airlock.CodeRateLimited: http.StatusTooManyRequests,
	airlock.CodeRevoked:     http.StatusForbidden,
	airlock.CodeTooLarge:    http.StatusRequestEntityTooLarge,
	airlock.CodeTimeout:     http.StatusGatewayTimeout,
	airlock.CodeUpstream:    http.StatusBadGateway,
	airlock.CodeUnavailable: http.StatusServiceUnavailable,
	airlock.CodeInternal:    http.StatusInternalServerError,
}

// statusFor returns the HTTP status of an error code (500 for a code outside
// the vocabulary).
func statusFor(code airlock.Code) int {
	if s, ok := statusOf[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// writeError writes err in the public shape {"error": {...}}, with the
// hint the CLI prints for it (airlock.HintOf) when there is one, the
// status of its code, the decision id header when it has one, Retry-After
// for rate limits and WWW-Authenticate for refused credentials. Internal
// errors show a generic message (airlock.Public); the caller logs them.
func writeError(w http.ResponseWriter, err error) {
	pub := airlock.Public(err, "")
	pub.Hint = airlock.HintOf(err)
	status := statusFor(pub.Code)
	h := w.Header()
	var ae *authError
	var se *statusError
	switch {
	case errors.As(err, &ae):
		status = http.StatusUnauthorized
		h.Set("WWW-Authenticate", ae.challenge)
	case errors.As(err, &se):
		status = se.status
	}
	if pub.Code == airlock.CodeRateLimited {
		secs := int64(1)
		if d := airlock.RetryAfter(err); d > 0 {
			secs = int64(math.Ceil(d.Seconds()))
		}
		h.Set("Retry-After", strconv.FormatInt(secs, 10))
	}
	if pub.DecisionID != "" {
		h.Set(HeaderDecision, pub.DecisionID)
	} else {
		h.Del(HeaderDecision) // set by a call that succeeded before a later step failed
	}
	h.Del("Content-Length")
	writeJSON(w, status, airlock.ErrorBody{Error: pub})
}

// writeJSON writes v as compact JSON (with no HTML escaping: the API is not
// a web page).
func writeJSON(w http.ResponseWriter, status int, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only a bug (an unencodable type) gets here.
		status = http.StatusInternalServerError
		b.Reset()
		enc.Encode(airlock.ErrorBody{Error: airlock.Public(err, "")})
	}
	writeBody(w, status, "application/json", b.Bytes())
}

func writeBody(w http.ResponseWriter, status int, contentType string, b []byte) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(b)
}

// setDecision sets the decision id header of a successful response.
func setDecision(w http.ResponseWriter, id string) {
	if id != "" {
		w.Header().Set(HeaderDecision, id)
	}
}

// decodeJSON reads r's body, one JSON object, into v: unknown fields,
// trailing data and an empty body are invalid; a body past the limit is
// too_large.
func decodeJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return bodyError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		if err != nil {
			return bodyError(err)
		}
		return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonBody, "request body: one JSON object expected, found more after it")
	}
	return nil
}

// decodeStrict decodes raw (an options object) into v, refusing unknown
// fields.
func decodeStrict(raw json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonBody, "options: %v", err)
	}
	return nil
}

func bodyError(err error) error {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return airlock.Errorf(airlock.CodeTooLarge, airlock.ReasonBody, "request body is larger than %d bytes", mbe.Limit)
	case errors.Is(err, io.EOF):
		return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonBody, "request body: a JSON object is required")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonBody, "request body: truncated JSON")
	}
	// Syntax, type and unknown-field errors; also a read error of a
	// client that went away, which nobody will read.
	return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonBody, "request body: %v", err)
}
