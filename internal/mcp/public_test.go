package mcp

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

// TestToolErrorHidesAnswers: a tool refused because a name resolves into
// the floor says internal_address, in its text and its structured error,
// and carries neither the answer nor its class.
func TestToolErrorHidesAnswers(t *testing.T) {
	t.Parallel()
	cs := inMemory(t, newEngine(t, engine.Config{Egress: engine.EgressConfig{
		Resolve: map[string][]string{"internal.test": {"10.1.2.3"}, "loop.test": {"127.0.0.9"}}}}))
	for _, u := range []string{"http://internal.test/", "http://loop.test/x"} {
		res := call(t, cs, ToolFetch, map[string]any{"url": u})
		b, _ := json.Marshal(res.StructuredContent)
		out := text(res) + string(b)
		if !res.IsError || !strings.HasPrefix(text(res), "denied (internal_address): ") {
			t.Errorf("%s: IsError %v, text %q, want denied (internal_address)", u, res.IsError, text(res))
		}
		for _, leak := range []string{"10.1.2.3", "127.0.0.9", "private", "loopback"} {
			if strings.Contains(out, leak) {
				t.Errorf("%s: tool error carries %q: %s", u, leak, out)
			}
		}
		var body airlock.ErrorBody
		if err := json.Unmarshal(b, &body); err != nil || body.Error.Reason != "internal_address" {
			t.Errorf("%s: structured error %s (%v)", u, b, err)
		}
	}
}
