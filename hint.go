package airlock

import "errors"

// HintOf returns what the caller can do about err, the same sentence on
// every surface (the CLI's "hint:" line, the "hint" of an API error body):
// the Hint of the outermost *Error in the chain that has one, else the
// catalogue's hint of ReasonOf(err) (Reason.Hint). It is "" for nil, for
// internal errors and for reasons without advice.
func HintOf(err error) string {
	if err == nil || CodeOf(err) == CodeInternal {
		return ""
	}
	for e := err; e != nil; {
		var ae *Error
		if !errors.As(e, &ae) {
			break
		}
		if ae.Hint != "" {
			return ae.Hint
		}
		e = ae.Err
	}
	return ReasonOf(err).Hint()
}
