package kube

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Bind error reasons, the values of the reason label of
// sluice_binder_bind_errors_total.
const (
	bindErrConflict = "conflict"  // the pod was bound meanwhile (409)
	bindErrNotFound = "not_found" // the pod is gone
	bindErrNodeGone = "node_gone" // the chosen node left before the bind
	bindErrOther    = "other"
)

type metrics struct {
	bound           prometheus.Counter
	bindErrors      *prometheus.CounterVec
	unschedulable   prometheus.Counter
	unschedulableNo prometheus.Gauge
	bindLatency     prometheus.Histogram
	e2e             prometheus.Histogram
}

// newMetrics registers the binder metrics on reg (none when reg is nil).
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		bound: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_binder_pods_bound_total",
			Help: "Pods the binder bound to a node through pods/binding.",
		}),
		bindErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_binder_bind_errors_total",
			Help: "Bind attempts that failed, by reason (conflict, not_found, node_gone, other); each is un-assumed and retried or dropped.",
		}, []string{"reason"}),
		unschedulable: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_binder_unschedulable_total",
			Help: "Scheduling attempts that found no node for a pod (the pod gets PodScheduled=False and a FailedScheduling event).",
		}),
		unschedulableNo: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_binder_unschedulable_pods",
			Help: "Pods waiting for a cluster change because no node fits them.",
		}),
		bindLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sluice_binder_bind_duration_seconds",
			Help:    "Latency of the pods/binding call.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		e2e: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sluice_binder_pod_scheduling_seconds",
			Help:    "Time from a pod's first sight by the binder to its successful bind, retries included (kube-scheduler's pod_scheduling_sli_duration_seconds).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
	}
	for _, r := range []string{bindErrConflict, bindErrNotFound, bindErrNodeGone, bindErrOther} {
		m.bindErrors.WithLabelValues(r)
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.bound, m.bindErrors, m.unschedulable, m.unschedulableNo, m.bindLatency, m.e2e} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register binder metrics: %w", err)
		}
	}
	return m, nil
}
