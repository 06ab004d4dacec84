package analysis

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// engineMetrics are the analysis metrics of DESIGN §8.
type engineMetrics struct {
	value *prometheus.GaugeVec
	runs  *prometheus.CounterVec
	// tooLarge and timeouts count provider answers refused by a limit, by
	// provider (prometheus, web, judge).
	tooLarge *prometheus.CounterVec
	timeouts *prometheus.CounterVec
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
		tooLarge: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_analysis_responses_too_large_total",
			Help: "Provider responses refused because their body exceeded --analysis-max-response-bytes, by provider.",
		}, []string{"provider"}),
		timeouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_analysis_timeouts_total",
			Help: "Measurements that ended in Error because the provider did not answer within its timeout, by provider.",
		}, []string{"provider"}),
	}
	for _, c := range []prometheus.Collector{m.value, m.runs, m.tooLarge, m.timeouts} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register analysis metrics: %w", err)
		}
	}
	return m, nil
}
