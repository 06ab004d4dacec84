// Package amtest starts a real Alertmanager (the Debian package
// prometheus-alertmanager, installed by hack/test-deps.sh) for tests: on a
// free loopback port, clustering disabled, state in a temp dir, stopped when
// the test ends. The alert and e2e tests share it.
package amtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/testkit"
)

// EnvBinary overrides where the alertmanager binary is looked up.
const EnvBinary = "SLUICE_ALERTMANAGER"

// config routes everything to a receiver that does nothing: the tests read
// alerts back through the API.
const config = `route:
  receiver: "null"
  group_wait: 1s
receivers:
- name: "null"
`

// Alertmanager is a running Alertmanager.
type Alertmanager struct {
	// URL is the base URL, e.g. http://127.0.0.1:40123.
	URL string
}

// Binary finds the alertmanager executable: $SLUICE_ALERTMANAGER, the
// Debian path, then alertmanager or prometheus-alertmanager on PATH.
func Binary() (string, error) {
	if p := os.Getenv(EnvBinary); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("alertmanager binary from %s: %w: install the Debian package prometheus-alertmanager (run hack/test-deps.sh)", EnvBinary, err)
		}
		return p, nil
	}
	if _, err := os.Stat("/usr/bin/prometheus-alertmanager"); err == nil {
		return "/usr/bin/prometheus-alertmanager", nil
	}
	for _, name := range []string{"prometheus-alertmanager", "alertmanager"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("alertmanager binary not found: install the Debian package prometheus-alertmanager (run hack/test-deps.sh) or set %s", EnvBinary)
}

// Start runs an Alertmanager for the rest of the test. A missing binary
// fails the test: CI installs it, so skipping would hide a broken setup.
func Start(t testing.TB) *Alertmanager {
	t.Helper()
	return StartConfig(t, config)
}

// StartConfig is Start with the test's own alertmanager.yml, e.g. a route
// with group_by to a webhook receiver the test serves.
func StartConfig(t testing.TB, config string) *Alertmanager {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "alertmanager.yml")
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	proc := testkit.StartProcess(t, testkit.ProcessOptions{
		Name:   "alertmanager",
		Binary: bin,
		Args: func(addr string) []string {
			return []string{
				"--config.file=" + cfg,
				"--storage.path=" + t.TempDir(), // fresh for every attempt
				"--web.listen-address=" + addr,
				"--cluster.listen-address=",
				"--log.level=warn",
			}
		},
		ReadyPath: "/-/ready",
	})
	return &Alertmanager{URL: proc.URL}
}

// Alert is the part of Alertmanager's GettableAlert the tests look at.
type Alert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	StartsAt    time.Time         `json:"startsAt"`
	Status      struct {
		State string `json:"state"`
	} `json:"status"`
}

// Alerts lists the alerts Alertmanager holds (GET /api/v2/alerts).
func (am *Alertmanager) Alerts(ctx context.Context) ([]Alert, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, am.URL+"/api/v2/alerts", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("get alerts: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("get alerts: status %d", resp.StatusCode)
	}
	var alerts []Alert
	if err := json.NewDecoder(resp.Body).Decode(&alerts); err != nil {
		return nil, fmt.Errorf("decode alerts: %w", err)
	}
	return alerts, nil
}

// WaitFor polls until an alert has every label in labels and returns it,
// failing the test after timeout.
func (am *Alertmanager) WaitFor(t testing.TB, labels map[string]string, timeout time.Duration) Alert {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last []Alert
	for {
		alerts, err := am.Alerts(ctx)
		if err == nil {
			last = alerts
			for _, a := range alerts {
				if hasLabels(a.Labels, labels) {
					return a
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no alert with labels %v in alertmanager after %s; it has %+v", labels, timeout, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}
