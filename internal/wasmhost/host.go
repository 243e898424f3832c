package wasmhost

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

// Defaults of one invocation's standard streams.
const (
	DefaultMaxStdout = 8 << 20 // bytes of guest stdout kept; the rest is dropped
	DefaultMaxStderr = 1 << 20 // bytes of guest stderr kept
	// MaxModuleBytes bounds a module given to Load.
	MaxModuleBytes = 256 << 20
)

// Broker is what the imports call: the engine's gated methods, and the
// guest profile of a tenant. *engine.Engine satisfies it.
type Broker interface {
	GuestProfile(tenant string) (engine.GuestProfile, error)
	// BeginGuest opens the gate call of one step of a guest (a load, a
	// run, a served request), which the host Ends with its outcome.
	BeginGuest(ctx context.Context, p airlock.Principal, broker, target string) (*engine.GuestCall, error)
	Fetch(ctx context.Context, p airlock.Principal, req airlock.FetchRequest) (*airlock.Page, error)
	FetchMany(ctx context.Context, p airlock.Principal, urls []string, opts airlock.FetchRequest) ([]airlock.FetchResult, string, error)
	HTTP(ctx context.Context, p airlock.Principal, req airlock.HTTPRequest) (*airlock.HTTPResponse, error)
	Exchange(ctx context.Context, p airlock.Principal, req airlock.ExchangeRequest) (*airlock.ExchangeResponse, error)
	Sign(ctx context.Context, p airlock.Principal, name string, data []byte) ([]byte, string, error)
	Route(ctx context.Context, p airlock.Principal, req airlock.RouteRequest) (*airlock.HTTPResponse, error)
}

var _ Broker = (*engine.Engine)(nil)

// Config configures a Host.
type Config struct {
	// Broker fulfils the imports (required).
	Broker Broker
	// CacheDir holds the compilation cache shared by every runtime of the
	// host (and by other processes using the same directory). "" keeps the
	// cache in memory for the life of the Host.
	CacheDir string
	// Logger gets one record per guest run that fails. nil discards.
	Logger *slog.Logger
	// Budget caps the instances running at once (zero fields: the
	// defaults of DefaultBudget).
	Budget Budget
}

// Host compiles and runs guests. Create it with New and Close it when done;
// its methods are safe for concurrent use.
type Host struct {
	broker Broker
	cache  wazero.CompilationCache
	logger *slog.Logger
	budget *budget

	mu       sync.Mutex
	runtimes map[string]*runtime // by grant set
	closed   bool
}

// runtime is one wazero runtime with WASI and exactly the airlock functions
// of one grant set.
type runtime struct {
	rt wazero.Runtime
}

// New builds a Host. The compilation cache directory is created if needed.
func New(ctx context.Context, cfg Config) (*Host, error) {
	if cfg.Broker == nil {
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonConfig, "wasmhost: no broker")
	}
	b, err := cfg.Budget.withDefaults()
	if err != nil {
		return nil, err
	}
	h := &Host{broker: cfg.Broker, logger: cfg.Logger, budget: newBudget(b), runtimes: map[string]*runtime{}}
	if h.logger == nil {
		h.logger = slog.New(slog.DiscardHandler)
	}
	if cfg.CacheDir == "" {
		h.cache = wazero.NewCompilationCache()
	} else {
		if err := os.MkdirAll(cfg.CacheDir, 0o700); err != nil {
			return nil, airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonCache, "wasmhost: compilation cache: %v", err)
		}
		c, err := wazero.NewCompilationCacheWithDir(cfg.CacheDir)
		if err != nil {
			return nil, airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonCache, "wasmhost: compilation cache: %v", err)
		}
		h.cache = c
	}
	return h, nil
}

// Budget returns the host's budget with its defaults filled in.
func (h *Host) Budget() Budget { return h.budget.b }

// Running returns how many instances are running now.
func (h *Host) Running() int { r, _ := h.budget.stats(); return r }

// Peak returns the most instances that have run at once.
func (h *Host) Peak() int { _, p := h.budget.stats(); return p }

// Close closes every runtime (and so every guest loaded from them) and the
// compilation cache.
func (h *Host) Close(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	h.closed = true
	var errs []error
	for _, r := range h.runtimes {
		errs = append(errs, r.rt.Close(ctx))
	}
	errs = append(errs, h.cache.Close(ctx))
	return errors.Join(errs...)
}

// runtimeFor returns the runtime of p's grant set, creating it once.
func (h *Host) runtimeFor(ctx context.Context, p engine.GuestProfile) (*runtime, error) {
	key := grantKey(p)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, airlock.Errorf(airlock.CodeUnavailable, airlock.ReasonClosed, "wasmhost: host is closed")
	}
	if r := h.runtimes[key]; r != nil {
		return r, nil
	}
	// The memory cap is enforced per instance by the allocator (memory.go),
	// so runtimes are shared by profiles that differ only in limits.
	rc := wazero.NewRuntimeConfig().WithCompilationCache(h.cache).WithCloseOnContextDone(true)
	rt := wazero.NewRuntimeWithConfig(ctx, rc)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		rt.Close(ctx)
		return nil, airlock.Errorf(airlock.CodeInternal, airlock.ReasonNone, "wasmhost: instantiate WASI: %v", err)
	}
	if err := h.instantiateAirlock(ctx, rt, p); err != nil {
		rt.Close(ctx)
		return nil, err
	}
	r := &runtime{rt: rt}
	h.runtimes[key] = r
	return r, nil
}

// Guest is a compiled module bound to a principal and its profile. Run it
// as many times as needed, concurrently: each run is a fresh instance.
type Guest struct {
	h         *Host
	p         airlock.Principal
	profile   engine.GuestProfile
	compiled  wazero.CompiledModule
	name      string
	hasStart  bool
	closeOnce sync.Once
}

// Load compiles wasm for principal p. Before anything is compiled or
// instantiated, the module's imports are compared with p's profile: an ungranted airlock
// import is a denied error (reason capability) whose message names it,
// e.g. "airlock.browse_fetch is not granted by profile compute". name is
// the program name the guest sees as argv[0]. The load is one gate call
// (broker "guest", target "load NAME"): a revoked principal cannot load,
// and a refusal is audited.
func (h *Host) Load(ctx context.Context, p airlock.Principal, name string, wasm []byte) (*Guest, error) {
	if name == "" {
		name = "guest.wasm"
	}
	call, err := h.broker.BeginGuest(ctx, p, "guest", "load "+cut(name, 200))
	if err != nil {
		return nil, err
	}
	g, err := h.load(call.Context(), p, name, wasm)
	if err := call.End(err); err != nil {
		return nil, err
	}
	return g, nil
}

func (h *Host) load(ctx context.Context, p airlock.Principal, name string, wasm []byte) (*Guest, error) {
	if len(wasm) > MaxModuleBytes {
		return nil, airlock.Errorf(airlock.CodeTooLarge, airlock.ReasonModule, "wasmhost: module of %d bytes; at most %d", len(wasm), MaxModuleBytes)
	}
	prof, err := h.broker.GuestProfile(p.Tenant)
	if err != nil {
		return nil, err
	}
	if prof.Memory > h.budget.b.Memory {
		// No run could ever start: say so now rather than at each run.
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonGuestMemory, "wasmhost: profile %s's memory cap of %d MiB is over the guests' memory budget of %d MiB",
			prof.Name, prof.Memory>>20, h.budget.b.Memory>>20)
	}
	// The grant is checked twice: on the import section before any code is
	// compiled, and on what the compiler decoded.
	if err := checkImportSection(wasm, prof); err != nil {
		return nil, err
	}
	r, err := h.runtimeFor(ctx, prof)
	if err != nil {
		return nil, err
	}
	cm, err := r.rt.CompileModule(ctx, wasm)
	if err != nil {
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonModule, "wasmhost: compile: %v", err)
	}
	if err := checkImports(cm.ImportedFunctions(), prof); err != nil {
		cm.Close(ctx)
		return nil, err
	}
	if len(cm.ImportedMemories()) > 0 {
		cm.Close(ctx)
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonModule, "wasmhost: the module imports a memory; it must define its own")
	}
	for _, m := range cm.ExportedMemories() {
		if int64(m.Min())*pageSize > prof.Memory {
			cm.Close(ctx)
			return nil, airlock.Errorf(airlock.CodeTooLarge, airlock.ReasonMemoryLimit, "wasmhost: the module starts with %d bytes of memory; profile %s allows %d",
				int64(m.Min())*pageSize, prof.Name, prof.Memory)
		}
	}
	_, hasStart := cm.ExportedFunctions()["_start"]
	return &Guest{h: h, p: p, profile: prof, compiled: cm, name: name, hasStart: hasStart}, nil
}

// Profile returns the profile the guest was loaded under.
func (g *Guest) Profile() engine.GuestProfile { return g.profile }

// Principal returns the principal the guest runs for.
func (g *Guest) Principal() airlock.Principal { return g.p }

// Close releases the compiled module.
func (g *Guest) Close(ctx context.Context) error {
	var err error
	g.closeOnce.Do(func() { err = g.compiled.Close(ctx) })
	return err
}

// RunOptions are one invocation's arguments and streams.
type RunOptions struct {
	// Args are passed as argv[1:]; argv[0] is the guest's name. The guest
	// gets no environment variables and no preopened directories.
	Args []string
	// Stdin is the guest's standard input; nil is empty.
	Stdin io.Reader
	// Stdout and Stderr receive the guest's output up to MaxStdout and
	// MaxStderr bytes (0: the defaults); the rest is dropped and flagged in
	// the Result. nil discards.
	Stdout, Stderr       io.Writer
	MaxStdout, MaxStderr int64
}

// Result is the outcome of a run that ended by itself.
type Result struct {
	ExitCode        uint32
	Calls           int // host calls the guest made
	StdoutTruncated bool
	StderrTruncated bool
	Elapsed         time.Duration
}

// Run instantiates a fresh instance and runs its _start under the
// profile's memory cap and deadline, as one gate call (broker "guest",
// target "run NAME") whose decision records the outcome. A guest that
// exits, with any code, is a Result and a nil error. Errors:
// timeout/cpu_deadline when the deadline stopped it, too_large/memory_limit
// when it asked for memory past the cap, revoked when its principal was
// revoked meanwhile, timeout/canceled when ctx ended first, upstream/trap
// when it trapped, invalid/module when it does not instantiate, and the
// refusals of Start.
func (g *Guest) Run(ctx context.Context, o RunOptions) (*Result, error) {
	inv, err := g.Start(ctx, "guest", "run "+cut(g.name, 200))
	if err != nil {
		return nil, err
	}
	return inv.Run(o)
}

// Invocation is one run of a guest that has its slot in the host's budget
// and its gate call, and has not run yet. Run it exactly once.
type Invocation struct {
	g       *Guest
	call    *engine.GuestCall
	release func()
	ran     atomic.Bool
}

// Start takes a slot in the host's budget and opens the gate call (broker,
// target) of one run, so that the caller learns the decision id before the
// guest runs. Errors: unavailable (reason guest_instances or guest_memory,
// with a RetryAfter) when the budget has no room; the gate's refusals
// (revoked, rate_limited, denied); invalid/no_start.
func (g *Guest) Start(ctx context.Context, broker, target string) (*Invocation, error) {
	if !g.hasStart {
		return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonNoStart, "wasmhost: %s exports no _start (not a WASI command module)", g.name)
	}
	release, err := g.h.budget.acquire(g.p.String(), g.profile.Memory)
	if err != nil {
		return nil, err
	}
	call, err := g.h.broker.BeginGuest(ctx, g.p, broker, target)
	if err != nil {
		release()
		return nil, err
	}
	return &Invocation{g: g, call: call, release: release}, nil
}

// ID returns the decision id of the run.
func (i *Invocation) ID() string { return i.call.ID() }

// Run runs the instance (see Guest.Run) under the gate call's context, so
// that a revocation of the principal stops it at once, and ends the call
// with the outcome.
func (i *Invocation) Run(o RunOptions) (*Result, error) {
	if !i.ran.CompareAndSwap(false, true) {
		return nil, airlock.Errorf(airlock.CodeInternal, airlock.ReasonNone, "wasmhost: an invocation run twice")
	}
	defer i.release()
	res, err := i.g.run(i.call.Context(), o)
	if err := i.call.End(err); err != nil {
		return nil, err
	}
	return res, nil
}

func (g *Guest) run(ctx context.Context, o RunOptions) (*Result, error) {
	start := time.Now()
	stdout := &cappedWriter{w: o.Stdout, n: orDefault(o.MaxStdout, DefaultMaxStdout)}
	stderr := &cappedWriter{w: o.Stderr, n: orDefault(o.MaxStderr, DefaultMaxStderr)}
	stdin := o.Stdin
	if stdin == nil {
		stdin = eofReader{}
	}
	mem := &cappedAllocator{limit: uint64(g.profile.Memory)}
	inv := &invocation{h: g.h, p: g.p}
	dctx, cancel := context.WithTimeout(ctx, g.profile.Deadline)
	defer cancel()
	rctx := experimental.WithMemoryAllocator(context.WithValue(dctx, invocationKey{}, inv), mem)

	mc := wazero.NewModuleConfig().
		WithName(""). // anonymous: instances of one module may run at once
		WithArgs(append([]string{g.name}, o.Args...)...).
		WithStdin(stdin).WithStdout(stdout).WithStderr(stderr).
		WithSysWalltime().WithSysNanotime().WithSysNanosleep().
		WithRandSource(rand.Reader).
		WithStartFunctions() // _start is called below, once the instance exists
	mod, err := g.h.runtimeOf(g).InstantiateModule(rctx, g.compiled, mc)
	if err != nil {
		return nil, g.classify(ctx, dctx, mem, err)
	}
	defer mod.Close(context.WithoutCancel(ctx))
	if mem.exceeded {
		return nil, g.memErr(mem)
	}
	_, err = mod.ExportedFunction("_start").Call(rctx)
	res := &Result{Calls: inv.calls, StdoutTruncated: stdout.truncated, StderrTruncated: stderr.truncated, Elapsed: time.Since(start)}
	var exit *sys.ExitError
	switch {
	case err == nil:
		return res, nil
	case mem.exceeded:
		return nil, g.memErr(mem)
	case errors.As(err, &exit) && exit.ExitCode() != sys.ExitCodeDeadlineExceeded && exit.ExitCode() != sys.ExitCodeContextCanceled:
		res.ExitCode = exit.ExitCode()
		return res, nil
	}
	return nil, g.classify(ctx, dctx, mem, err)
}

func (h *Host) runtimeOf(g *Guest) wazero.Runtime {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.runtimes[grantKey(g.profile)].rt
}

func (g *Guest) memErr(mem *cappedAllocator) error {
	return airlock.Errorf(airlock.CodeTooLarge, airlock.ReasonMemoryLimit, "wasmhost: %s asked for %d bytes of memory; profile %s allows %d",
		g.name, mem.requested, g.profile.Name, g.profile.Memory)
}

// classify turns a failed instantiation or call into the vocabulary.
func (g *Guest) classify(ctx, dctx context.Context, mem *cappedAllocator, err error) error {
	switch {
	case mem.exceeded:
		return g.memErr(mem)
	case ctx.Err() != nil:
		return airlock.Errorf(airlock.CodeTimeout, airlock.ReasonOf(ctx.Err()), "wasmhost: %s stopped: %w", g.name, ctx.Err())
	case dctx.Err() != nil:
		return airlock.Errorf(airlock.CodeTimeout, airlock.ReasonCPUDeadline, "wasmhost: %s stopped at its deadline of %s (profile %s)", g.name, g.profile.Deadline, g.profile.Name)
	}
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		return airlock.Errorf(airlock.CodeUpstream, airlock.ReasonTrap, "wasmhost: %s exited with code %d during instantiation", g.name, exit.ExitCode())
	}
	return airlock.Errorf(airlock.CodeUpstream, airlock.ReasonTrap, "wasmhost: %s: %v", g.name, err)
}

func orDefault(v, d int64) int64 {
	if v > 0 {
		return v
	}
	return d
}

// cappedWriter passes at most n bytes to w and drops the rest, so that a
// chatty guest neither fails nor fills the host's memory.
type cappedWriter struct {
	w         io.Writer
	n         int64
	truncated bool
	err       error
}

func (c *cappedWriter) Write(p []byte) (int, error) {
	keep := p
	if int64(len(keep)) > c.n {
		keep = keep[:c.n]
		c.truncated = true
	}
	c.n -= int64(len(keep))
	if c.w != nil && len(keep) > 0 && c.err == nil {
		_, c.err = c.w.Write(keep)
	}
	return len(p), nil
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }
