package analysis

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/api"
)

// recorder collects a run's reports.
type recorder struct {
	mu      sync.Mutex
	reports []RunStatus
	done    chan RunStatus
}

func newRecorder() *recorder { return &recorder{done: make(chan RunStatus, 1)} }

func (r *recorder) report(s RunStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.reports) > 0 && r.reports[len(r.reports)-1].Phase.Completed() {
		panic("report after the terminal report")
	}
	r.reports = append(r.reports, s)
	if s.Phase.Completed() {
		r.done <- s
	}
}

func (r *recorder) all() []RunStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]RunStatus(nil), r.reports...)
}

// wait returns the terminal status, failing the test after timeout.
func (r *recorder) wait(t *testing.T, timeout time.Duration) RunStatus {
	t.Helper()
	select {
	case s := <-r.done:
		return s
	case <-time.After(timeout):
		t.Fatalf("run did not finish within %s; last reports: %+v", timeout, r.all())
	}
	return RunStatus{}
}

func newTestEngine(t *testing.T) (*Engine, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	e, err := New(Options{WebAllowHosts: testServers, Registry: reg, ErrorRetryInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return e, reg
}

// startRun runs the metrics of one template and stops the run at cleanup.
func startRun(t *testing.T, e *Engine, spec RunSpec, metrics ...api.Metric) *recorder {
	t.Helper()
	if spec.Name == "" {
		spec.Name = "test-run"
	}
	if spec.Rollout == (api.Key{}) {
		spec.Rollout = api.Key{Namespace: "default", Name: "checkout"}
	}
	spec.Templates = append(spec.Templates, &api.AnalysisTemplate{Key: api.Key{Namespace: "default", Name: "t"}, Metrics: metrics})
	rec := newRecorder()
	stop := e.Start(context.Background(), spec, rec.report)
	t.Cleanup(stop)
	return rec
}

func metricStatus(t *testing.T, s RunStatus, name string) MetricStatus {
	t.Helper()
	for _, m := range s.Metrics {
		if m.Name == name {
			return m
		}
	}
	t.Fatalf("no metric %s in %+v", name, s)
	return MetricStatus{}
}

// gathered returns the value of one sample from reg, or -1 when absent.
func gathered(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue next
				}
			}
			switch {
			case m.Gauge != nil:
				return m.GetGauge().GetValue()
			case m.Counter != nil:
				return m.GetCounter().GetValue()
			}
		}
	}
	return -1
}

// testServers lets web metrics reach httptest servers, which listen on
// loopback, the address `sluice run` refuses by default (webguard.go).
var testServers = []string{"127.0.0.1"}
