package wasmhost

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

// ModuleName is the import module of the Airlock ABI.
const ModuleName = "airlock"

// The imported functions of the ABI (docs/wasm-abi.md).
const (
	FuncResultRead  = "result_read"
	FuncLastError   = "last_error"
	FuncBrowseFetch = "browse_fetch"
	FuncHTTPRequest = "http_request"
	FuncHTTPGetMany = "http_get_many"
	FuncTCP         = "tcp"
	FuncUDP         = "udp"
	FuncTLS         = "tls"
	FuncSecretSign  = "secret_sign"
	FuncRoute       = "route"
)

// grants maps each import to the capability that links it; "" is linked for
// every profile, compute included.
var grants = map[string]airlock.Capability{
	FuncResultRead:  "",
	FuncLastError:   "",
	FuncBrowseFetch: airlock.CapabilityBrowse,
	FuncHTTPRequest: airlock.CapabilityHTTP,
	FuncHTTPGetMany: airlock.CapabilityParallel,
	FuncTCP:         airlock.CapabilityTCP,
	FuncUDP:         airlock.CapabilityUDP,
	FuncTLS:         airlock.CapabilityTLS,
	FuncSecretSign:  airlock.CapabilitySecrets,
	FuncRoute:       airlock.CapabilityRoutes,
}

// Imports returns the names of the airlock functions a profile links, sorted.
func Imports(p engine.GuestProfile) []string {
	var out []string
	for name, c := range grants {
		if c == "" || p.Has(c) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// checkImportSection runs checkImports on the import section read from the
// binary, before compilation. A binary it cannot read is left to the
// compiler.
func checkImportSection(wasm []byte, p engine.GuestProfile) error {
	imps, err := readImports(wasm)
	if err != nil {
		return nil
	}
	for _, im := range imps {
		if im.kind != 0 {
			return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonUnknownImport, "%s.%s: only functions can be imported (kind %d)", cut(im.module, 64), cut(im.name, 64), im.kind)
		}
		if err := checkImport(im.module, im.name, p); err != nil {
			return err
		}
	}
	return nil
}

// checkImports compares a module's imported functions with the grant. Only
// the airlock module (the granted functions) and WASI preview 1 are
// provided; anything else would fail to link, and wazero's own error would
// not say which import is at fault.
func checkImports(defs []api.FunctionDefinition, p engine.GuestProfile) error {
	for _, d := range defs {
		mod, name, ok := d.Import()
		if !ok {
			continue
		}
		if err := checkImport(mod, name, p); err != nil {
			return err
		}
	}
	return nil
}

func checkImport(mod, name string, p engine.GuestProfile) error {
	switch mod {
	case wasi_snapshot_preview1.ModuleName:
		return nil
	case ModuleName:
		c, known := grants[name]
		if !known {
			return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonUnknownImport, "%s.%s is not a function of the Airlock ABI", mod, cut(name, 64))
		}
		if c != "" && !p.Has(c) {
			err := airlock.Errorf(airlock.CodeDenied, airlock.ReasonCapability, "%s.%s is not granted by profile %s", mod, name, p.Name)
			err.Hint = fmt.Sprintf("run the guest with a profile that grants %s: --profile NAME (network grants http and browse, posix also parallel and browser), or set the tenant's profile in the config", c)
			return err
		}
		return nil
	}
	return airlock.Errorf(airlock.CodeInvalid, airlock.ReasonUnknownImport, "%s.%s: module %q is not provided (only %s and %s)",
		cut(mod, 64), cut(name, 64), cut(mod, 64), ModuleName, wasi_snapshot_preview1.ModuleName)
}

// grantKey names a grant set: the sorted imports it links.
func grantKey(p engine.GuestProfile) string { return strings.Join(Imports(p), ",") }

// cut caps a guest-supplied string before it reaches an error, a log or
// the audit trail.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("%s…(%d bytes)", s[:n], len(s))
}
