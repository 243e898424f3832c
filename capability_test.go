package airlock_test

import (
	"errors"
	"testing"

	"github.com/airlockhq/airlock"
)

func TestParseCapability(t *testing.T) {
	tests := []struct {
		in      string
		want    airlock.Capability
		wantErr bool
	}{
		{in: "tcp", want: airlock.CapabilityTCP},
		{in: "udp", want: airlock.CapabilityUDP},
		{in: "tls", want: airlock.CapabilityTLS},
		{in: "secrets", want: airlock.CapabilitySecrets},
		{in: "http", want: airlock.CapabilityHTTP},
		{in: "browse", want: airlock.CapabilityBrowse},
		{in: "routes", want: airlock.CapabilityRoutes},
		{in: "parallel", want: airlock.CapabilityParallel},
		{in: "browser", want: airlock.CapabilityBrowser},
		{in: "", wantErr: true},
		{in: "TCP", wantErr: true},
		{in: " tcp", wantErr: true},
		{in: "tcp ", wantErr: true},
		{in: "https", wantErr: true},
		{in: "posix", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := airlock.ParseCapability(tt.in)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("ParseCapability(%q) = %q, want an error", tt.in, got)
				}
				var ae *airlock.Error
				if !errors.As(err, &ae) || ae.Code != airlock.CodeInvalid || ae.Reason != airlock.ReasonUnknownCapability {
					t.Errorf("ParseCapability(%q) error = %#v, want code invalid, reason %s", tt.in, err, airlock.ReasonUnknownCapability)
				}
				if airlock.ExitCode(err) != 2 {
					t.Errorf("ExitCode = %d, want 2", airlock.ExitCode(err))
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseCapability(%q) error = %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("ParseCapability(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if got.String() != tt.in {
				t.Errorf("String() = %q, want %q", got.String(), tt.in)
			}
		})
	}
}

func TestCapabilities(t *testing.T) {
	want := []airlock.Capability{"tcp", "udp", "tls", "secrets", "http", "browse", "routes", "parallel", "browser"}
	got := airlock.Capabilities()
	if len(got) != len(want) {
		t.Fatalf("Capabilities() has %d entries, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("Capabilities()[%d] = %q, want %q", i, got[i], want[i])
		}
		if c, err := airlock.ParseCapability(string(got[i])); err != nil || c != got[i] {
			t.Errorf("ParseCapability(%q) = %q, %v; want it back", got[i], c, err)
		}
	}
	got[0] = "mutated"
	if airlock.Capabilities()[0] != airlock.CapabilityTCP {
		t.Error("Capabilities() shares its backing array with the caller")
	}
}
