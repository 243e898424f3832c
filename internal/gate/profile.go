package gate

import (
	"fmt"
	"sort"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
)

// Profile is a capability set plus the resource limits of WebAssembly
// guests. A capability not in the set is absent for the principal.
type Profile struct {
	Name     string
	Caps     map[airlock.Capability]bool
	Memory   int64         // guest memory cap in bytes
	Deadline time.Duration // guest wall-clock deadline
	// TunnelBytes and TunnelDuration cap each forward-proxy tunnel below
	// the proxy's own caps; 0: the proxy's alone.
	TunnelBytes    int64
	TunnelDuration time.Duration
}

// The built-in profile names.
const (
	ProfileCompute = "compute"
	ProfileMinimal = "minimal"
	ProfileNetwork = "network"
	ProfilePosix   = "posix"
)

const mib = 1 << 20

func caps(cs ...airlock.Capability) map[airlock.Capability]bool {
	m := make(map[airlock.Capability]bool, len(cs))
	for _, c := range cs {
		m[c] = true
	}
	return m
}

// BuiltinProfiles returns the four profiles of ARCHITECTURE.md.
func BuiltinProfiles() map[string]Profile {
	minimal := []airlock.Capability{airlock.CapabilityTCP, airlock.CapabilityUDP, airlock.CapabilityTLS, airlock.CapabilitySecrets}
	network := append(append([]airlock.Capability(nil), minimal...), airlock.CapabilityHTTP, airlock.CapabilityBrowse, airlock.CapabilityRoutes)
	posix := append(append([]airlock.Capability(nil), network...), airlock.CapabilityParallel, airlock.CapabilityBrowser)
	return map[string]Profile{
		ProfileCompute: {Name: ProfileCompute, Caps: caps(), Memory: 64 * mib, Deadline: 5 * time.Second},
		ProfileMinimal: {Name: ProfileMinimal, Caps: caps(minimal...), Memory: 64 * mib, Deadline: 5 * time.Second},
		ProfileNetwork: {Name: ProfileNetwork, Caps: caps(network...), Memory: 128 * mib, Deadline: 30 * time.Second},
		ProfilePosix:   {Name: ProfilePosix, Caps: caps(posix...), Memory: 256 * mib, Deadline: 60 * time.Second},
	}
}

// Has reports whether the profile grants c.
func (p Profile) Has(c airlock.Capability) bool { return p.Caps[c] }

// Capabilities lists the granted capabilities in the vocabulary's order.
func (p Profile) Capabilities() []airlock.Capability {
	var out []airlock.Capability
	for _, c := range airlock.Capabilities() {
		if p.Caps[c] {
			out = append(out, c)
		}
	}
	return out
}

// Lanes returns the egress lanes the profile's capabilities open: tcp, udp
// and tls for their capabilities, http for http, browse, routes and browser.
func (p Profile) Lanes() []egress.Lane {
	var out []egress.Lane
	if p.Has(airlock.CapabilityHTTP) || p.Has(airlock.CapabilityBrowse) || p.Has(airlock.CapabilityRoutes) || p.Has(airlock.CapabilityBrowser) {
		out = append(out, egress.LaneHTTP)
	}
	if p.Has(airlock.CapabilityTCP) {
		out = append(out, egress.LaneTCP)
	}
	if p.Has(airlock.CapabilityUDP) {
		out = append(out, egress.LaneUDP)
	}
	if p.Has(airlock.CapabilityTLS) {
		out = append(out, egress.LaneTLS)
	}
	return out
}

// ProfileSpec is a custom profile as configured.
type ProfileSpec struct {
	Capabilities   []string
	MemoryMiB      int
	Deadline       time.Duration
	TunnelBytes    int64
	TunnelDuration time.Duration
}

// Profiles builds the profile table: the built-ins plus custom ones, which
// may override a built-in by name. Unknown capability names are errors.
func Profiles(custom map[string]ProfileSpec) (map[string]Profile, error) {
	out := BuiltinProfiles()
	names := make([]string, 0, len(custom))
	for n := range custom {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		spec := custom[name]
		p := Profile{Name: name, Caps: caps(), Memory: 64 * mib, Deadline: 5 * time.Second}
		for _, s := range spec.Capabilities {
			c, err := airlock.ParseCapability(s)
			if err != nil {
				return nil, fmt.Errorf("profile %q: %w", name, err)
			}
			p.Caps[c] = true
		}
		if spec.MemoryMiB < 0 || spec.MemoryMiB > 4096 {
			return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonConfig, "profile %q: memory_mib %d out of range 1..4096", name, spec.MemoryMiB)
		}
		if spec.MemoryMiB > 0 {
			p.Memory = int64(spec.MemoryMiB) * mib
		}
		if spec.Deadline < 0 {
			return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonConfig, "profile %q: negative deadline", name)
		}
		if spec.Deadline > 0 {
			p.Deadline = spec.Deadline
		}
		if spec.TunnelBytes < 0 || spec.TunnelDuration < 0 {
			return nil, airlock.Errorf(airlock.CodeInvalid, airlock.ReasonConfig, "profile %q: negative tunnel cap", name)
		}
		p.TunnelBytes, p.TunnelDuration = spec.TunnelBytes, spec.TunnelDuration
		out[name] = p
	}
	return out, nil
}

// Lookup returns the named profile. At run time an unknown name resolves to
// compute (the safest), as ARCHITECTURE.md says; configuration loading
// refuses unknown names before that can happen.
func Lookup(profiles map[string]Profile, name string) (Profile, bool) {
	p, ok := profiles[name]
	if !ok {
		return profiles[ProfileCompute], false
	}
	return p, true
}
