package cluster

import (
	"bufio"
	"io"
	"maps"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStopEndsTheGroup starts a shell that forks two sleeping children
// and checks that stop ends them all, by process group, and that Verify
// then finds the group empty.
func TestStopEndsTheGroup(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 300 & sleep 300 & echo started; wait")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p, err := start("sh", cmd)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "started\n" {
		t.Fatalf("read %q, %v", line, err)
	}
	if err := syscall.Kill(-p.pid, 0); err != nil {
		t.Fatalf("process group %d is not running: %v", p.pid, err)
	}
	p.stop(5 * time.Second)
	if err := Verify(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(-p.pid, 0); err != syscall.ESRCH {
		t.Fatalf("kill(-%d, 0) after stop = %v, want ESRCH", p.pid, err)
	}
}

// TestVerifyReportsARunningProcess checks that Verify does not pass while
// a process it started is still running, and that StopAll ends it.
func TestVerifyReportsARunningProcess(t *testing.T) {
	if _, err := start("sleep", exec.Command("sleep", "300")); err != nil {
		t.Fatal(err)
	}
	if err := Verify(); err == nil || !strings.Contains(err.Error(), "was never stopped") {
		t.Fatalf("Verify with a running process = %v, want an error", err)
	}
	StopAll()
	if err := Verify(); err != nil {
		t.Fatal(err)
	}
}

// TestEtcd builds etcd, starts it, compacts it and stops it.
func TestEtcd(t *testing.T) {
	ctx := t.Context()
	bin, err := goTool(ctx, etcdPackage)
	if err != nil {
		t.Fatal(err)
	}
	e, err := StartEtcd(ctx, bin, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Stop()
	rev1, err := e.Compact(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Compacting again at the same revision is an error to etcd; a put
	// moves the revision on.
	if err := e.post(ctx, "/v3/kv/put", `{"key":"YQ==","value":"Yg=="}`, nil); err != nil {
		t.Fatal(err)
	}
	rev2, err := e.Compact(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rev2 <= rev1 {
		t.Errorf("second compaction at revision %d, want after %d", rev2, rev1)
	}
	e.Stop()
	if err := Verify(); err != nil {
		t.Fatal(err)
	}
}

// TestProxy checks that the proxy forwards, that Cut ends a connection,
// and that Hold keeps a new connection from reaching the server until
// Release.
func TestProxy(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	reached := make(chan struct{}, 10)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			reached <- struct{}{}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	p, err := NewProxy(l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	echo := func(c net.Conn) error {
		if _, err := c.Write([]byte("x")); err != nil {
			return err
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		b := make([]byte, 1)
		_, err := io.ReadFull(c, b)
		return err
	}
	c, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := echo(c); err != nil {
		t.Fatalf("echo through the proxy: %v", err)
	}
	<-reached
	p.Cut()
	if err := echo(c); err == nil {
		t.Fatal("echo after Cut succeeded, want the connection closed")
	}

	p.Hold()
	c2, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	select {
	case <-reached:
		t.Fatal("a held connection reached the server")
	case <-time.After(200 * time.Millisecond):
	}
	p.Release()
	if err := echo(c2); err != nil {
		t.Fatalf("echo after Release: %v", err)
	}
	if got := p.Accepted(); got != 2 {
		t.Errorf("Accepted() = %d, want 2", got)
	}
}

// TestParseRequests reads rest_client_requests_total as
// kube-controller-manager serves it, summing over hosts and skipping
// other metrics.
func TestParseRequests(t *testing.T) {
	body := `# HELP rest_client_requests_total [ALPHA] Number of HTTP requests, partitioned by status code, method, and host.
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",host="127.0.0.1:40001",method="GET"} 12
rest_client_requests_total{code="200",host="127.0.0.1:40001",method="PUT"} 97
rest_client_requests_total{code="200",host="[::1]:40001",method="PUT"} 3
rest_client_requests_total{code="409",host="127.0.0.1:40001",method="PUT"} 14
rest_client_request_retries_total{code="409",host="127.0.0.1:40001",verb="PUT"} 5
`
	got, err := parseRequests(body)
	if err != nil {
		t.Fatal(err)
	}
	want := map[Request]int64{{"GET", "200"}: 12, {"PUT", "200"}: 100, {"PUT", "409"}: 14}
	if !maps.Equal(got, want) {
		t.Errorf("parseRequests = %v, want %v", got, want)
	}
	if _, err := parseRequests(`rest_client_requests_total{code="200",method="PUT"} x`); err == nil {
		t.Error("parseRequests of a value that is no number: no error")
	}
}
