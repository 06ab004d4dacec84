package daemon

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// constCollector is rolloutCollector as client_golang's const metrics
// write it (what sluice did before): the reference its output must equal,
// and the peer of BenchmarkRolloutMetricsScrape.
type constCollector struct{ *rolloutCollector }

func (c constCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.gauges() {
		name, cluster := s.Key.Parent().Name, s.Key.Cluster()
		if cluster == "" {
			cluster = c.home
		}
		for _, p := range phases {
			ch <- prometheus.MustNewConstMetric(c.phase, prometheus.GaugeValue, boolValue(s.Phase == p), s.Key.Namespace, name, cluster, string(p))
		}
		ch <- prometheus.MustNewConstMetric(c.weight, prometheus.GaugeValue, float64(s.Weights.Stable), s.Key.Namespace, name, cluster, "stable")
		ch <- prometheus.MustNewConstMetric(c.weight, prometheus.GaugeValue, float64(s.Weights.Canary), s.Key.Namespace, name, cluster, "canary")
		if s.Weights.Baseline > 0 {
			ch <- prometheus.MustNewConstMetric(c.weight, prometheus.GaugeValue, float64(s.Weights.Baseline), s.Key.Namespace, name, cluster, "baseline")
		}
		ch <- prometheus.MustNewConstMetric(c.step, prometheus.GaugeValue, float64(s.StepIndex), s.Key.Namespace, name, cluster)
	}
}

// scrape serves reg's /metrics once, in the format accept asks for.
func scrape(t testing.TB, reg *prometheus.Registry, accept string) string {
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept", accept)
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}).ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

func registryOf(c prometheus.Collector) *prometheus.Registry {
	reg := prometheus.NewPedanticRegistry() // checks each series against its Desc
	reg.MustRegister(c)
	return reg
}

func someGauges() []rollout.Gauges {
	return []rollout.Gauges{
		{Key: api.Key{Namespace: "shop", Name: "web"}, Phase: rollout.PhasePaused, Weights: api.Weights{Stable: 80, Canary: 10, Baseline: 10}, StepIndex: 3},
		{Key: api.Key{Namespace: "shop", Name: "cart"}.InCluster("us-1"), Phase: rollout.PhaseDegraded, Weights: api.Weights{Stable: 100}},
		{Key: api.Key{Namespace: "shop", Name: "cart"}.InCluster("eu-2"), Phase: rollout.PhaseProgressing, Weights: api.Weights{Stable: 50, Canary: 50}, StepIndex: 1},
		{Key: api.Key{Namespace: "pay", Name: "api"}, Phase: rollout.PhaseHealthy, Weights: api.Weights{Stable: 100}, StepIndex: 140},
	}
}

// TestRolloutMetricsAsConstMetrics: the shared-label series scrape, in
// the text and OpenMetrics formats, exactly as const metrics of the same
// gauges, through a pedantic registry.
func TestRolloutMetricsAsConstMetrics(t *testing.T) {
	c := newRolloutCollector(someGauges, "eu-1")
	for _, accept := range []string{"text/plain", "application/openmetrics-text; version=1.0.0"} {
		got, want := scrape(t, registryOf(c), accept), scrape(t, registryOf(constCollector{c}), accept)
		if got != want {
			t.Errorf("%s:\n got\n%s\nwant\n%s", accept, got, want)
		}
		for _, line := range []string{
			`sluice_rollout_weight{cluster="eu-1",name="web",namespace="shop",target="baseline"} 10`,
			`sluice_rollout_phase{cluster="us-1",name="cart",namespace="shop",phase="Degraded"} 1`,
			`sluice_rollout_phase{cluster="us-1",name="cart",namespace="shop",phase="Healthy"} 0`,
			`sluice_rollout_step{cluster="eu-2",name="cart",namespace="shop"} 1`,
			`sluice_rollout_step{cluster="eu-1",name="api",namespace="pay"} 140`, // past the shared values
		} {
			if !strings.Contains(got, line) {
				t.Errorf("%s: no %s in\n%s", accept, line, got)
			}
		}
		if strings.Contains(got, `name="api",namespace="pay",target="baseline"`) {
			t.Errorf("%s: a baseline weight for a rollout without a baseline", accept)
		}
	}
}

// BenchmarkRolloutMetricsScrape: one /metrics scrape of 5,000 rollouts,
// client_golang's const metrics beside the shared-label series, in one
// run (go test -run '^$' -bench RolloutMetricsScrape ./controller/daemon/).
func BenchmarkRolloutMetricsScrape(b *testing.B) {
	gauges := make([]rollout.Gauges, 5000)
	for i := range gauges {
		gauges[i] = rollout.Gauges{Key: api.Key{Namespace: fmt.Sprintf("ns-%d", i%50), Name: fmt.Sprintf("app-%d", i)},
			Phase: rollout.PhasePaused, Weights: api.Weights{Stable: 80, Canary: 20}, StepIndex: 1}
	}
	c := newRolloutCollector(func() []rollout.Gauges { return gauges }, "home")
	for _, peer := range []struct {
		name string
		c    prometheus.Collector
	}{{"const-metrics", constCollector{c}}, {"shared-labels", c}} {
		reg := prometheus.NewRegistry()
		reg.MustRegister(peer.c)
		h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
		b.Run(peer.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
				w := discardWriter{header: http.Header{}}
				h.ServeHTTP(&w, req)
			}
		})
	}
}

type discardWriter struct{ header http.Header }

func (w *discardWriter) Header() http.Header         { return w.header }
func (w *discardWriter) Write(p []byte) (int, error) { return io.Discard.Write(p) }
func (w *discardWriter) WriteHeader(int)             {}
