package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestMCPStdioAnswersEveryRequest pipes the docs/mcp.md example, a
// tools/call just before EOF and a malformed line into `airlock mcp` run in
// process: every request read is answered before the command ends on EOF,
// the malformed line gets a JSON-RPC parse error (-32700, id null) and the
// server goes on, and the exit code is 0.
func TestMCPStdioAnswersEveryRequest(t *testing.T) {
	t.Parallel()
	srv := browseSite()
	defer srv.Close()
	lines := []string{
		// The docs/mcp.md example, as printf '%s\n' sends it.
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"sh","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"web_fetch","arguments":{"url":"` + srv.URL + `/last"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/list"`, // malformed: cut short
		`not json at all`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"web_fetch","arguments":{"url":"` + srv.URL + `/after"}}}`,
	}
	for _, tc := range []struct {
		name        string
		lines       []string
		ids         []string
		parseErrors int
	}{
		{"the docs example", lines[:3], []string{"1", "2"}, 0},
		{"a tools/call just before EOF", lines[:4], []string{"1", "2", "3"}, 0},
		{"malformed lines", lines, []string{"1", "2", "3", "5"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := invoke(t, context.Background(), strings.Join(tc.lines, "\n")+"\n",
				[]string{"mcp", "--data-dir", t.TempDir(), "--except", "127.0.0.1"})
			if r.code != 0 {
				t.Errorf("exit %d, want 0; stderr %q", r.code, r.stderr)
			}
			type reply struct {
				ID     any             `json:"id"`
				Result json.RawMessage `json:"result"`
				Error  *struct {
					Code int `json:"code"`
				} `json:"error"`
			}
			byID := map[string]reply{}
			var parseErrors int
			for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
				var m reply
				if err := json.Unmarshal([]byte(line), &m); err != nil {
					t.Fatalf("stdout line is not JSON: %q", line)
				}
				if m.ID == nil {
					if m.Error == nil || m.Error.Code != -32700 {
						t.Errorf("reply with id null that is not a parse error: %s", line)
					}
					parseErrors++
					continue
				}
				byID[strings.Trim(string(mustJSON(m.ID)), `"`)] = m
			}
			for _, id := range tc.ids {
				m, ok := byID[id]
				if !ok || m.Result == nil {
					t.Errorf("request %s: no result; stdout:\n%s", id, r.stdout)
				}
			}
			for id, want := range map[string]string{"3": "Page /last", "5": "Page /after"} {
				if m, ok := byID[id]; ok && !strings.Contains(string(m.Result), want) {
					t.Errorf("tools/call %s: %s", id, m.Result)
				}
			}
			if parseErrors != tc.parseErrors {
				t.Errorf("%d parse errors, want %d; stdout:\n%s", parseErrors, tc.parseErrors, r.stdout)
			}
		})
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
