package guest

import (
	"errors"

	"github.com/airlockhq/airlock"
)

// IsDenied reports whether err is a refusal: denied, revoked or
// rate-limited (the imports return -1 for those).
func IsDenied(err error) bool {
	var e *airlock.Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code {
	case airlock.CodeDenied, airlock.CodeRevoked, airlock.CodeRateLimited:
		return true
	}
	return false
}
