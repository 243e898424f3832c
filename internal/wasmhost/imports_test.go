package wasmhost_test

import (
	"context"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/wasmhost"
)

// importing returns a minimal module that imports one function () -> ()
// as mod.name and does nothing else.
func importing(mod, name string) []byte {
	imp := []byte{1, byte(len(mod))}
	imp = append(imp, mod...)
	imp = append(imp, byte(len(name)))
	imp = append(imp, name...)
	imp = append(imp, 0x00, 0x00) // a function of type 0
	b := []byte{0x00, 'a', 's', 'm', 1, 0, 0, 0}
	b = append(b, 1, 4, 1, 0x60, 0, 0) // type section: () -> ()
	b = append(b, 2, byte(len(imp)))
	return append(b, imp...)
}

func TestImportCheck(t *testing.T) {
	en := newEngine(t, tenants("compute", "posix"))
	h := newHost(t, en)
	for _, tc := range []struct {
		tenant, mod, name string
		code              airlock.Code
		msg               string
	}{
		{"compute", "airlock", "tcp", airlock.CodeDenied, "airlock.tcp is not granted by profile compute"},
		{"compute", "airlock", "route", airlock.CodeDenied, "airlock.route is not granted by profile compute"},
		{"posix", "airlock", "exec", airlock.CodeInvalid, "airlock.exec is not a function of the Airlock ABI"},
		{"posix", "env", "socket", airlock.CodeInvalid, `env.socket: module "env" is not provided`},
		{"compute", "airlock", "last_error", "", ""},
		{"compute", "wasi_snapshot_preview1", "fd_write", "", ""},
	} {
		_, err := h.Load(context.Background(), airlock.Principal{Tenant: tc.tenant}, "m.wasm", importing(tc.mod, tc.name))
		if tc.code == "" {
			if err != nil {
				t.Errorf("%s.%s under %s: %v", tc.mod, tc.name, tc.tenant, err)
			}
			continue
		}
		if airlock.CodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s.%s under %s: %v; want %s %q", tc.mod, tc.name, tc.tenant, err, tc.code, tc.msg)
		}
	}
	// The import section is checked before compilation: a module that would
	// not even compile is refused for its ungranted import.
	broken := append(importing("airlock", "browse_fetch"), 10, 3, 1, 0xff, 0xff) // a code section of garbage
	_, err := h.Load(context.Background(), airlock.Principal{Tenant: "compute"}, "m.wasm", broken)
	if airlock.ReasonOf(err) != "capability" || !strings.Contains(err.Error(), "airlock.browse_fetch is not granted by profile compute") {
		t.Fatalf("broken module with an ungranted import: %v", err)
	}
	// The way out is another profile: the hint (shown by the CLI and the
	// API) says how to pick one.
	if h := airlock.HintOf(err); !strings.Contains(h, "--profile") || !strings.Contains(h, "browse") {
		t.Errorf("hint of an ungranted import = %q, want one naming --profile and the capability", h)
	}
	// ... and once granted, the compiler finds the garbage.
	if _, err := h.Load(context.Background(), airlock.Principal{Tenant: "posix"}, "m.wasm", broken); airlock.ReasonOf(err) != "module" {
		t.Fatalf("broken module: %v", err)
	}
	// Truncated sections are left to the compiler.
	if _, err := h.Load(context.Background(), airlock.Principal{Tenant: "compute"}, "m.wasm", importing("airlock", "tcp")[:20]); airlock.ReasonOf(err) != "module" {
		t.Fatalf("truncated module: %v", err)
	}
	// A module without _start loads but does not run.
	g, err := h.Load(context.Background(), airlock.Principal{Tenant: "compute"}, "m.wasm", importing("airlock", "last_error"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.Run(context.Background(), wasmhost.RunOptions{})
	if airlock.ReasonOf(err) != "no_start" {
		t.Fatalf("run without _start: %v", err)
	}
	// Garbage is invalid.
	if _, err := h.Load(context.Background(), airlock.Principal{Tenant: "compute"}, "x", []byte("not wasm")); airlock.CodeOf(err) != airlock.CodeInvalid {
		t.Fatalf("garbage: %v", err)
	}
	// An unknown tenant is denied.
	if _, err := h.Load(context.Background(), airlock.Principal{Tenant: "nobody"}, "x", importing("airlock", "last_error")); airlock.ReasonOf(err) != "unknown_tenant" {
		t.Fatalf("unknown tenant: %v", err)
	}
}
