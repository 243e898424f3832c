// Package fleettest starts a real redis-server on a free loopback port for
// tests: no persistence, stopped when the test binary ends.
package fleettest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockhq/airlock/egress"
)

// Server is a running redis-server.
type Server struct {
	cmd  *exec.Cmd
	Addr string // 127.0.0.1:port
	dir  string
}

// URL is the server's redis:// URL for database db.
func (s *Server) URL(db int) string { return "redis://" + s.Addr + "/" + strconv.Itoa(db) }

// Start runs redis-server on a free loopback port, in a temporary
// directory, without persistence. It fails tb when the binary is missing
// (the test script installs Debian's redis-server).
func Start(tb testing.TB) *Server {
	tb.Helper()
	s, err := start()
	if err != nil {
		tb.Fatalf("redis-server: %v (apt-get install redis-server)", err)
	}
	tb.Cleanup(s.Stop)
	return s
}

var (
	sharedOnce sync.Once
	shared     *Server
	sharedErr  error
)

// Shared returns one server for the whole test binary; StopShared (from
// TestMain) stops it.
func Shared(tb testing.TB) *Server {
	tb.Helper()
	sharedOnce.Do(func() { shared, sharedErr = start() })
	if sharedErr != nil {
		tb.Fatalf("redis-server: %v (apt-get install redis-server)", sharedErr)
	}
	return shared
}

// StopShared stops the shared server, if it was started.
func StopShared() {
	if shared != nil {
		shared.Stop()
	}
}

func start() (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "airlock-redis-")
	if err != nil {
		return nil, err
	}
	for range 5 {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), dir: dir}
		s.cmd = exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", dir, "--protected-mode", "yes", "--loglevel", "warning")
		if err := s.cmd.Start(); err != nil { // its log goes to /dev/null
			return nil, err
		}
		if s.waitReady(5 * time.Second) {
			return s, nil
		}
		s.cmd.Process.Kill()
		s.cmd.Wait()
	}
	os.RemoveAll(dir)
	return nil, fmt.Errorf("did not start on a free port")
}

// waitReady pings the server until it answers PONG.
func (s *Server) waitReady(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if s.ping() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

func (s *Server) ping() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	c, err := egress.DialInfrastructure(ctx, "tcp", s.Addr)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "+PONG")
}

// Stop kills the server and removes its directory.
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
	}
	os.RemoveAll(s.dir)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// CPU returns the CPU time the server has used (INFO cpu: used_cpu_sys
// plus used_cpu_user), for benchmarks that report Redis's cost.
func (s *Server) CPU(tb testing.TB) time.Duration {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := egress.DialInfrastructure(ctx, "tcp", s.Addr)
	if err != nil {
		tb.Fatalf("redis INFO: %v", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("INFO cpu\r\n")); err != nil {
		tb.Fatalf("redis INFO: %v", err)
	}
	r := bufio.NewReader(c)
	head, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(head, "$") {
		tb.Fatalf("redis INFO: %q, %v", head, err)
	}
	var total float64
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			tb.Fatalf("redis INFO: %v", err)
		}
		line = strings.TrimSpace(line)
		if line == "" {
			break
		}
		for _, k := range []string{"used_cpu_sys:", "used_cpu_user:"} {
			if v, ok := strings.CutPrefix(line, k); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					tb.Fatalf("redis INFO: %q", line)
				}
				total += f
			}
		}
	}
	return time.Duration(total * float64(time.Second))
}
