package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
)

// Etcd is an etcd server started by [StartEtcd], on loopback.
type Etcd struct {
	// URL is the client URL, http://127.0.0.1:port.
	URL  string
	proc *process
	log  string
}

// StartEtcd starts etcd from bin with its data in dir and waits until it
// is healthy. It listens on 127.0.0.1 only, on free ports, and does not
// fsync: the data is thrown away with dir.
func StartEtcd(ctx context.Context, bin, dir string) (*Etcd, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	client := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peer := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	logPath := filepath.Join(dir, "etcd.log")
	args := []string{
		"--name=e2e",
		"--data-dir=" + filepath.Join(dir, "etcd-data"),
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=e2e=" + peer,
		"--unsafe-no-fsync",
		"--log-level=warn",
	}
	p, err := startLogged("etcd", bin, logPath, args)
	if err != nil {
		return nil, err
	}
	e := &Etcd{URL: client, proc: p, log: logPath}
	err = waitReady(ctx, p, logPath, 30*time.Second, func() error {
		resp, err := http.Get(client + "/health")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"health":"true"`) {
			return fmt.Errorf("etcd /health: %d %s", resp.StatusCode, body)
		}
		return nil
	})
	if err != nil {
		p.stop(5 * time.Second)
		return nil, err
	}
	return e, nil
}

// Stop stops etcd and waits for it to exit.
func (e *Etcd) Stop() { e.proc.stop(10 * time.Second) }

// Pid returns etcd's process id.
func (e *Etcd) Pid() int { return e.proc.pid }

// APIServer is a kube-apiserver started by [StartAPIServer], serving
// HTTPS on 127.0.0.1.
type APIServer struct {
	// Host is https://127.0.0.1:port.
	Host string
	// Port is the secure port.
	Port int
	// Token is a bearer token of a member of system:masters.
	Token string
	// CA issued the serving certificate.
	CA *CA

	bin, dir, logPath string
	args              []string
	proc              *process
}

// APIServerOptions configures [StartAPIServer].
type APIServerOptions struct {
	// Name tells the server's files and logs apart from another
	// server's. Defaults to "kube-apiserver".
	Name string
	// EtcdPrefix is the prefix of the server's keys in etcd; servers with
	// different prefixes on one etcd are separate clusters. Defaults to
	// /registry.
	EtcdPrefix string
	// Args are further kube-apiserver flags, such as --watch-cache=false.
	Args []string
	// NoResourceQuota turns kube-apiserver's ResourceQuota admission
	// plugin off, as on an API server that leaves quota to a webhook.
	NoResourceQuota bool
}

// StartAPIServer starts kube-apiserver from bin on etcd, with its files in
// dir, and waits until /readyz answers ok. It serves on 127.0.0.1 only, on
// a free port, with a serving certificate issued by ca; it authenticates
// one static token (a member of system:masters), signs service account
// tokens with a key made for it, runs the ResourceQuota admission plugin
// (on by default) but not ServiceAccount, which would require a token
// controller that does not run here, and does not reconcile the endpoints
// of the kubernetes service, which would point at loopback.
func StartAPIServer(ctx context.Context, bin string, etcd *Etcd, ca *CA, dir string, opts APIServerOptions) (*APIServer, error) {
	if opts.Name == "" {
		opts.Name = "kube-apiserver"
	}
	if opts.EtcdPrefix == "" {
		opts.EtcdPrefix = "/registry"
	}
	dir = filepath.Join(dir, opts.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	certPEM, keyPEM, err := ca.Issue("localhost")
	if err != nil {
		return nil, err
	}
	saPriv, saPub, err := signingKey()
	if err != nil {
		return nil, err
	}
	token := randomToken()
	files := map[string][]byte{
		"serving.crt": certPEM,
		"serving.key": keyPEM,
		"sa.key":      saPriv,
		"sa.pub":      saPub,
		"tokens.csv":  []byte(token + ",e2e-admin,e2e-admin-uid,\"system:masters\"\n"),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
	}
	args := []string{
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(ports[0]),
		"--tls-cert-file=" + filepath.Join(dir, "serving.crt"),
		"--tls-private-key-file=" + filepath.Join(dir, "serving.key"),
		"--token-auth-file=" + filepath.Join(dir, "tokens.csv"),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + filepath.Join(dir, "sa.pub"),
		"--service-account-signing-key-file=" + filepath.Join(dir, "sa.key"),
		"--service-cluster-ip-range=10.0.0.0/24",
		"--etcd-servers=" + etcd.URL,
		"--etcd-prefix=" + opts.EtcdPrefix,
		"--endpoint-reconciler-type=none",
		"--cert-dir=" + filepath.Join(dir, "certs"),
	}
	if opts.NoResourceQuota {
		args = append(args, "--disable-admission-plugins=ServiceAccount,ResourceQuota")
	} else {
		args = append(args, "--enable-admission-plugins=ResourceQuota", "--disable-admission-plugins=ServiceAccount")
	}
	args = append(args, opts.Args...)
	a := &APIServer{
		Host:    "https://127.0.0.1:" + strconv.Itoa(ports[0]),
		Port:    ports[0],
		Token:   token,
		CA:      ca,
		bin:     bin,
		dir:     dir,
		logPath: filepath.Join(dir, "kube-apiserver.log"),
		args:    args,
	}
	if err := a.start(ctx); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *APIServer) start(ctx context.Context) error {
	p, err := startLogged(filepath.Base(a.dir), a.bin, a.logPath, a.args)
	if err != nil {
		return err
	}
	client, err := a.httpClient()
	if err != nil {
		p.stop(0)
		return err
	}
	err = waitReady(ctx, p, a.logPath, 2*time.Minute, func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.Host+"/readyz", nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+a.Token)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz: %d %s", resp.StatusCode, body)
		}
		return nil
	})
	if err != nil {
		p.stop(5 * time.Second)
		return err
	}
	a.proc = p
	return nil
}

// Restart stops the server and starts it again with the same flags, on
// the same port, and waits until it is ready. Its caches start afresh.
func (a *APIServer) Restart(ctx context.Context) error {
	a.proc.stop(10 * time.Second)
	return a.start(ctx)
}

// Stop stops the server and waits for it to exit.
func (a *APIServer) Stop() {
	if a.proc != nil {
		a.proc.stop(10 * time.Second)
	}
}

// Pid returns the server's process id.
func (a *APIServer) Pid() int { return a.proc.pid }

// Config returns a client configuration for the server, as the
// system:masters user of its token.
func (a *APIServer) Config() *rest.Config { return a.ConfigAt(a.Host) }

// ConfigAt returns [APIServer.Config] with another host, such as a proxy
// in front of the server on 127.0.0.1, which the serving certificate
// also covers.
func (a *APIServer) ConfigAt(host string) *rest.Config {
	return &rest.Config{
		Host:            host,
		BearerToken:     a.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: a.CA.PEM},
		QPS:             -1, // no client-side rate limit: the tests make bursts
	}
}

// Kubeconfig writes a kubeconfig file for the server to path, for
// programs that take one.
func (a *APIServer) Kubeconfig(path string) error {
	return writeKubeconfig(path, a.Config())
}

func (a *APIServer) httpClient() (*http.Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(a.CA.PEM) {
		return nil, errors.New("cluster: bad CA certificate")
	}
	return &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
	}, nil
}

// startLogged starts bin with args, its output appended to logPath.
func startLogged(name, bin, logPath string, args []string) (*process, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	// The child has its own copy of the descriptor; ours is not needed
	// once it has started.
	defer f.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout = f
	cmd.Stderr = f
	return start(name, cmd)
}

// waitReady polls ready until it succeeds, the process exits, ctx ends or
// timeout passes. Polling is what there is: the servers have no way to
// say they are ready other than answering.
func waitReady(ctx context.Context, p *process, logPath string, timeout time.Duration, ready func() error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		if exited, err := p.exited(); exited {
			return fmt.Errorf("cluster: %s exited before it was ready (%v):\n%s", p.name, err, tail(logPath))
		}
		if last = ready(); last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster: %s not ready after %v: %v\n%s", p.name, timeout, last, tail(logPath))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: %s: %w", p.name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// tail returns the end of a log file, for an error message.
func tail(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	const n = 4000
	if len(data) > n {
		data = data[len(data)-n:]
	}
	return string(data)
}

// freePorts returns n ports on 127.0.0.1 that were free a moment ago. All
// are held open until all are chosen, so that they differ.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("cluster: free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Compact compacts etcd's history up to its current revision, physically,
// and returns that revision: any watch from an older revision then fails
// with "required revision has been compacted", which kube-apiserver
// reports as 410 Expired when it serves the watch from etcd. It goes
// through etcd's JSON gateway, so the tests need no etcd client.
func (e *Etcd) Compact(ctx context.Context) (int64, error) {
	var rng struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	// Any key will do: every response carries the store's revision.
	if err := e.post(ctx, "/v3/kv/range", `{"key":"AA=="}`, &rng); err != nil {
		return 0, err
	}
	rev, err := strconv.ParseInt(rng.Header.Revision, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cluster: etcd revision %q: %w", rng.Header.Revision, err)
	}
	body := fmt.Sprintf(`{"revision":%d,"physical":true}`, rev)
	if err := e.post(ctx, "/v3/kv/compaction", body, nil); err != nil {
		return 0, err
	}
	return rev, nil
}

func (e *Etcd) post(ctx context.Context, path, body string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL+path, strings.NewReader(body))
	if err != nil {
		return fmt.Errorf("cluster: etcd %s: %w", path, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("cluster: etcd %s: %w", path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("cluster: etcd %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("cluster: etcd %s: %d %s", path, resp.StatusCode, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("cluster: etcd %s: %w", path, err)
		}
	}
	return nil
}
