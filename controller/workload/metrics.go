package workload

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Object kinds, the object label of sluice_workload_apply_errors_total.
const (
	objectReplicaSet = "replicaset"
	objectService    = "service"
	objectPod        = "pod"
)

type metrics struct {
	applyErrors *prometheus.CounterVec
}

func newMetrics(reg *prometheus.Registry) (*metrics, error) {
	m := &metrics{
		applyErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_workload_apply_errors_total",
			Help: "Failed writes to the cluster by the workload actuator (or the reads they need), by object: replicaset (apply, scale to 0, delete), pod (labels of an adopted ReplicaSet's pods) or service (selector pin).",
		}, []string{"object"}),
	}
	for _, o := range []string{objectReplicaSet, objectPod, objectService} {
		m.applyErrors.WithLabelValues(o)
	}
	if reg == nil {
		return m, nil
	}
	if err := reg.Register(m.applyErrors); err != nil {
		return nil, fmt.Errorf("register workload metrics: %w", err)
	}
	return m, nil
}
