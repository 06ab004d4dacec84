// Package promtest starts a real Prometheus (the Debian package
// prometheus, installed by hack/test-deps.sh) for tests: on a free
// loopback port, with a temp data dir and a short scrape interval,
// scraping targets the test serves. The analysis and e2e tests share it.
package promtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// EnvBinary overrides where the prometheus binary is looked up.
const EnvBinary = "SLUICE_PROMETHEUS"

// Options configure a test Prometheus.
type Options struct {
	// ScrapeInterval defaults to 1s.
	ScrapeInterval time.Duration
	// Targets are host:port addresses scraped at /metrics.
	Targets []string
}

// Prometheus is a running Prometheus.
type Prometheus struct {
	// URL is the base URL, e.g. http://127.0.0.1:40123.
	URL string

	stopOnce sync.Once
	stopFn   func()
}

// Binary finds the prometheus executable: $SLUICE_PROMETHEUS, then PATH.
func Binary() (string, error) {
	if p := os.Getenv(EnvBinary); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("prometheus"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("prometheus binary not found: install the Debian package prometheus (run hack/test-deps.sh) or set %s", EnvBinary)
}

// Start runs a Prometheus until the test ends (or Stop). A missing binary
// fails the test: CI installs it, so skipping would hide a broken setup.
func Start(t testing.TB, opts Options) *Prometheus {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	if opts.ScrapeInterval <= 0 {
		opts.ScrapeInterval = time.Second
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, config(opts), 0o600); err != nil {
		t.Fatal(err)
	}
	// The port is picked, released and handed over, so another process can
	// take it in between: try a few times.
	var lastErr error
	for range 3 {
		p, err := start(t, bin, cfg, dir)
		if err == nil {
			return p
		}
		lastErr = err
	}
	t.Fatalf("start prometheus: %v", lastErr)
	return nil
}

func config(opts Options) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "global:\n  scrape_interval: %s\n  evaluation_interval: %s\nscrape_configs:\n- job_name: test\n  static_configs:\n  - targets: [", opts.ScrapeInterval, opts.ScrapeInterval)
	for i, tg := range opts.Targets {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", tg)
	}
	b.WriteString("]\n")
	return b.Bytes()
}

func start(t testing.TB, bin, cfg, dir string) (*Prometheus, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	data, err := os.MkdirTemp(dir, "data")
	if err != nil {
		return nil, err
	}
	var out syncBuffer
	cmd := exec.Command(bin,
		"--config.file="+cfg,
		"--storage.tsdb.path="+data,
		"--web.listen-address="+addr,
		"--log.level=warn",
	)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("run %s: %w", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	kill := func() {
		_ = cmd.Process.Kill()
		err := <-exited
		exited <- err
	}
	p := &Prometheus{URL: "http://" + addr, stopFn: kill}
	deadline := time.Now().Add(60 * time.Second)
	for !p.ready() {
		select {
		case err := <-exited:
			exited <- err
			return nil, fmt.Errorf("prometheus exited: %v: %s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			kill()
			return nil, fmt.Errorf("prometheus not ready on %s after 60s: %s", addr, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("prometheus output:\n%s", out.String())
		}
	})
	return p, nil
}

// Stop kills Prometheus now; later queries fail with connection refused.
func (p *Prometheus) Stop() { p.stopOnce.Do(p.stopFn) }

func (p *Prometheus) ready() bool {
	resp, err := http.Get(p.URL + "/-/ready")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Query runs an instant query and returns the number of series (or 1 for
// a scalar) in the result.
func (p *Prometheus) Query(ctx context.Context, q string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/api/v1/query?query="+url.QueryEscape(q), nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("query: %w", err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string            `json:"resultType"`
			Result     []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return 0, fmt.Errorf("decode query result: %w", err)
	}
	if body.Status != "success" {
		return 0, fmt.Errorf("query %q: %s", q, body.Error)
	}
	if body.Data.ResultType == "scalar" {
		return 1, nil
	}
	return len(body.Data.Result), nil
}

// WaitFor polls until the query returns at least min series, failing the
// test after timeout.
func (p *Prometheus) WaitFor(t testing.TB, q string, min int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		n, err := p.Query(context.Background(), q)
		if err == nil && n >= min {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("query %q: %d series after %s (want %d), last error %v", q, n, timeout, min, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Exporter serves a registry on a loopback port for Prometheus to scrape.
type Exporter struct {
	Registry *prometheus.Registry
	// Addr is host:port, the scrape target.
	Addr string
}

// NewExporter serves a fresh registry until the test ends.
func NewExporter(t testing.TB) *Exporter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	srv := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return &Exporter{Registry: reg, Addr: ln.Addr().String()}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// syncBuffer collects process output written from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
