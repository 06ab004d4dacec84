package analysis

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/analysis/promtest"
	"github.com/sluice-dev/sluice/api"
)

// traffic is what the in-test exporter serves: request counters per
// version and code, and a p99 latency gauge per version.
//
//	v1     stable: all 200, p99 ≈ 100ms
//	v2     healthy canary: all 200, p99 ≈ 100ms
//	bad    failing canary: half 500, p99 ≈ 150ms
//	idle   canary without traffic: counters stay 0
//	absent never exported
func traffic(t testing.TB, reg *prometheus.Registry) {
	t.Helper()
	requests := newRequestCounters("idle")
	p99 := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "http_request_p99_seconds"}, []string{"version"})
	reg.MustRegister(requests, p99)
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	go func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		rng := rand.New(rand.NewPCG(1, 2))
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			requests.add(map[[2]string]float64{
				{"v1", "200"}: 10, {"v2", "200"}: 10,
				{"bad", "200"}: 5, {"bad", "500"}: 5,
			})
			// The healthy canary tracks the stable exactly, so its judgement
			// cannot flake; noise-level behaviour is covered by judge_test.go
			// and judgebench.
			latency := 0.1 + rng.NormFloat64()*0.003
			p99.WithLabelValues("v1").Set(latency)
			p99.WithLabelValues("v2").Set(latency)
			p99.WithLabelValues("bad").Set(0.15 + rng.NormFloat64()*0.003)
		}
	}()
}

// requestCounters is http_requests_total with one lock over all series, so
// that a scrape never lands between the "bad" canary's 200s and its 500s:
// with a CounterVec it sometimes did, and the success rate came out 0.498998
// instead of exactly 0.5.
type requestCounters struct {
	mu     sync.Mutex
	counts map[[2]string]float64 // {version, code} → total
	desc   *prometheus.Desc
}

func newRequestCounters(idleVersions ...string) *requestCounters {
	c := &requestCounters{
		counts: map[[2]string]float64{},
		desc:   prometheus.NewDesc("http_requests_total", "Requests by version and code.", []string{"version", "code"}, nil),
	}
	for _, v := range idleVersions {
		c.counts[[2]string{v, "200"}] = 0
	}
	return c
}

func (c *requestCounters) add(deltas map[[2]string]float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, d := range deltas {
		c.counts[k] += d
	}
}

func (c *requestCounters) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *requestCounters) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, v := range c.counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, v, k[0], k[1])
	}
}

func successRate(version string) string {
	return fmt.Sprintf(`sum(rate(http_requests_total{version=%q,code!~"5.."}[3s])) / sum(rate(http_requests_total{version=%q}[3s]))`, version, version)
}

func startTrafficPrometheus(t testing.TB) *promtest.Prometheus {
	t.Helper()
	exp := promtest.NewExporter(t)
	traffic(t, exp.Registry)
	p := promtest.Start(t, promtest.Options{ScrapeInterval: 500 * time.Millisecond, Targets: []string{exp.Addr}})
	// Rates need two scrapes in their window.
	p.WaitFor(t, successRate("v2"), 1, 60*time.Second)
	return p
}

func promMetric(name, address, query, success string, interval time.Duration, count int) api.Metric {
	return api.Metric{
		Name: name, Interval: interval, Count: api.IntOrArg{Value: count},
		SuccessCondition:      success,
		ConsecutiveErrorLimit: api.IntOrArg{Value: 4},
		Provider: api.Provider{Kind: api.ProviderPrometheus, Prometheus: &api.PrometheusProvider{
			Address: address, Query: query, Timeout: 10 * time.Second,
		}},
	}
}

func judgeMetric(name, address, canary, baseline string) api.Metric {
	q := func(v string) string { return fmt.Sprintf(`http_request_p99_seconds{version=%q}`, v) }
	return api.Metric{
		Name:                  name,
		ConsecutiveErrorLimit: api.IntOrArg{Value: 4},
		Provider: api.Provider{Kind: api.ProviderJudge, Judge: &api.JudgeProvider{
			Address: address, CanaryQuery: q(canary), BaselineQuery: q(baseline),
			Lookback: 3 * time.Second, Step: 100 * time.Millisecond, Direction: api.DirectionIncrease,
			MinSamples: 20, Critical: true,
		}},
	}
}

func TestPrometheusProvider(t *testing.T) {
	p := startTrafficPrometheus(t)
	builtins := map[string]string{api.ArgCanary: "v2", api.ArgStable: "v1"}
	tests := []struct {
		name       string
		spec       RunSpec
		metrics    []api.Metric
		want       Phase
		wantReason string // substring
		wantValue  string
	}{
		{
			name:    "healthy canary succeeds",
			spec:    RunSpec{Builtins: builtins},
			metrics: []api.Metric{promMetric("success-rate", p.URL, successRate("{{args.canary}}"), "result[0] >= 0.99", 50*time.Millisecond, 3)},
			want:    PhaseSuccessful, wantReason: "all metrics successful", wantValue: "1",
		},
		{
			name:    "scalar result",
			metrics: []api.Metric{promMetric("success-rate", p.URL, "scalar("+successRate("v2")+")", "result >= 0.99", 0, 1)},
			want:    PhaseSuccessful, wantValue: "1",
		},
		{
			name: "failing canary fails after failureLimit",
			metrics: []api.Metric{func() api.Metric {
				m := promMetric("success-rate", p.URL, successRate("bad"), "result[0] >= 0.99", 50*time.Millisecond, 10)
				m.FailureLimit = api.IntOrArg{Value: 1}
				return m
			}()},
			want: PhaseFailed, wantReason: "success-rate: 2 measurements failed, last 0.5",
		},
		{
			name:    "failing canary with failureLimit 0",
			metrics: []api.Metric{promMetric("success-rate", p.URL, successRate("bad"), "result[0] >= 0.99", 0, 1)},
			want:    PhaseFailed, wantReason: "< 0.99 (failureLimit 0)",
		},
		{
			name:    "no series is inconclusive no data",
			metrics: []api.Metric{promMetric("success-rate", p.URL, successRate("absent"), "result[0] >= 0.99", 0, 1)},
			want:    PhaseInconclusive, wantReason: "success-rate: no data (inconclusiveLimit 0)",
		},
		{
			name:    "no traffic (NaN) is inconclusive",
			metrics: []api.Metric{promMetric("success-rate", p.URL, successRate("idle"), "result[0] >= 0.99", 0, 1)},
			want:    PhaseInconclusive, wantReason: "result is NaN",
		},
		{
			name:    "a condition may handle NaN itself",
			metrics: []api.Metric{promMetric("success-rate", p.URL, successRate("idle"), "isNaN(result[0]) || result[0] >= 0.99", 0, 1)},
			want:    PhaseSuccessful, wantValue: "NaN",
		},
		{
			name: "dry run never fails",
			spec: RunSpec{DryRun: []string{"canary-errors"}},
			metrics: []api.Metric{
				promMetric("canary-errors", p.URL, successRate("bad"), "result[0] >= 0.99", 50*time.Millisecond, 3),
				promMetric("stable-errors", p.URL, successRate("v1"), "result[0] >= 0.99", 50*time.Millisecond, 3),
			},
			want: PhaseSuccessful, wantReason: "all metrics successful (dry-run: canary-errors Failed)",
		},
		{
			name:    "judge passes a healthy canary",
			spec:    RunSpec{Builtins: builtins},
			metrics: []api.Metric{judgeMetric("p99", p.URL, "{{args.canary}}", "{{args.stable}}")},
			want:    PhaseSuccessful, wantValue: "100",
		},
		{
			name:    "judge fails a slow canary",
			metrics: []api.Metric{judgeMetric("p99", p.URL, "bad", "v1")},
			want:    PhaseFailed, wantReason: "p99: 0 < 75; High: canary median 0.1",
		},
		{
			name:    "judge without canary data is inconclusive",
			metrics: []api.Metric{judgeMetric("p99", p.URL, "absent", "v1")},
			want:    PhaseInconclusive, wantReason: "p99: not enough data: canary 0, baseline 31 samples (minSamples 20)",
		},
		{
			name:    "bad query is an error",
			metrics: []api.Metric{promMetric("broken", p.URL, "sum(rate(", "result[0] >= 0.99", 0, 1)},
			want:    PhaseError, wantReason: "broken: 1 consecutive error, last: prometheus query: bad_data",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.metrics[0].Provider.Judge != nil {
				// The judge looks 3s back: wait for that much history.
				p.WaitFor(t, `count_over_time(http_request_p99_seconds{version="v1"}[4s]) > 7`, 1, 60*time.Second)
			}
			if tt.name == "bad query is an error" {
				tt.metrics[0].ConsecutiveErrorLimit = api.IntOrArg{Value: 0}
			}
			e, _ := newTestEngine(t)
			rec := startRun(t, e, tt.spec, tt.metrics...)
			st := rec.wait(t, 60*time.Second)
			if st.Phase != tt.want || !strings.Contains(st.Reason, tt.wantReason) {
				t.Fatalf("run = %s %q, want %s containing %q; metrics %+v", st.Phase, st.Reason, tt.want, tt.wantReason, st.Metrics)
			}
			if tt.wantValue != "" && st.Metrics[0].Value != tt.wantValue {
				t.Errorf("value = %q, want %q", st.Metrics[0].Value, tt.wantValue)
			}
		})
	}
}

func TestPrometheusStoppedMidRun(t *testing.T) {
	p := startTrafficPrometheus(t)
	e, _ := newTestEngine(t)
	rec := startRun(t, e, RunSpec{}, promMetric("success-rate", p.URL, successRate("v2"), "result[0] >= 0.99", 50*time.Millisecond, 0))
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := rec.all()
		if len(r) > 0 && r[len(r)-1].Metrics[0].Tally.Successful >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no successful measurements: %+v", r)
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.Stop()
	st := rec.wait(t, 30*time.Second)
	m := st.Metrics[0]
	if st.Phase != PhaseError || m.Tally.ConsecutiveError != 5 || !strings.Contains(st.Reason, "5 consecutive errors") || !strings.Contains(st.Reason, "connection refused") {
		t.Fatalf("run = %s %q, tally %+v", st.Phase, st.Reason, m.Tally)
	}
}

// TestPrometheusBearerToken checks what sluice sends; Prometheus itself
// does not check tokens, so a stand-in answers here.
func TestPrometheusBearerToken(t *testing.T) {
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("Authorization") + "|" + r.Header.Get("X-Scope-OrgID"))
		fmt.Fprint(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"0.5"]}]}}`)
	}))
	t.Cleanup(srv.Close)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("  t0ken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e, err := New(Options{WebAllowHosts: testServers, BearerTokenFile: tokenFile, PrometheusURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	m := promMetric("m", srv.URL, "up", "result[0] == 0.5", 0, 1)
	m.Provider.Prometheus.Headers = map[string]string{"X-Scope-OrgID": "team-a"}
	st := startRun(t, e, RunSpec{}, m).wait(t, 30*time.Second)
	if st.Phase != PhaseSuccessful || got.Load() != "Bearer t0ken|team-a" {
		t.Fatalf("run %s %q; server saw %v", st.Phase, st.Reason, got.Load())
	}
}

// BenchmarkMeasurement times one measurement (query, evaluation) against
// a real Prometheus: go test -run '^$' -bench Measurement ./analysis/
func BenchmarkMeasurement(b *testing.B) {
	p := startTrafficPrometheus(b)
	p.WaitFor(b, `count_over_time(http_request_p99_seconds{version="v1"}[4s]) > 7`, 1, 60*time.Second)
	e, err := New(Options{WebAllowHosts: testServers})
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		metric api.Metric
	}{
		{"prometheus", promMetric("success-rate", p.URL, successRate("v2"), "result[0] >= 0.99", 0, 1)},
		{"judge", judgeMetric("p99", p.URL, "v2", "v1")},
	} {
		b.Run(tc.name, func(b *testing.B) {
			m, err := NewMetric(tc.metric, nil)
			if err != nil {
				b.Fatal(err)
			}
			prov, err := e.newProvider(nil, &m)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				res, err := prov.measure(b.Context(), &m)
				if err != nil {
					b.Fatal(err)
				}
				if ph, msg := Evaluate(&m, res); ph != PhaseSuccessful {
					b.Fatalf("%s: %s", ph, msg)
				}
			}
		})
	}
}
