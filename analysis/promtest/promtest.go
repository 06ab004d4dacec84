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
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluice-dev/sluice/internal/testkit"
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

	proc *testkit.Process
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
	cfg := filepath.Join(t.TempDir(), "prometheus.yml")
	if err := os.WriteFile(cfg, config(opts), 0o600); err != nil {
		t.Fatal(err)
	}
	proc := testkit.StartProcess(t, testkit.ProcessOptions{
		Name:   "prometheus",
		Binary: bin,
		Args: func(addr string) []string {
			return []string{
				"--config.file=" + cfg,
				"--storage.tsdb.path=" + t.TempDir(), // fresh for every attempt
				"--web.listen-address=" + addr,
				"--log.level=warn",
			}
		},
		ReadyPath:    "/-/ready",
		ReadyTimeout: 60 * time.Second,
	})
	return &Prometheus{URL: proc.URL, proc: proc}
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

// Stop kills Prometheus now; later queries fail with connection refused.
func (p *Prometheus) Stop() { p.proc.Stop() }

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
