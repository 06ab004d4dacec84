package analysis

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// engineMetrics are the analysis metrics of DESIGN §8.
type engineMetrics struct {
	value *prometheus.GaugeVec
	runs  *prometheus.CounterVec
}

func newEngineMetrics(reg *prometheus.Registry) (*engineMetrics, error) {
	m := &engineMetrics{
		value: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_analysis_metric_value",
			Help: "Latest measured value of an analysis metric (scalar results only).",
		}, []string{"namespace", "name", "metric"}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_analysis_runs_total",
			Help: "Analysis runs finished, by phase.",
		}, []string{"namespace", "name", "phase"}),
	}
	for _, c := range []prometheus.Collector{m.value, m.runs} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register analysis metrics: %w", err)
		}
	}
	return m, nil
}
