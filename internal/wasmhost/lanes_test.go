package wasmhost_test

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/engine"
)

func TestLanes(t *testing.T) {
	t.Parallel() // builds or compiles a guest: overlaps the others
	var mu sync.Mutex
	var auth, sig string
	saw := func() (string, string) {
		mu.Lock()
		defer mu.Unlock()
		return auth, sig
	}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth, sig = r.Header.Get("Authorization"), r.Header.Get("X-Signature")
		mu.Unlock()
		w.Write([]byte(`{"items":[1,2,3]} echo:` + r.Header.Get("Authorization")))
	}))
	defer api.Close()

	// A line-protocol server: answers PING with PONG.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				if line == "PING\r\n" {
					c.Write([]byte("+PONG\r\n"))
				}
			}()
		}
	}()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	go func() {
		buf := make([]byte, 1500)
		for {
			n, addr, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo(append([]byte("echo:"), buf[:n]...), addr)
		}
	}()

	cfg := engine.Config{
		Tenants: map[string]engine.TenantConfig{"posix": {Profile: "posix", Exceptions: []string{"127.0.0.1"},
			Secrets: map[string]engine.SecretRef{"k": {Env: "SIGNING_KEY"}}, Routes: []string{"api"}}},
		Routes: map[string]engine.RouteConfig{"api": {BaseURL: api.URL, Header: "Authorization", ValueEnv: "API_TOKEN",
			Prefix: "Bearer ", Methods: []string{"GET"}, PathPrefix: "/v1"}},
	}
	env := map[string]string{"SIGNING_KEY": "key-the-guest-never-sees", "API_TOKEN": "tok-secret"}
	en := newEngine(t, cfg, engine.WithGetenv(func(k string) string { return env[k] }))
	h := newHost(t, en)

	t.Run("tcp", func(t *testing.T) {
		lines := probe(t, h, "posix", "tcp", "127.0.0.1", strconv.Itoa(ln.Addr().(*net.TCPAddr).Port), "PING\r\n")
		if len(lines) != 1 || lines[0].Error != nil || string(lines[0].OK) != `"+PONG\r\n"` {
			t.Fatalf("tcp: %+v %s", lines, lines[0].OK)
		}
	})
	t.Run("udp", func(t *testing.T) {
		lines := probe(t, h, "posix", "udp", "127.0.0.1", strconv.Itoa(pc.LocalAddr().(*net.UDPAddr).Port), "hi")
		if len(lines) != 1 || lines[0].Error != nil || string(lines[0].OK) != `"echo:hi"` {
			t.Fatalf("udp: %+v", lines)
		}
	})
	t.Run("tls to a plain server fails as upstream, not denied", func(t *testing.T) {
		lines := probe(t, h, "posix", "tls", "127.0.0.1", strconv.Itoa(ln.Addr().(*net.TCPAddr).Port), "PING\r\n")
		if len(lines) != 1 || lines[0].Error == nil || lines[0].Error.Code == airlock.CodeDenied {
			t.Fatalf("tls: %+v", lines)
		}
	})
	t.Run("sign", func(t *testing.T) {
		lines := probe(t, h, "posix", "sign", "k", "payload")
		m := hmac.New(sha256.New, []byte(env["SIGNING_KEY"]))
		m.Write([]byte("payload"))
		want, _ := json.Marshal(hex.EncodeToString(m.Sum(nil)))
		if len(lines) != 1 || lines[0].Error != nil || string(lines[0].OK) != string(want) {
			t.Fatalf("sign: %+v", lines)
		}
		lines = probe(t, h, "posix", "sign", "nope", "payload")
		if lines[0].Error == nil || lines[0].Error.Code != airlock.CodeNotFound {
			t.Fatalf("unknown secret: %+v", lines)
		}
	})
	t.Run("route", func(t *testing.T) {
		lines := probe(t, h, "posix", "route", "api", "GET", "/v1/items")
		var ok struct {
			Status int
			Body   string
		}
		if len(lines) != 1 || lines[0].Error != nil || json.Unmarshal(lines[0].OK, &ok) != nil {
			t.Fatalf("route: %+v", lines)
		}
		if sawAuth, _ := saw(); sawAuth != "Bearer tok-secret" || ok.Body != `{"items":[1,2,3]} echo:Bearer [REDACTED]` {
			t.Fatalf("server saw %q, guest got %q", sawAuth, ok.Body)
		}
		// The API client example: signs with a secret it cannot read, calls
		// the route with a credential it never sees.
		o := run(t, h, "posix", guestWasm(t, "examples/guests/apiclient"), "api", "/v1/items", "k")
		if o.err != nil || o.res.ExitCode != 0 {
			t.Fatalf("apiclient: %v %+v %s", o.err, o.res, o.stderr)
		}
		m := hmac.New(sha256.New, []byte(env["SIGNING_KEY"]))
		m.Write([]byte("GET /v1/items"))
		sawAuth, sawSig := saw()
		if o.stdout != "200 {\"items\":[1,2,3]} echo:Bearer [REDACTED]\n" || sawAuth != "Bearer tok-secret" || sawSig != hex.EncodeToString(m.Sum(nil)) {
			t.Fatalf("apiclient output %q, server saw %q and signature %q", o.stdout, sawAuth, sawSig)
		}
		if strings.Contains(o.stdout, "tok-secret") {
			t.Fatalf("the credential reached the guest: %q", o.stdout)
		}
		lines = probe(t, h, "posix", "route", "api", "POST", "/v1/items")
		if lines[0].Error == nil || lines[0].Error.Code != airlock.CodeDenied {
			t.Fatalf("POST on a GET route: %+v", lines)
		}
	})
}

func TestGateAppliesToGuestCalls(t *testing.T) {
	cfg := engine.Config{Tenants: map[string]engine.TenantConfig{
		"posix": {Profile: "posix", Secrets: map[string]engine.SecretRef{"k": {Env: "K"}}},
		// Burst 4: loading the guest and running it are calls too, then
		// two signs.
		"slow": {Profile: "posix", Rate: 0.001, Burst: 4, Secrets: map[string]engine.SecretRef{"k": {Env: "K"}}},
	}}
	en := newEngine(t, cfg, engine.WithGetenv(func(k string) string {
		if k == "K" {
			return "key"
		}
		return ""
	}))
	h := newHost(t, en)

	t.Run("rate limit", func(t *testing.T) {
		lines := probe(t, h, "slow", "loop-sign", "3")
		if len(lines) != 1 || lines[0].Error == nil || lines[0].Error.Code != airlock.CodeRateLimited || lines[0].Error.Reason != "tenant_rate" {
			t.Fatalf("third sign of a burst of 2: %+v", lines)
		}
	})
	t.Run("oversized guest string refused before the engine", func(t *testing.T) {
		long := "http://example.com/" + strings.Repeat("a", 9000)
		lines := probe(t, h, "posix", "fetch", long)
		if len(lines) != 1 || lines[0].Error == nil || lines[0].Error.Code != airlock.CodeTooLarge || lines[0].Error.DecisionID != "" {
			t.Fatalf("9 KB URL: %+v", lines)
		}
	})
	t.Run("revocation", func(t *testing.T) {
		if err := en.Revoke(context.Background(), "posix", "test"); err != nil {
			t.Fatal(err)
		}
		// A revoked principal's guest is not even loaded.
		o := run(t, h, "posix", testGuest(t, "probe"), "sign", "k", "x")
		wantCode(t, o.err, airlock.CodeRevoked, "revoked")
		if o.res != nil || o.stdout != "" {
			t.Fatalf("the guest ran: %+v %q", o.res, o.stdout)
		}
	})
}
