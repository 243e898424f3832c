// Package wasmhost runs untrusted WebAssembly guests (WASI preview 1
// command modules) on wazero and gives them the network only as imported
// functions of the module "airlock", each fulfilled by a gated engine call.
//
// It owns: loading and compiling modules through one shared compilation
// cache; the import check that refuses a module importing a function its
// principal's profile does not grant, before anything is instantiated;
// the resource limits of one invocation (a linear-memory cap and a
// wall-clock deadline that stops a runaway guest); WASI without preopened
// directories or environment, with capped stdout and stderr; the budget
// of instances running at once (in total, per principal, and by the sum of
// their memory caps); the host functions of the ABI in docs/wasm-abi.md;
// and the server flip (Handler), where the host owns the listening socket
// and a fresh guest instance answers each request.
//
// It holds no policy: loading a module, each run and every host function
// are calls to the Broker (the engine), whose gate decides, rate-limits
// and audits them, and cancels a running instance when its principal is
// revoked. It never dials or resolves.
//
//	h, err := wasmhost.New(ctx, wasmhost.Config{Broker: en, CacheDir: dir})
//	g, err := h.Load(ctx, airlock.Principal{Tenant: "t", Instance: "job-1"}, "summarise.wasm", wasm)
//	res, err := g.Run(ctx, wasmhost.RunOptions{Args: []string{"https://example.com/"}, Stdout: os.Stdout})
package wasmhost
