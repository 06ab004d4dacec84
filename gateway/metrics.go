package gateway

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the gateway's series from DESIGN §8.
type metrics struct {
	clients prometheus.Gauge
	push    prometheus.Histogram
	nacks   prometheus.Counter
}

func newMetrics(reg *prometheus.Registry) (*metrics, error) {
	m := &metrics{
		clients: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_xds_clients",
			Help: "Connected xDS streams (state of the world and delta).",
		}),
		push: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sluice_xds_push_seconds",
			Help:    "Time from publishing a rollout's traffic until every connected client subscribed to its host ACKed it.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
		nacks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_xds_nacks_total",
			Help: "xDS responses rejected (NACKed) by a client.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.clients, m.push, m.nacks} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
	}
	return m, nil
}
