package sandbox

import (
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/leakcheck"
)

// TestMain fails the package when a Run leaves a goroutine behind (the
// control socket's reader, the Outside server, the waiter).
func TestMain(m *testing.M) { os.Exit(leakcheck.Main(m, "sandbox", leakcheck.Options{})) }

func TestProxyEnv(t *testing.T) {
	in := []string{"PATH=/usr/bin", "http_proxy=http://evil:1", "HTTPS_PROXY=http://evil:2", "No_Proxy=site.test",
		"all_proxy=socks5://evil:3", "GIT_PROXY_COMMAND=nc", "HOME=/home/x"}
	tests := []struct {
		name  string
		socks bool
		all   string
	}{
		{"http", false, "http://127.0.0.1:3128"},
		{"socks", true, "socks5h://127.0.0.1:3128"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ProxyEnv(in, 3128, tt.socks)
			want := []string{"PATH=/usr/bin", "HOME=/home/x",
				"HTTP_PROXY=http://127.0.0.1:3128", "http_proxy=http://127.0.0.1:3128",
				"HTTPS_PROXY=http://127.0.0.1:3128", "https_proxy=http://127.0.0.1:3128",
				"ALL_PROXY=" + tt.all, "all_proxy=" + tt.all, "NO_PROXY=", "no_proxy="}
			if !slices.Equal(got, want) {
				t.Errorf("ProxyEnv:\ngot  %q\nwant %q", got, want)
			}
		})
	}
}

func TestErrorsClassify(t *testing.T) {
	err := error(&UnavailableError{Op: "user namespace", Err: errors.New("operation not permitted")})
	if airlock.CodeOf(err) != airlock.CodeUnavailable || airlock.ReasonOf(err) != airlock.ReasonSandbox || airlock.HintOf(err) == "" {
		t.Errorf("UnavailableError: %s %s %q", airlock.CodeOf(err), airlock.ReasonOf(err), airlock.HintOf(err))
	}
	var st interface{ ExitStatus() int }
	if err := error(&StartError{Err: errors.New("no such file")}); !errors.As(err, &st) || st.ExitStatus() != 127 {
		t.Errorf("StartError: %v", err)
	}
}

func TestBaseEnv(t *testing.T) {
	in := []string{"PATH=/usr/bin", "HOME=/home/x", "USER=x", "LOGNAME=x", "LANG=C.UTF-8", "LC_ALL=C", "LC_TIME=en_GB",
		"TERM=xterm", "TZ=UTC", "SHELL=/bin/sh", "PWD=/w", "TMPDIR=/tmp/x",
		"BRAVE_SEARCH_API_KEY=k", "AWS_SECRET_ACCESS_KEY=k", "AIRLOCK_TOKEN=t", "LD_PRELOAD=/x.so", "PATHX=1", "path=/x", "HOME"}
	want := in[:12]
	if got := BaseEnv(in); !slices.Equal(got, want) {
		t.Errorf("BaseEnv:\ngot  %q\nwant %q", got, want)
	}
}
