package wasmhost

import (
	"fmt"
	"os"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/airlockhq/airlock"
)

// Defaults of a Budget.
const (
	// DefaultInstancesPerCPU: instances at once per usable CPU.
	DefaultInstancesPerCPU = 16
	// DefaultMemoryShare: the guests' memory budget is this fraction of
	// the machine's memory (the lower of RAM and the cgroup's limit).
	DefaultMemoryShare = 0.5
	// fallbackMachineMemory is assumed where the machine's memory cannot
	// be read.
	fallbackMachineMemory = 2 << 30
	// budgetRetryAfter is the Retry-After of a refusal for lack of a slot.
	budgetRetryAfter = time.Second
)

// Budget caps the guest instances a Host runs at once: in total, per
// principal, and by memory, where each running instance counts its
// profile's memory cap (the most linear memory it can hold). A run that
// finds no room is refused at once (unavailable, reason guest_instances
// or guest_memory, with a Retry-After); it does not wait. Zero fields take
// the defaults of DefaultBudget; InstancesPerPrincipal's default is
// Instances.
type Budget struct {
	Instances             int
	InstancesPerPrincipal int
	Memory                int64 // bytes
}

// DefaultBudget is this machine's default: DefaultInstancesPerCPU
// instances per CPU (GOMAXPROCS), and DefaultMemoryShare of its memory.
func DefaultBudget() Budget {
	n := DefaultInstancesPerCPU * goruntime.GOMAXPROCS(0)
	return Budget{Instances: n, InstancesPerPrincipal: n, Memory: int64(float64(machineMemory()) * DefaultMemoryShare)}
}

// withDefaults fills b's zero fields; negative fields are a config error.
func (b Budget) withDefaults() (Budget, error) {
	if b.Instances < 0 || b.InstancesPerPrincipal < 0 || b.Memory < 0 {
		return b, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonConfig, "wasmhost: a negative guest budget (%+v)", b)
	}
	d := DefaultBudget()
	if b.Instances == 0 {
		b.Instances = d.Instances
	}
	if b.InstancesPerPrincipal == 0 || b.InstancesPerPrincipal > b.Instances {
		b.InstancesPerPrincipal = b.Instances
	}
	if b.Memory == 0 {
		b.Memory = d.Memory
	}
	return b, nil
}

// machineMemory is the memory this process may use: the lower of the
// machine's RAM and its cgroup's limit (v2 memory.max, or v1's).
func machineMemory() int64 {
	m := totalRAM()
	for _, f := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && v > 0 && (m == 0 || v < m) {
			m = v // "max" (no limit) does not parse; v1's "no limit" is huge
		}
	}
	if m <= 0 {
		return fallbackMachineMemory
	}
	return m
}

// budget is a Budget in use. Safe for concurrent use.
type budget struct {
	b Budget

	mu          sync.Mutex
	running     int
	memory      int64
	byPrincipal map[string]int
	peak        int
}

func newBudget(b Budget) *budget { return &budget{b: b, byPrincipal: map[string]int{}} }

// budgetError is a refusal for lack of room: unavailable, with a
// Retry-After.
type budgetError struct {
	reason airlock.Reason
	msg    string
}

func (e *budgetError) Error() string             { return e.msg }
func (e *budgetError) ErrorCode() string         { return string(airlock.CodeUnavailable) }
func (e *budgetError) ErrorReason() string       { return string(e.reason) }
func (e *budgetError) RetryAfter() time.Duration { return budgetRetryAfter }

// acquire takes a slot for one instance of principal with a memory cap of
// mem bytes; release gives it back (once).
func (b *budget) acquire(principal string, mem int64) (release func(), err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.running >= b.b.Instances:
		return nil, &budgetError{airlock.ReasonGuestInstances, fmt.Sprintf("the host runs %d guest instances, its budget; retry later", b.b.Instances)}
	case b.byPrincipal[principal] >= b.b.InstancesPerPrincipal:
		return nil, &budgetError{airlock.ReasonGuestInstances, fmt.Sprintf("%s runs %d guest instances, its budget; retry later", principal, b.b.InstancesPerPrincipal)}
	case b.memory+mem > b.b.Memory:
		return nil, &budgetError{airlock.ReasonGuestMemory, fmt.Sprintf("the guests' memory budget of %d MiB is in use; retry later", b.b.Memory>>20)}
	}
	b.running++
	b.memory += mem
	b.byPrincipal[principal]++
	b.peak = max(b.peak, b.running)
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.running--
			b.memory -= mem
			if b.byPrincipal[principal]--; b.byPrincipal[principal] == 0 {
				delete(b.byPrincipal, principal)
			}
		})
	}, nil
}

// fits is how many instances of one principal with a memory cap of mem
// bytes the budget holds at once.
func (b *budget) fits(mem int64) int {
	n := b.b.InstancesPerPrincipal
	if mem > 0 {
		n = min(n, int(b.b.Memory/mem))
	}
	return n
}

func (b *budget) stats() (running, peak int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.running, b.peak
}
