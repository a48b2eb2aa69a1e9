package cluster

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ControllerManager is a kube-controller-manager started by
// [StartControllerManager], serving its health and metrics endpoints over
// HTTPS on 127.0.0.1.
type ControllerManager struct {
	// Host is https://127.0.0.1:port, the secure port of its health
	// and metrics endpoints.
	Host string

	logPath string
	client  *http.Client
	proc    *process
}

// ControllerManagerOptions configures [StartControllerManager].
type ControllerManagerOptions struct {
	// Controllers are the controllers to run, by their names in
	// kube-controller-manager's --controllers flag. Defaults to
	// resourcequota-controller alone.
	Controllers []string
	// Args are further kube-controller-manager flags, such as
	// --concurrent-resource-quota-syncs=10.
	Args []string
}

// StartControllerManager starts kube-controller-manager from bin against
// api, with its files in dir, and waits until its /healthz answers ok.
//
// It runs only the controllers of opts (the ResourceQuota controller by
// default), with every other setting at kube-controller-manager's
// defaults (5 concurrent quota syncs, a full quota resync every 5
// minutes, 20 requests a second to the API server with bursts of 30),
// without leader election, as api's system:masters user. It serves its
// secure port on 127.0.0.1 with a certificate issued by api's CA, and
// lets anyone read /metrics there, as well as the health endpoints, so
// that [ControllerManager.Requests] needs no credentials: nothing but
// this machine's loopback reaches it.
//
// The controller manager acts on the whole cluster: while its
// ResourceQuota controller runs, it writes the status of every
// ResourceQuota, including those another controller keeps, and while
// its clusterrole-aggregation-controller runs, it keeps the rules of
// every ClusterRole with an aggregation rule, view and admin among them.
func StartControllerManager(ctx context.Context, bin string, api *APIServer, dir string, opts ControllerManagerOptions) (*ControllerManager, error) {
	if len(opts.Controllers) == 0 {
		opts.Controllers = []string{"resourcequota-controller"}
	}
	dir = filepath.Join(dir, "kube-controller-manager")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	certPEM, keyPEM, err := api.CA.Issue("localhost")
	if err != nil {
		return nil, err
	}
	for name, data := range map[string][]byte{"serving.crt": certPEM, "serving.key": keyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := api.Kubeconfig(kubeconfig); err != nil {
		return nil, err
	}
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--controllers=" + strings.Join(opts.Controllers, ","),
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(ports[0]),
		"--tls-cert-file=" + filepath.Join(dir, "serving.crt"),
		"--tls-private-key-file=" + filepath.Join(dir, "serving.key"),
		"--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
	}
	args = append(args, opts.Args...)
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(api.CA.PEM) {
		return nil, errors.New("cluster: bad CA certificate")
	}
	c := &ControllerManager{
		Host:    "https://127.0.0.1:" + strconv.Itoa(ports[0]),
		logPath: filepath.Join(dir, "kube-controller-manager.log"),
		client: &http.Client{
			Timeout:   5 * time.Second,
			Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
		},
	}
	p, err := startLogged("kube-controller-manager", bin, c.logPath, args)
	if err != nil {
		return nil, err
	}
	err = waitReady(ctx, p, c.logPath, time.Minute, func() error {
		body, err := c.get(ctx, "/healthz")
		if err == nil && body != "ok" {
			err = fmt.Errorf("/healthz: %s", body)
		}
		return err
	})
	if err != nil {
		p.stop(5 * time.Second)
		return nil, err
	}
	c.proc = p
	return c, nil
}

// Stop stops the controller manager and waits for it to exit.
func (c *ControllerManager) Stop() { c.proc.stop(10 * time.Second) }

// Pid returns the controller manager's process id.
func (c *ControllerManager) Pid() int { return c.proc.pid }

// Exited reports whether the controller manager has exited, and how.
func (c *ControllerManager) Exited() (bool, error) { return c.proc.exited() }

// Log returns the end of the controller manager's log, for a message.
func (c *ControllerManager) Log() string { return tail(c.logPath) }

// Request is a kind of request a client makes: its method and the status
// code it was answered with ("PUT", "409").
type Request struct {
	Method, Code string
}

// Requests returns how many requests the controller manager's clients
// have made to the API server so far, by method and status code, from its
// rest_client_requests_total metric. With the ResourceQuota controller
// alone, its only PUTs are quota status writes.
func (c *ControllerManager) Requests(ctx context.Context) (map[Request]int64, error) {
	body, err := c.get(ctx, "/metrics")
	if err != nil {
		return nil, fmt.Errorf("cluster: kube-controller-manager: %w", err)
	}
	return parseRequests(body)
}

// parseRequests sums the samples of rest_client_requests_total in body,
// the Prometheus text format, by method and code, over hosts.
func parseRequests(body string) (map[Request]int64, error) {
	const metric = "rest_client_requests_total{"
	n := map[Request]int64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), metric)
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok {
			return nil, fmt.Errorf("cluster: kube-controller-manager metric %q: no value", sc.Text())
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return nil, fmt.Errorf("cluster: kube-controller-manager metric %q: %w", sc.Text(), err)
		}
		var r Request
		// The labels are code, host and method, none of whose values
		// holds a comma or a quote.
		for l := range strings.SplitSeq(labels, ",") {
			name, quoted, _ := strings.Cut(l, "=")
			switch name {
			case "method":
				r.Method = strings.Trim(quoted, `"`)
			case "code":
				r.Code = strings.Trim(quoted, `"`)
			}
		}
		n[r] += int64(v)
	}
	return n, sc.Err()
}

// get returns the body of path, or an error when the answer is not 200.
func (c *ControllerManager) get(ctx context.Context, path string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Host+path, nil)
	if err != nil {
		return "", err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %d %s", path, resp.StatusCode, body)
	}
	return string(body), nil
}
