package daemon

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/runner"
)

// EndpointSource fills a traffic's endpoints from the cluster: the Ready,
// non-terminating endpoints of each side's pod-template hash, with their
// zones; controller/workload implements it.
type EndpointSource interface {
	ResolveTraffic(t api.Traffic) api.Traffic
}

// ClusterTraffic fills each side's endpoints from the cluster (Kubernetes
// mode) before the traffic goes to the gateway, and publishes it again
// when the cluster's endpoints change. The state machine decides weights
// and routes; which pods stand behind each side is the cluster's news,
// like EDS beside RDS, and needs no state transition.
type ClusterTraffic struct {
	next runner.Traffic
	eps  EndpointSource
	log  *slog.Logger

	mu   sync.Mutex
	last map[api.Key]api.Traffic // the latest traffic the runner asked for
	held map[api.Key]time.Time   // since when PublishServed holds a rollout's traffic
}

// NewClusterTraffic publishes to next (the gateway side) with the
// endpoints eps resolves; log gets the holds and republish failures.
func NewClusterTraffic(next runner.Traffic, eps EndpointSource, log *slog.Logger) *ClusterTraffic {
	return &ClusterTraffic{next: next, eps: eps, log: log, last: map[api.Key]api.Traffic{}, held: map[api.Key]time.Time{}}
}

// SetTraffic publishes t with the cluster's endpoints of its workloads.
func (c *ClusterTraffic) SetTraffic(t api.Traffic) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last[t.Rollout] = t
	return c.next.SetTraffic(c.eps.ResolveTraffic(t))
}

// WaitForAck waits on the gateway: a republish is a later version, which
// carries the one waited for.
func (c *ClusterTraffic) WaitForAck(ctx context.Context, host, version string) error {
	return c.next.WaitForAck(ctx, host, version)
}

// PublishServed publishes t, as SetTraffic does, unless a side that t
// sends traffic to has no endpoint in the cluster yet: then the clients
// keep their last routes and EndpointsChanged publishes t once the side
// has endpoints. A follower (controller/replica) needs it: it learns a weight from the leader's
// record and the endpoints from its own informers, which may lag behind
// the leader's, and a weight on a side without endpoints fails calls.
func (c *ClusterTraffic) PublishServed(t api.Traffic) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last[t.Rollout] = t
	return c.republish(t)
}

// EndpointsChanged publishes the rollout's latest traffic again with the
// endpoints the cluster has now. A failure (say, no stable endpoint left)
// keeps the clients on their last good routes and is logged.
func (c *ClusterTraffic) EndpointsChanged(key api.Key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.last[key]
	if !ok || t.Host == "" {
		return
	}
	if err := c.republish(t); err != nil {
		c.log.Warn("republish traffic with new endpoints", "rollout", key.String(), "err", err)
	}
}

// republish resolves t's endpoints and publishes it unless a weighted side
// has none (c.mu held).
func (c *ClusterTraffic) republish(t api.Traffic) error {
	resolved := c.eps.ResolveTraffic(t)
	if side := unservedSide(resolved); side != "" {
		// Logged at Info once per hold: a held weight delays this
		// replica's clients, and the leader's step that waits for their
		// ACK, behind the leader's (issue 13's propagation delay).
		if _, ok := c.held[t.Rollout]; !ok {
			c.held[t.Rollout] = time.Now()
			c.log.Info("traffic held until its endpoints are Ready", "rollout", t.Rollout.String(), "side", side,
				"canary", t.Weights.Canary, "baseline", t.Weights.Baseline)
		}
		return nil
	}
	if _, err := c.next.SetTraffic(resolved); err != nil {
		return err
	}
	if since, ok := c.held[t.Rollout]; ok {
		delete(c.held, t.Rollout)
		c.log.Info("held traffic published", "rollout", t.Rollout.String(), "held", time.Since(since).Round(time.Millisecond).String())
	}
	return nil
}

// unservedSide names a side with a weight but no endpoint ("" when none).
// The stable side is the gateway's check (it refuses the traffic).
func unservedSide(t api.Traffic) string {
	switch {
	case t.Weights.Canary > 0 && len(t.CanaryEndpoints) == 0:
		return "canary"
	case t.Weights.Baseline > 0 && len(t.BaselineEndpoints) == 0:
		return "baseline"
	}
	return ""
}
