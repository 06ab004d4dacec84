package scheduler

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Decision results, the values of the result label.
const (
	ResultScheduled     = "scheduled"
	ResultUnschedulable = "unschedulable"
	ResultError         = "error"
)

type metrics struct {
	decision                     *prometheus.HistogramVec
	scheduled, unschedulable, er prometheus.Observer
	placed, failed               prometheus.Counter
}

// newMetrics registers the scheduler metrics on reg (none when reg is
// nil). Observers are resolved once so recording a decision does not
// allocate.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		decision: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sluice_scheduler_decision_seconds",
			Help:    "Time to decide where one pod goes (filter, score, reserve, bind), by result.",
			Buckets: prometheus.ExponentialBuckets(1e-6, 4, 11),
		}, []string{"result"}),
		placed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_scheduler_pods_placed_total",
			Help: "Pods the scheduler placed on a node.",
		}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_scheduler_pods_unschedulable_total",
			Help: "Scheduling attempts that found no node for the pod.",
		}),
	}
	m.scheduled = m.decision.WithLabelValues(ResultScheduled)
	m.unschedulable = m.decision.WithLabelValues(ResultUnschedulable)
	m.er = m.decision.WithLabelValues(ResultError)
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.decision, m.placed, m.failed} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register scheduler metrics: %w", err)
		}
	}
	return m, nil
}
