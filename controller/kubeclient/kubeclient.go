// Package kubeclient sets up sluice's connections to Kubernetes
// apiservers: the client-side rate limits every connection gets
// (--kube-api-qps, --kube-api-burst) and the metrics of what the clients
// send (requests by verb and resource, time spent waiting on the client's
// own rate limiter), taken from client-go's metrics hooks.
package kubeclient

import (
	"fmt"

	"k8s.io/client-go/rest"
)

// Default client rate limits, sized for 10,000 rollouts. One rollout's
// push to Paused costs sluice 12–13 requests (ReplicaSet lists and
// applies, the bind and its event; docs/scale.md "API requests per
// rollout"), so a commit that changes 10,000 rollouts is ~125,000
// requests: at 1,000 QPS the client paces it over about two minutes,
// within the 300 s goal for 10,000 rollouts, where the old fixed 100 QPS
// took twenty (Kubernetes mode at 10,000 rollouts took 711 s, requests
// waiting up to 84 s in the client). The burst lets a commit's first
// requests go out at once. What protects the apiserver is its own
// priority and fairness (APF), which queues sluice's requests in its
// flow beside everyone else's; the client limit is only a guard
// against a runaway loop, set high enough never to be the bottleneck of
// normal work.
const (
	DefaultQPS   float32 = 1000
	DefaultBurst         = 2000
)

// Limits are a connection's client-side rate limits.
type Limits struct {
	// QPS is the sustained rate of requests; a negative QPS turns
	// client-side rate limiting off (the apiserver's priority and
	// fairness is then the only limit); zero means DefaultQPS.
	QPS float32
	// Burst is how many requests may go at once above QPS; zero means
	// DefaultBurst.
	Burst int
}

// withDefaults fills the zero fields.
func (l Limits) withDefaults() Limits {
	if l.QPS == 0 {
		l.QPS = DefaultQPS
	}
	if l.Burst == 0 {
		l.Burst = DefaultBurst
	}
	return l
}

// Validate refuses limits client-go would not honour.
func (l Limits) Validate() error {
	if l.Burst < 0 {
		return fmt.Errorf("--kube-api-burst %d: must be at least 1 (0 for the default, %d)", l.Burst, DefaultBurst)
	}
	return nil
}

// Apply gives cfg the limits. A rate limiter cfg already has is dropped:
// client-go would otherwise prefer it over QPS and Burst.
func (l Limits) Apply(cfg *rest.Config) {
	l = l.withDefaults()
	cfg.RateLimiter = nil
	if l.QPS < 0 {
		// client-go builds no rate limiter for a negative QPS.
		cfg.QPS, cfg.Burst = -1, 0
		return
	}
	cfg.QPS, cfg.Burst = l.QPS, l.Burst
}
