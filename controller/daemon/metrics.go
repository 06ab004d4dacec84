package daemon

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/controller/runner"
	"github.com/sluice-dev/sluice/gitwatch"
)

// rolloutCollector exports each rollout's phase, weights and step from the
// runner at scrape time, so the metrics can never disagree with the status.
// A multi-cluster rollout's parts are the rollout's name with the part's
// cluster; a single-cluster rollout's cluster is the home cluster.
//
// A rollout has seven or eight series, so a scrape of 5,000 rollouts
// gathers 40,000, and with client_golang's const metrics
// (MustNewConstMetric), which build each series' labels anew (four label
// pairs, two string pointers each), it allocated 30.9 MB; Prometheus
// scraping every 15 s pays that again and again. Here a rollout's three
// label pairs are made once a scrape and shared by its series, the phase
// and target pairs and the values 0 to 100 by every rollout, and the
// series and their label lists come from a few slices allocated at once:
// 13.7 MB (BenchmarkRolloutMetricsScrape).
type rolloutCollector struct {
	gauges func() []rollout.Gauges
	home   string
	phase  *prometheus.Desc
	weight *prometheus.Desc
	step   *prometheus.Desc
	// The label pairs every rollout shares: phase="Healthy", ...,
	// target="stable", ...
	phaseLabels  []*dto.LabelPair
	targetLabels [3]*dto.LabelPair
	// small are the values 0 to 100 every series shares: a phase's 0 or
	// 1, a weight, a step index.
	small [101]dto.Gauge
}

var (
	phases  = []rollout.Phase{rollout.PhaseProgressing, rollout.PhasePaused, rollout.PhaseHealthy, rollout.PhaseDegraded}
	targets = [3]string{"stable", "canary", "baseline"}
)

func newRolloutCollector(gauges func() []rollout.Gauges, home string) *rolloutCollector {
	c := &rolloutCollector{
		gauges: gauges,
		home:   home,
		phase:  prometheus.NewDesc("sluice_rollout_phase", "1 for the rollout's current phase, 0 for the others.", []string{"namespace", "name", "cluster", "phase"}, nil),
		weight: prometheus.NewDesc("sluice_rollout_weight", "Declared traffic weight in percent.", []string{"namespace", "name", "cluster", "target"}, nil),
		step:   prometheus.NewDesc("sluice_rollout_step", "Index of the step being executed (0-based).", []string{"namespace", "name", "cluster"}, nil),
	}
	for _, p := range phases {
		c.phaseLabels = append(c.phaseLabels, labelPair("phase", string(p)))
	}
	for i, t := range targets {
		c.targetLabels[i] = labelPair("target", t)
	}
	for i := range c.small {
		c.small[i].Value = new(float64(i))
	}
	return c
}

func labelPair(name, value string) *dto.LabelPair { return &dto.LabelPair{Name: &name, Value: &value} }

func (c *rolloutCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.phase
	ch <- c.weight
	ch <- c.step
}

// seriesPerRollout is the most series a rollout has: four phases, three
// weights, the step.
const seriesPerRollout = 8

func (c *rolloutCollector) Collect(ch chan<- prometheus.Metric) {
	gauges := c.gauges()
	b := newSeriesSlab(len(gauges))
	for i, s := range gauges {
		own := b.rolloutLabels(i, s.Key, c.home)
		for j, p := range phases {
			b.add(c.phase, c.gauge(boolValue(s.Phase == p)), own, c.phaseLabels[j])
		}
		b.add(c.weight, c.gauge(float64(s.Weights.Stable)), own, c.targetLabels[0])
		b.add(c.weight, c.gauge(float64(s.Weights.Canary)), own, c.targetLabels[1])
		if s.Weights.Baseline > 0 {
			b.add(c.weight, c.gauge(float64(s.Weights.Baseline)), own, c.targetLabels[2])
		}
		b.add(c.step, c.gauge(float64(s.StepIndex)), own, nil)
	}
	for i := range b.series {
		ch <- &b.series[i]
	}
}

// seriesSlab holds one scrape's series, their label lists and the
// rollouts' own label pairs, each in one slice allocated at once.
type seriesSlab struct {
	series []gaugeSeries
	// Each series' labels, sorted by name (cluster, name, namespace, then
	// phase or target): the registry sorts a copy of labels out of order.
	labels []*dto.LabelPair
	pairs  []dto.LabelPair  // cluster, name, namespace of each rollout
	values []string         // their values
	own    []*dto.LabelPair // pointers to them
}

func newSeriesSlab(rollouts int) *seriesSlab {
	return &seriesSlab{
		series: make([]gaugeSeries, 0, seriesPerRollout*rollouts),
		labels: make([]*dto.LabelPair, 0, 4*seriesPerRollout*rollouts),
		pairs:  make([]dto.LabelPair, 3*rollouts),
		values: make([]string, 3*rollouts),
		own:    make([]*dto.LabelPair, 3*rollouts),
	}
}

// rolloutLabels are rollout i's cluster, name and namespace pairs, the
// cluster home for a rollout in no cluster.
func (b *seriesSlab) rolloutLabels(i int, key api.Key, home string) []*dto.LabelPair {
	cluster := key.Cluster()
	if cluster == "" {
		cluster = home
	}
	names := [3]*string{&labelCluster, &labelName, &labelNamespace}
	values := [3]string{cluster, key.Parent().Name, key.Namespace}
	for j := range 3 {
		b.values[3*i+j] = values[j]
		p := &b.pairs[3*i+j]
		p.Name, p.Value = names[j], &b.values[3*i+j]
		b.own[3*i+j] = p
	}
	return b.own[3*i : 3*i+3]
}

// add appends a series of desc with value g and labels own, then extra
// when not nil.
func (b *seriesSlab) add(desc *prometheus.Desc, g *dto.Gauge, own []*dto.LabelPair, extra *dto.LabelPair) {
	from := len(b.labels)
	b.labels = append(b.labels, own...)
	if extra != nil {
		b.labels = append(b.labels, extra)
	}
	b.series = append(b.series, gaugeSeries{desc: desc, gauge: g, labels: b.labels[from:len(b.labels):len(b.labels)]})
}

// gauge is a shared gauge of value v, or a new one.
func (c *rolloutCollector) gauge(v float64) *dto.Gauge {
	if i := int(v); float64(i) == v && i >= 0 && i < len(c.small) {
		return &c.small[i]
	}
	return &dto.Gauge{Value: new(v)}
}

// The label names every rollout's label pairs point to.
var labelCluster, labelName, labelNamespace = "cluster", "name", "namespace"

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// gaugeSeries is one series of rolloutCollector: a prometheus.Metric
// whose labels and value are shared with other series (a Metric's output
// is read-only by client_golang's contract).
type gaugeSeries struct {
	desc   *prometheus.Desc
	gauge  *dto.Gauge
	labels []*dto.LabelPair
}

func (g *gaugeSeries) Desc() *prometheus.Desc { return g.desc }

func (g *gaugeSeries) Write(out *dto.Metric) error {
	out.Label, out.Gauge = g.labels, g.gauge
	return nil
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
