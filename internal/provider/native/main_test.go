package native

import (
	"os"
	"testing"

	"github.com/airlockhq/airlock/internal/provider/providertest"
)

func TestMain(m *testing.M) { os.Exit(providertest.Main(m, "native")) }
