package native

import (
	"net/http"
	"testing"

	"github.com/airlockhq/airlock/internal/provider/providertest"
)

type searchDoer = providertest.Doer

func newSearchDoer(t *testing.T, h http.Handler) *searchDoer { return providertest.NewDoer(t, h) }
