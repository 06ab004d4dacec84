package daemon

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/controller/runner"
	"github.com/sluice-dev/sluice/gitwatch"
)

// rolloutCollector exports each rollout's phase, weights and step from the
// runner at scrape time, so the metrics can never disagree with the status.
// A multi-cluster rollout's parts are the rollout's name with the part's
// cluster; a single-cluster rollout's cluster is the home cluster.
type rolloutCollector struct {
	runner *runner.Runner
	home   string
	phase  *prometheus.Desc
	weight *prometheus.Desc
	step   *prometheus.Desc
}

var phases = []rollout.Phase{rollout.PhaseProgressing, rollout.PhasePaused, rollout.PhaseHealthy, rollout.PhaseDegraded}

func newRolloutCollector(r *runner.Runner, home string) *rolloutCollector {
	return &rolloutCollector{
		runner: r,
		home:   home,
		phase:  prometheus.NewDesc("sluice_rollout_phase", "1 for the rollout's current phase, 0 for the others.", []string{"namespace", "name", "cluster", "phase"}, nil),
		weight: prometheus.NewDesc("sluice_rollout_weight", "Declared traffic weight in percent.", []string{"namespace", "name", "cluster", "target"}, nil),
		step:   prometheus.NewDesc("sluice_rollout_step", "Index of the step being executed (0-based).", []string{"namespace", "name", "cluster"}, nil),
	}
}

func (c *rolloutCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.phase
	ch <- c.weight
	ch <- c.step
}

func (c *rolloutCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.runner.Gauges() {
		name, cluster := s.Key.Parent().Name, s.Key.Cluster()
		if cluster == "" {
			cluster = c.home
		}
		for _, p := range phases {
			v := 0.0
			if s.Phase == p {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.phase, prometheus.GaugeValue, v, s.Key.Namespace, name, cluster, string(p))
		}
		ch <- prometheus.MustNewConstMetric(c.weight, prometheus.GaugeValue, float64(s.Weights.Stable), s.Key.Namespace, name, cluster, "stable")
		ch <- prometheus.MustNewConstMetric(c.weight, prometheus.GaugeValue, float64(s.Weights.Canary), s.Key.Namespace, name, cluster, "canary")
		if s.Weights.Baseline > 0 {
			ch <- prometheus.MustNewConstMetric(c.weight, prometheus.GaugeValue, float64(s.Weights.Baseline), s.Key.Namespace, name, cluster, "baseline")
		}
		ch <- prometheus.MustNewConstMetric(c.step, prometheus.GaugeValue, float64(s.StepIndex), s.Key.Namespace, name, cluster)
	}
}

// trafficMeter wraps the gateway to observe sluice_commit_to_traffic_seconds:
// from the moment a commit that changes a rollout is seen until the first
// ACK of that rollout's routes after it.
type trafficMeter struct {
	runner.Traffic
	hist prometheus.Histogram
	now  func() time.Time

	mu     sync.Mutex
	seen   map[api.Key]time.Time
	byHost map[string]api.Key
}

func newTrafficMeter(t runner.Traffic, reg *prometheus.Registry) *trafficMeter {
	m := &trafficMeter{
		Traffic: t,
		hist: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sluice_commit_to_traffic_seconds",
			Help:    "Time from a commit being seen until its routes are ACKed by the clients.",
			Buckets: []float64{.05, .1, .25, .5, 1, 2, 5, 10, 30, 60},
		}),
		now:    time.Now,
		seen:   map[api.Key]time.Time{},
		byHost: map[string]api.Key{},
	}
	reg.MustRegister(m.hist)
	return m
}

func (m *trafficMeter) commitSeen(key api.Key, _ gitwatch.Revision) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, pending := m.seen[key]; !pending {
		m.seen[key] = m.now()
	}
}

func (m *trafficMeter) SetTraffic(t api.Traffic) (string, error) {
	m.mu.Lock()
	m.byHost[t.Host] = t.Rollout
	m.mu.Unlock()
	return m.Traffic.SetTraffic(t)
}

func (m *trafficMeter) WaitForAck(ctx context.Context, host, version string) error {
	err := m.Traffic.WaitForAck(ctx, host, version)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	key := m.byHost[host]
	if at, ok := m.seen[key]; ok {
		m.hist.Observe(m.now().Sub(at).Seconds())
		delete(m.seen, key)
	}
	return nil
}

// Clients is the number of connected xDS clients, for the ACK spans
// (runner.Clients), when the wrapped traffic can tell.
func (m *trafficMeter) Clients() int {
	if c, ok := m.Traffic.(runner.Clients); ok {
		return c.Clients()
	}
	return 0
}

var _ runner.Clients = (*trafficMeter)(nil)
