package analysis

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/api"
)

// TestWebGuard is finding N7: a web metric from git read any URL the
// daemon could reach (a cloud metadata endpoint, the daemon's own ports)
// and showed its value in the read API. Each case runs a real request
// through the engine's transport; the refused ones never connect
// (net.Dialer.Control runs before connect), so 169.254.169.254 is safe
// to name even on a machine that has a metadata service.
func TestWebGuard(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/iam/security-credentials/", http.StatusFound)
			return
		}
		fmt.Fprint(w, `{"secret": "AKIA-do-not-leak"}`)
	}))
	t.Cleanup(srv.Close)
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]

	tests := []struct {
		name     string
		allow    []string
		url      string
		want     Phase
		wantMsg  string
		wantHits int64 // requests the test server must see
	}{
		{name: "cloud metadata is refused", url: "http://169.254.169.254/latest/meta-data/", want: PhaseError,
			wantMsg: "web metrics may not reach 169.254.169.254, a link-local (cloud metadata) address: allow it with --analysis-allow-hosts"},
		{name: "loopback is refused", url: srv.URL + "/", want: PhaseError, wantMsg: "may not reach 127.0.0.1, a loopback address"},
		// The name is not checked, the address it resolves to is: a DNS
		// name pointing at loopback (here /etc/hosts' localhost) is refused.
		{name: "a name resolving to loopback is refused", url: "http://localhost:" + port + "/", want: PhaseError, wantMsg: "a loopback address"},
		{name: "IPv4-mapped loopback is refused", url: "http://[::ffff:127.0.0.1]:" + port + "/", want: PhaseError, wantMsg: "a loopback address"},
		{name: "unspecified is refused", url: "http://0.0.0.0:" + port + "/", want: PhaseError, wantMsg: "unspecified"},
		{name: "allowed address", allow: []string{"127.0.0.1"}, url: srv.URL + "/", want: PhaseSuccessful, wantHits: 1},
		{name: "allowed prefix", allow: []string{"127.0.0.0/8"}, url: srv.URL + "/", want: PhaseSuccessful, wantHits: 1},
		{name: "allowed name", allow: []string{"localhost"}, url: "http://localhost:" + port + "/", want: PhaseSuccessful, wantHits: 1},
		// Each redirect hop dials again and is checked again.
		{name: "redirect to metadata is refused", allow: []string{"127.0.0.1"}, url: srv.URL + "/redirect", want: PhaseError,
			wantMsg: "may not reach 169.254.169.254", wantHits: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hits.Store(0)
			e, err := New(Options{WebAllowHosts: tt.allow, Registry: prometheus.NewRegistry(), WebTimeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			rec := startRun(t, e, RunSpec{}, api.Metric{
				Name:             "web",
				SuccessCondition: "true",
				Provider:         api.Provider{Kind: api.ProviderWeb, Web: &api.WebProvider{URL: tt.url, JSONPath: "{$.secret}"}},
			})
			st := rec.wait(t, 30*time.Second)
			m := metricStatus(t, st, "web")
			if m.Phase != tt.want {
				t.Fatalf("metric %s (%s), want %s", m.Phase, m.Message, tt.want)
			}
			if !strings.Contains(m.Message, tt.wantMsg) {
				t.Errorf("message %q does not contain %q", m.Message, tt.wantMsg)
			}
			if tt.want == PhaseError && strings.Contains(m.Value+m.Message, "AKIA") {
				t.Errorf("a refused request shows the secret: value %q, message %q", m.Value, m.Message)
			}
			if got := hits.Load(); got != tt.wantHits {
				t.Errorf("server saw %d requests, want %d", got, tt.wantHits)
			}
		})
	}
}

func TestWebGuardAllowHostsErrors(t *testing.T) {
	if _, err := New(Options{WebAllowHosts: []string{"10.0.0.0/99"}}); err == nil || !strings.Contains(err.Error(), `allowed host "10.0.0.0/99"`) {
		t.Fatalf("err = %v, want it to name the bad entry", err)
	}
}
