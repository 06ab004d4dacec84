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
	// nacksIgnored counts NACKs not reported to any rollout, by reason.
	nacksIgnored *prometheus.CounterVec
	// refused counts streams ended by a limit or the node allow-list.
	refused *prometheus.CounterVec
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
		nacksIgnored: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_xds_nacks_ignored_total",
			Help: "xDS NACKs not reported to any rollout: unknown_nonce (a response this stream was not last sent) or nothing_new (it only holds resources this stream had already ACKed).",
		}, []string{"reason"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_xds_refused_total",
			Help: "xDS streams ended by a limit or the node allow-list, by reason.",
		}, []string{"reason"}),
	}
	for _, r := range []string{nackUnknownNonce, nackNothingNew} {
		m.nacksIgnored.WithLabelValues(r)
	}
	for _, r := range refusedReasons {
		m.refused.WithLabelValues(r)
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.clients, m.push, m.nacks, m.nacksIgnored, m.refused} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
	}
	return m, nil
}
