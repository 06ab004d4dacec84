package analysis

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/internal/testkit"
)

// providerCount reads a counter of the engine's registry by provider.
func providerCount(t *testing.T, reg *prometheus.Registry, name, provider string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "provider" && l.GetValue() == provider {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// promOK is a Prometheus instant-query answer of one sample, 0.5.
const promOK = `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"0.5"]}]}}`

// measureOnce builds the metric's provider on e and takes one measurement.
func measureOnce(t *testing.T, e *Engine, spec api.Metric) (Result, error) {
	t.Helper()
	m, err := NewMetric(spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	prov, err := e.newProvider(nil, &m)
	if err != nil {
		t.Fatal(err)
	}
	return prov.measure(t.Context(), &m)
}

// authRecorder is a Prometheus stand-in that remembers the Authorization
// header of every request it answers.
type authRecorder struct {
	mu   sync.Mutex
	seen []string
	srv  *httptest.Server
}

func newAuthRecorder(t *testing.T) *authRecorder {
	r := &authRecorder{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.seen = append(r.seen, req.Header.Get("Authorization"))
		r.mu.Unlock()
		fmt.Fprint(w, promOK)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *authRecorder) authorizations() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

func writeToken(t *testing.T, token string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestPrometheusTokenScope: the daemon's token goes to --prometheus-url's
// origin only. An attacker host named by a template, or reached by a
// redirect from the configured Prometheus, sees no token; a template
// that names another address brings its own Authorization header.
func TestPrometheusTokenScope(t *testing.T) {
	attacker := newAuthRecorder(t)
	configured := newAuthRecorder(t)
	// The configured Prometheus redirects queries under /moved to the
	// attacker, with a 307 so the POST and its body are replayed.
	redirecting := http.NewServeMux()
	redirecting.HandleFunc("/moved/", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, attacker.srv.URL+strings.TrimPrefix(r.URL.Path, "/moved"), http.StatusTemporaryRedirect)
	})
	redirecting.Handle("/", configured.srv.Config.Handler)
	configured.srv.Config.Handler = redirecting

	e, err := New(Options{WebAllowHosts: testServers, BearerTokenFile: writeToken(t, "t0ken"), PrometheusURL: configured.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name           string
		address        string
		headers        map[string]string
		wantConfigured []string
		wantAttacker   []string
	}{
		{name: "configured prometheus gets the token", address: configured.srv.URL, wantConfigured: []string{"Bearer t0ken"}},
		{name: "same origin with a path prefix gets the token", address: configured.srv.URL + "/prefix", wantConfigured: []string{"Bearer t0ken"}},
		{name: "another address gets no token", address: attacker.srv.URL, wantAttacker: []string{""}},
		{name: "redirect to another host drops the token", address: configured.srv.URL + "/moved", wantAttacker: []string{""}},
		{name: "another address brings its own header", address: attacker.srv.URL, headers: map[string]string{"Authorization": "Bearer own"}, wantAttacker: []string{"Bearer own"}},
		{name: "template headers do not follow a redirect to another host", address: configured.srv.URL + "/moved", headers: map[string]string{"Authorization": "Bearer own"}, wantAttacker: []string{""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := [2]int{len(configured.authorizations()), len(attacker.authorizations())}
			m := promMetric("m", tc.address, "up", "result[0] == 0.5", 0, 1)
			m.Provider.Prometheus.Headers = tc.headers
			if _, err := measureOnce(t, e, m); err != nil {
				t.Fatal(err)
			}
			gotConfigured := configured.authorizations()[before[0]:]
			gotAttacker := attacker.authorizations()[before[1]:]
			if fmt.Sprint(gotConfigured) != fmt.Sprint(tc.wantConfigured) || fmt.Sprint(gotAttacker) != fmt.Sprint(tc.wantAttacker) {
				t.Fatalf("configured saw %q (want %q), attacker saw %q (want %q)", gotConfigured, tc.wantConfigured, gotAttacker, tc.wantAttacker)
			}
		})
	}
}

func TestTokenNeedsPrometheusURL(t *testing.T) {
	_, err := New(Options{WebAllowHosts: testServers, BearerTokenFile: writeToken(t, "t0ken")})
	if err == nil || !strings.Contains(err.Error(), "prometheus url") {
		t.Fatalf("New without PrometheusURL: %v", err)
	}
}

// TestResponseTooLarge: a provider answer over MaxResponseBytes is the
// measurement's Error naming the limit, counted by provider; one at the
// limit is read.
func TestResponseTooLarge(t *testing.T) {
	const limit = 1024
	pad := func(n int) string { return strings.Repeat("x", n) }
	// Both bodies are valid JSON of the size named.
	promBody := func(size int) string {
		short := `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"pad":""},"value":[1,"0.5"]}]}}`
		return strings.Replace(short, `"pad":""`, `"pad":"`+pad(size-len(short))+`"`, 1)
	}
	webBody := func(size int) string {
		short := `{"ok":true,"pad":""}`
		return strings.Replace(short, `"pad":""`, `"pad":"`+pad(size-len(short))+`"`, 1)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/big/api/v1/query", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, promBody(limit+1)) })
	mux.HandleFunc("/fits/api/v1/query", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, promBody(limit)) })
	mux.HandleFunc("/big/api/v1/query_range", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, promBody(10*limit)) })
	mux.HandleFunc("/web/big", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, webBody(limit+1)) })
	mux.HandleFunc("/web/fits", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, webBody(limit)) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	web := func(path string) api.Metric {
		return api.Metric{Name: "w", SuccessCondition: "result == true", Provider: api.Provider{Kind: api.ProviderWeb, Web: &api.WebProvider{URL: srv.URL + path, JSONPath: "{$.ok}"}}}
	}
	tests := []struct {
		name     string
		metric   api.Metric
		provider string
		refused  bool
	}{
		{name: "prometheus over the limit", metric: promMetric("m", srv.URL+"/big", "up", "true", 0, 1), provider: labelPrometheus, refused: true},
		{name: "prometheus at the limit", metric: promMetric("m", srv.URL+"/fits", "up", "true", 0, 1), provider: labelPrometheus},
		{name: "judge over the limit", metric: judgeMetric("j", srv.URL+"/big", "v2", "v1"), provider: labelJudge, refused: true},
		{name: "web over the limit", metric: web("/web/big"), provider: labelWeb, refused: true},
		{name: "web at the limit", metric: web("/web/fits"), provider: labelWeb},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			e, err := New(Options{WebAllowHosts: testServers, MaxResponseBytes: limit, Registry: reg})
			if err != nil {
				t.Fatal(err)
			}
			_, err = measureOnce(t, e, tc.metric)
			refusals := providerCount(t, reg, "sluice_analysis_responses_too_large_total", tc.provider)
			if !tc.refused {
				if err != nil || refusals != 0 {
					t.Fatalf("err %v, refusals %v; want a measurement", err, refusals)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "exceeds the 1024-byte limit (--analysis-max-response-bytes)") {
				t.Fatalf("err = %v, want the limit named", err)
			}
			if refusals != 1 {
				t.Fatalf("sluice_analysis_responses_too_large_total{provider=%q} = %v, want 1", tc.provider, refusals)
			}
		})
	}
}

// TestProviderTimeout: a peer that accepts and never answers makes the
// measurement an Error within the timeout, naming it, counted by provider.
func TestProviderTimeout(t *testing.T) {
	stallAddr, _ := testkit.StallingListener(t)
	stall := "http://" + stallAddr
	const timeout = 200 * time.Millisecond
	prom := promMetric("m", stall, "up", "true", 0, 1)
	prom.Provider.Prometheus.Timeout = 0 // the engine's default applies
	tests := []struct {
		name     string
		metric   api.Metric
		provider string
		wantMsg  string
	}{
		{name: "prometheus", metric: prom, provider: labelPrometheus, wantMsg: "prometheus query: no answer within 200ms (the metric's timeout, or --prometheus-timeout)"},
		{name: "judge", metric: judgeMetric("j", stall, "v2", "v1"), provider: labelJudge, wantMsg: "judge canaryQuery: no answer within 200ms (the metric's timeout, or --prometheus-timeout)"},
		{name: "web", metric: api.Metric{Name: "w", SuccessCondition: "true", Provider: api.Provider{Kind: api.ProviderWeb, Web: &api.WebProvider{URL: stall + "/x"}}}, provider: labelWeb, wantMsg: "web request: no answer within 200ms (the metric's timeout, or --web-timeout)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			e, err := New(Options{WebAllowHosts: testServers, PrometheusTimeout: timeout, WebTimeout: timeout, Registry: reg})
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := measureOnce(t, e, tc.metric)
				done <- err
			}()
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("measurement still hanging after 10s")
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Fatalf("err = %v, want %q", err, tc.wantMsg)
			}
			if n := providerCount(t, reg, "sluice_analysis_timeouts_total", tc.provider); n != 1 {
				t.Fatalf("sluice_analysis_timeouts_total{provider=%q} = %v, want 1", tc.provider, n)
			}
		})
	}
}

// TestProviderErrorsRedactURLs: net/http puts the request URL into its
// errors; user info and query strings must not reach status and alerts.
func TestProviderErrorsRedactURLs(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := lis.Addr().String()
	lis.Close() // connections are refused from here on
	tests := []struct {
		name   string
		metric api.Metric
		want   string
	}{
		{
			name:   "prometheus address with user info",
			metric: promMetric("m", "http://alice:pr0m-pw@"+closed, "up", "true", 0, 1),
			want:   "http://" + closed + "/api/v1/query",
		},
		{
			name: "web url with user info and key",
			metric: api.Metric{Name: "w", SuccessCondition: "true", Provider: api.Provider{Kind: api.ProviderWeb, Web: &api.WebProvider{
				URL: "http://bob:w3b-pw@" + closed + "/health?api_key=k3y-secret"}}},
			want: "http://" + closed + "/health?…",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := New(Options{WebAllowHosts: testServers})
			if err != nil {
				t.Fatal(err)
			}
			_, err = measureOnce(t, e, tc.metric)
			if err == nil {
				t.Fatal("measurement against a closed port succeeded")
			}
			msg := err.Error()
			for _, secret := range []string{"pr0m-pw", "w3b-pw", "k3y-secret", "alice", "bob"} {
				if strings.Contains(msg, secret) {
					t.Fatalf("error %q contains %q", msg, secret)
				}
			}
			if !strings.Contains(msg, tc.want) || !strings.Contains(msg, "connection refused") {
				t.Fatalf("error %q should still say %q and why", msg, tc.want)
			}
		})
	}
}
