package gate

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/egress"
)

// TestBuiltinProfiles pins the profile table of ARCHITECTURE.md.
func TestBuiltinProfiles(t *testing.T) {
	minimal := []airlock.Capability{"tcp", "udp", "tls", "secrets"}
	network := append(slices.Clone(minimal), "http", "browse", "routes")
	posix := append(slices.Clone(network), "parallel", "browser")
	tests := []struct {
		name     string
		caps     []airlock.Capability
		memory   int64
		deadline time.Duration
	}{
		{name: ProfileCompute, caps: nil, memory: 64 << 20, deadline: 5 * time.Second},
		{name: ProfileMinimal, caps: minimal, memory: 64 << 20, deadline: 5 * time.Second},
		{name: ProfileNetwork, caps: network, memory: 128 << 20, deadline: 30 * time.Second},
		{name: ProfilePosix, caps: posix, memory: 256 << 20, deadline: 60 * time.Second},
	}
	builtins := BuiltinProfiles()
	if len(builtins) != len(tests) {
		t.Errorf("BuiltinProfiles has %d profiles, want %d", len(builtins), len(tests))
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, ok := builtins[tt.name]
			if !ok {
				t.Fatalf("profile %q missing", tt.name)
			}
			if p.Name != tt.name {
				t.Errorf("Name = %q, want %q", p.Name, tt.name)
			}
			if diff := cmp.Diff(tt.caps, p.Capabilities()); diff != "" {
				t.Errorf("Capabilities() mismatch (-want +got):\n%s", diff)
			}
			for _, c := range airlock.Capabilities() {
				if got, want := p.Has(c), slices.Contains(tt.caps, c); got != want {
					t.Errorf("Has(%s) = %v, want %v", c, got, want)
				}
			}
			if p.Memory != tt.memory {
				t.Errorf("Memory = %d, want %d", p.Memory, tt.memory)
			}
			if p.Deadline != tt.deadline {
				t.Errorf("Deadline = %s, want %s", p.Deadline, tt.deadline)
			}
		})
	}
}

func TestProfileLanes(t *testing.T) {
	b := BuiltinProfiles()
	tests := []struct {
		profile Profile
		want    []egress.Lane
	}{
		{b[ProfileCompute], nil},
		{b[ProfileMinimal], []egress.Lane{egress.LaneTCP, egress.LaneUDP, egress.LaneTLS}},
		{b[ProfileNetwork], []egress.Lane{egress.LaneHTTP, egress.LaneTCP, egress.LaneUDP, egress.LaneTLS}},
		{b[ProfilePosix], []egress.Lane{egress.LaneHTTP, egress.LaneTCP, egress.LaneUDP, egress.LaneTLS}},
		{Profile{Name: "routes-only", Caps: caps(airlock.CapabilityRoutes)}, []egress.Lane{egress.LaneHTTP}},
		{Profile{Name: "udp-only", Caps: caps(airlock.CapabilityUDP)}, []egress.Lane{egress.LaneUDP}},
	}
	for _, tt := range tests {
		t.Run(tt.profile.Name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.profile.Lanes()); diff != "" {
				t.Errorf("Lanes() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestProfilesCustom(t *testing.T) {
	tests := []struct {
		name     string
		spec     map[string]ProfileSpec
		wantErr  airlock.Code
		check    string
		caps     []airlock.Capability
		memory   int64
		deadline time.Duration
	}{
		{
			name:  "signer",
			spec:  map[string]ProfileSpec{"signer": {Capabilities: []string{"secrets"}}},
			check: "signer", caps: []airlock.Capability{"secrets"}, memory: 64 << 20, deadline: 5 * time.Second,
		},
		{
			name:  "limits",
			spec:  map[string]ProfileSpec{"big": {Capabilities: []string{"http", "tcp"}, MemoryMiB: 512, Deadline: 2 * time.Minute}},
			check: "big", caps: []airlock.Capability{"tcp", "http"}, memory: 512 << 20, deadline: 2 * time.Minute,
		},
		{
			name:  "overrides a builtin",
			spec:  map[string]ProfileSpec{ProfileNetwork: {Capabilities: []string{"http"}}},
			check: ProfileNetwork, caps: []airlock.Capability{"http"}, memory: 64 << 20, deadline: 5 * time.Second,
		},
		{name: "unknown capability", spec: map[string]ProfileSpec{"bad": {Capabilities: []string{"sockets"}}}, wantErr: airlock.CodeInvalid},
		{name: "capability case", spec: map[string]ProfileSpec{"bad": {Capabilities: []string{"HTTP"}}}, wantErr: airlock.CodeInvalid},
		{name: "memory too large", spec: map[string]ProfileSpec{"bad": {MemoryMiB: 5000}}, wantErr: airlock.CodeInvalid},
		{name: "negative memory", spec: map[string]ProfileSpec{"bad": {MemoryMiB: -1}}, wantErr: airlock.CodeInvalid},
		{name: "negative deadline", spec: map[string]ProfileSpec{"bad": {Deadline: -time.Second}}, wantErr: airlock.CodeInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Profiles(tt.spec)
			if tt.wantErr != "" {
				if code := airlock.CodeOf(err); code != tt.wantErr {
					t.Fatalf("Profiles error = %v (code %q), want code %q", err, code, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Profiles: %v", err)
			}
			p := got[tt.check]
			if diff := cmp.Diff(tt.caps, p.Capabilities()); diff != "" {
				t.Errorf("Capabilities() mismatch (-want +got):\n%s", diff)
			}
			if p.Memory != tt.memory || p.Deadline != tt.deadline {
				t.Errorf("Memory, Deadline = %d, %s; want %d, %s", p.Memory, p.Deadline, tt.memory, tt.deadline)
			}
			for _, name := range []string{ProfileCompute, ProfileMinimal, ProfileNetwork, ProfilePosix} {
				if _, ok := got[name]; !ok {
					t.Errorf("builtin profile %q missing from Profiles()", name)
				}
			}
		})
	}
}

func TestLookupUnknownIsCompute(t *testing.T) {
	profiles := BuiltinProfiles()
	p, ok := Lookup(profiles, "no-such-profile")
	if ok {
		t.Error("Lookup of an unknown name reported ok")
	}
	if p.Name != ProfileCompute || len(p.Capabilities()) != 0 {
		t.Errorf("Lookup of an unknown name = %q with %v, want compute with no capabilities", p.Name, p.Capabilities())
	}
	if p, ok := Lookup(profiles, ProfileNetwork); !ok || p.Name != ProfileNetwork {
		t.Errorf("Lookup(network) = %q, %v; want network, true", p.Name, ok)
	}
}
