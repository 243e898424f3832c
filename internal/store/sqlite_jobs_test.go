package store_test

import (
	"testing"

	"github.com/airlockhq/airlock/internal/store"
	"github.com/airlockhq/airlock/internal/store/storetest"
)

func TestJobsConformance(t *testing.T) {
	for name, open := range map[string]func(*testing.T) *store.SQLite{
		"File":   openFile,
		"Memory": openMemory,
	} {
		t.Run(name, func(t *testing.T) {
			storetest.RunJobs(t, func(t *testing.T) store.Jobs { return open(t) })
		})
	}
}
