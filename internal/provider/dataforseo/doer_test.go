package dataforseo

import (
	"net/http"
	"testing"

	"github.com/airlockhq/airlock/internal/provider/providertest"
)

type testDoer = providertest.Doer

func newTestDoer(t *testing.T, h http.Handler) *testDoer { return providertest.NewDoer(t, h) }
