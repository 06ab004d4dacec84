package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
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
//
// Traffic that would send a side to no endpoint is held, not published:
// the clients keep their last routes until the side's endpoints are in the
// cluster's EndpointSlices, which lag the pods' readiness (another
// controller writes them) most at the moment a Service's selector moves.
type ClusterTraffic struct {
	next runner.Traffic
	eps  EndpointSource
	log  *slog.Logger

	mu   sync.Mutex
	last map[api.Key]api.Traffic // the latest traffic the runner asked for
	held map[api.Key]*hold       // rollouts whose latest traffic waits for endpoints
	// tokens are the holds a wait may still name: every hold in force, and
	// those released since the rollout's last SetTraffic (listed in
	// released). A released token can reach WaitForAck after its publish
	// (the endpoints came between the runner's SetTraffic and its wait, or
	// the hold came and went with the endpoints on a republish) and must
	// still lead to the gateway's version.
	tokens   map[string]*hold
	released map[api.Key][]string
	holds    uint64 // numbers the holds' version tokens
}

// hold is a rollout's traffic waiting for endpoints. Its token stands in
// for a gateway version until the traffic is published; done is closed
// then, with version set to the gateway's.
type hold struct {
	since   time.Time
	side    string
	token   string
	done    chan struct{}
	version string
}

// heldPrefix starts the version tokens of held traffic; gateway versions
// are numbers.
const heldPrefix = "held/"

// NewClusterTraffic publishes to next (the gateway side) with the
// endpoints eps resolves; log gets the holds and republish failures.
func NewClusterTraffic(next runner.Traffic, eps EndpointSource, log *slog.Logger) *ClusterTraffic {
	return &ClusterTraffic{next: next, eps: eps, log: log, last: map[api.Key]api.Traffic{}, held: map[api.Key]*hold{},
		tokens: map[string]*hold{}, released: map[api.Key][]string{}}
}

// SetTraffic publishes t with the cluster's endpoints of its workloads, or
// holds it until a side that has none gets some (its version is then a
// token that WaitForAck follows to the publish).
func (c *ClusterTraffic) SetTraffic(t api.Traffic) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgetReleased(t.Rollout)
	c.last[t.Rollout] = t
	return c.publish(t)
}

// forgetReleased drops the tokens of the rollout's released holds: newer
// traffic supersedes every wait on them (c.mu held).
func (c *ClusterTraffic) forgetReleased(key api.Key) {
	for _, token := range c.released[key] {
		delete(c.tokens, token)
	}
	delete(c.released, key)
}

// WaitForAck waits on the gateway: a republish is a later version, which
// carries the one waited for. Traffic held for endpoints is first waited
// for until it is published; if that takes the whole wait, the error is a
// runner.HeldError naming the side with no endpoint (the runner waits
// again rather than letting the step go on). A hold that another hold of
// the rollout replaced was superseded: its wait ends as cancelled.
func (c *ClusterTraffic) WaitForAck(ctx context.Context, host, version string) error {
	if strings.HasPrefix(version, heldPrefix) {
		h := c.holdOf(version)
		if h == nil {
			return fmt.Errorf("traffic held as %s: replaced by newer traffic of the rollout: %w", version, context.Canceled)
		}
		select {
		case <-h.done:
			version = h.version
		case <-ctx.Done():
			return &runner.HeldError{Side: c.sideOf(h), Err: ctx.Err()}
		}
	}
	return c.next.WaitForAck(ctx, host, version)
}

// holdOf is the hold a version token names, held or released (nil once
// newer traffic of the rollout superseded it).
func (c *ClusterTraffic) holdOf(token string) *hold {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tokens[token]
}

// sideOf is the side h waits for endpoints of (it changes as they come).
func (c *ClusterTraffic) sideOf(h *hold) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return h.side
}

// PublishServed publishes t as SetTraffic does, holding it while a side
// has no endpoint, with no ACK to wait for. A follower (controller/replica)
// needs it: it learns a weight from the leader's record and the endpoints
// from its own informers, which may lag behind the leader's.
func (c *ClusterTraffic) PublishServed(t api.Traffic) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgetReleased(t.Rollout)
	c.last[t.Rollout] = t
	_, err := c.publish(t)
	return err
}

// EndpointsChanged publishes the rollout's latest traffic again with the
// endpoints the cluster has now. A failure keeps the clients on their last
// good routes and is logged.
func (c *ClusterTraffic) EndpointsChanged(key api.Key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.last[key]
	if !ok || t.Host == "" {
		return
	}
	if _, err := c.publish(t); err != nil {
		c.log.Warn("republish traffic with new endpoints", "rollout", key.String(), "err", err)
	}
}

// publish resolves t's endpoints and publishes it, or holds it while a
// side has none (c.mu held). It returns the gateway's version, or the
// hold's token.
func (c *ClusterTraffic) publish(t api.Traffic) (string, error) {
	resolved := c.eps.ResolveTraffic(t)
	if side := unservedSide(resolved); side != "" {
		return c.hold(t, side).token, nil
	}
	version, err := c.next.SetTraffic(resolved)
	if err != nil {
		return "", err
	}
	c.release(t.Rollout, version)
	return version, nil
}

// hold starts (or keeps) the hold of t's rollout. It is logged at Info
// once per hold: a held weight delays the clients, and a step waiting for
// their ACK (on a follower, behind the leader: issue 13's propagation
// delay).
func (c *ClusterTraffic) hold(t api.Traffic, side string) *hold {
	if h, ok := c.held[t.Rollout]; ok {
		h.side = side
		return h
	}
	c.holds++
	h := &hold{since: time.Now(), side: side, token: heldPrefix + strconv.FormatUint(c.holds, 10), done: make(chan struct{})}
	c.held[t.Rollout] = h
	c.tokens[h.token] = h
	c.log.Info("traffic held until its endpoints are Ready", "rollout", t.Rollout.String(), "side", side,
		"stable", t.Weights.Stable, "canary", t.Weights.Canary, "baseline", t.Weights.Baseline)
	return h
}

// release ends the rollout's hold, if any, with the version published.
func (c *ClusterTraffic) release(key api.Key, version string) {
	h, ok := c.held[key]
	if !ok {
		return
	}
	delete(c.held, key)
	c.released[key] = append(c.released[key], h.token)
	h.version = version
	close(h.done)
	c.log.Info("held traffic published", "rollout", key.String(), "held", time.Since(h.since).Round(time.Millisecond).String())
}

// unservedSide names a side of the cluster's workloads that would get
// traffic but has no endpoint ("" when none). The stable side always
// needs endpoints: the gateway refuses a cluster without any.
func unservedSide(t api.Traffic) string {
	switch {
	case t.StableWorkload != "" && len(t.StableEndpoints) == 0:
		return "stable"
	case t.Weights.Canary > 0 && len(t.CanaryEndpoints) == 0:
		return "canary"
	case t.Weights.Baseline > 0 && len(t.BaselineEndpoints) == 0:
		return "baseline"
	}
	return ""
}
