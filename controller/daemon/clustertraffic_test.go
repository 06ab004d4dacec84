package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/runner"
)

// endpointsByHash stands in for the cluster: the endpoints of each hash.
type endpointsByHash map[string][]string

func (e endpointsByHash) ResolveTraffic(t api.Traffic) api.Traffic {
	t.StableEndpoints = e[t.StableWorkload]
	t.CanaryEndpoints = e[t.CanaryWorkload]
	return t
}

// publishLog records what reaches the gateway.
type publishLog struct{ got []api.Traffic }

func (p *publishLog) SetTraffic(t api.Traffic) (string, error) {
	p.got = append(p.got, t)
	return "v", nil
}

func (p *publishLog) WaitForAck(context.Context, string, string) error { return nil }

// TestClusterTrafficRepublishes: the endpoints come from the cluster at
// each publish, and a change of them publishes the runner's latest traffic
// again (same weights and routes) without a state transition.
func TestClusterTrafficRepublishes(t *testing.T) {
	eps := endpointsByHash{"h1": {"10.244.0.1:8080"}, "h2": {"10.244.0.2:8080"}}
	gw := &publishLog{}
	c := NewClusterTraffic(gw, eps, slog.New(slog.DiscardHandler))
	key := api.Key{Namespace: "shop", Name: "checkout"}
	want := api.Traffic{Rollout: key, Host: "checkout.shop", StableWorkload: "h1", CanaryWorkload: "h2", Weights: api.CanaryWeights(25)}
	if _, err := c.SetTraffic(want); err != nil {
		t.Fatal(err)
	}
	eps["h2"] = []string{"10.244.0.2:8080", "10.244.0.3:8080"}
	c.EndpointsChanged(key)
	c.EndpointsChanged(api.Key{Namespace: "shop", Name: "unknown"}) // never published: nothing to do

	if len(gw.got) != 2 {
		t.Fatalf("published %d times, want 2: %+v", len(gw.got), gw.got)
	}
	last := gw.got[1]
	if last.Weights != want.Weights || last.Host != want.Host {
		t.Errorf("republished %+v; want the runner's traffic with new endpoints", last)
	}
	if !slices.Equal(last.CanaryEndpoints, []string{"10.244.0.2:8080", "10.244.0.3:8080"}) || !slices.Equal(last.StableEndpoints, []string{"10.244.0.1:8080"}) {
		t.Errorf("republished endpoints stable %v canary %v", last.StableEndpoints, last.CanaryEndpoints)
	}
}

// TestFollowerHoldsTrafficUntilEndpoints: a follower that learns a canary
// weight before its own informers see the canary's Ready pods keeps the
// clients on their last routes (no weight on an empty cluster, which
// fails calls), and publishes as soon as the endpoints arrive.
func TestFollowerHoldsTrafficUntilEndpoints(t *testing.T) {
	eps := endpointsByHash{"h1": {"10.244.0.1:8080"}}
	gw := &publishLog{}
	var logs bytes.Buffer
	c := NewClusterTraffic(gw, eps, slog.New(slog.NewTextHandler(&logs, nil)))
	key := api.Key{Namespace: "shop", Name: "checkout"}
	stable := api.Traffic{Rollout: key, Host: "checkout.shop", StableWorkload: "h1", CanaryWorkload: "h1", Weights: api.CanaryWeights(0)}
	if err := c.PublishServed(stable); err != nil {
		t.Fatal(err)
	}
	canary := stable
	canary.CanaryWorkload, canary.Weights = "h2", api.CanaryWeights(50)
	if err := c.PublishServed(canary); err != nil {
		t.Fatal(err)
	}
	if len(gw.got) != 1 {
		t.Fatalf("published %d times before the canary had endpoints, want only the stable traffic: %+v", len(gw.got), gw.got)
	}
	eps["h2"] = []string{"10.244.0.2:8080"}
	c.EndpointsChanged(key)
	if len(gw.got) != 2 || gw.got[1].Weights != canary.Weights || !slices.Equal(gw.got[1].CanaryEndpoints, eps["h2"]) {
		t.Fatalf("after the canary's endpoints arrived: published %+v", gw.got)
	}
	// A hold delays this replica's clients behind the leader's: it is
	// logged at Info, once when it begins and once when it ends.
	for _, msg := range []string{`level=INFO msg="traffic held until its endpoints are Ready"`, `level=INFO msg="held traffic published"`} {
		if n := strings.Count(logs.String(), msg); n != 1 {
			t.Errorf("%d log lines %s, want 1; logs:\n%s", n, msg, logs.String())
		}
	}
}

// ackLog is a gateway that records which versions were waited for.
type ackLog struct {
	publishLog
	mu     sync.Mutex
	waited []string
}

func (a *ackLog) SetTraffic(t api.Traffic) (string, error) {
	a.got = append(a.got, t)
	return fmt.Sprint(len(a.got)), nil
}

func (a *ackLog) WaitForAck(_ context.Context, _, version string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.waited = append(a.waited, version)
	return nil
}

// TestClusterTrafficHoldsStepUntilEndpoints: the runner's traffic for a
// step whose side has no endpoint yet (an EndpointSlice behind the pods'
// readiness, as when a Service's selector has just moved) is not sent to
// the gateway, which would refuse a stable side without endpoints or fail
// calls to an empty canary; the step's ACK wait follows the hold to the
// publish, and a hold that outlasts the wait is a runner.HeldError naming
// the side (so the runner waits on rather than letting the step go on).
func TestClusterTrafficHoldsStepUntilEndpoints(t *testing.T) {
	for _, side := range []string{"stable", "canary"} {
		t.Run(side, func(t *testing.T) {
			eps := endpointsByHash{"h1": {"10.244.0.1:8080"}, "h2": {"10.244.0.2:8080"}}
			missing := map[string]string{"stable": "h1", "canary": "h2"}[side]
			delete(eps, missing)
			gw := &ackLog{}
			c := NewClusterTraffic(gw, eps, slog.New(slog.DiscardHandler))
			key := api.Key{Namespace: "shop", Name: "checkout"}
			tr := api.Traffic{Rollout: key, Host: "checkout.shop", StableWorkload: "h1", CanaryWorkload: "h2", Weights: api.CanaryWeights(50)}
			version, err := c.SetTraffic(tr)
			if err != nil {
				t.Fatal(err)
			}
			if len(gw.got) != 0 {
				t.Fatalf("published %+v while the %s side had no endpoint", gw.got, side)
			}
			short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			var held *runner.HeldError
			if err := c.WaitForAck(short, tr.Host, version); !errors.As(err, &held) || held.Side != side || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("wait on a hold that outlasts it: %v; want a runner.HeldError naming the %s side", err, side)
			}
			acked := make(chan error, 1)
			go func() { acked <- c.WaitForAck(context.Background(), tr.Host, version) }()
			select {
			case err := <-acked:
				t.Fatalf("ACK wait returned %v before the traffic was published", err)
			case <-time.After(20 * time.Millisecond):
			}
			eps[missing] = []string{"10.244.0.9:8080"}
			c.EndpointsChanged(key)
			if err := <-acked; err != nil {
				t.Fatal(err)
			}
			if len(gw.got) != 1 || gw.got[0].Weights != tr.Weights {
				t.Fatalf("published %+v; want the step's traffic once", gw.got)
			}
			if !slices.Equal(gw.waited, []string{"1"}) {
				t.Errorf("waited for versions %v; want the publish's version 1", gw.waited)
			}
		})
	}
}

// TestHeldTokenOutlivesItsRelease: the endpoints can arrive between the
// runner's SetTraffic (which returned a hold's token) and its ACK wait,
// and a hold can come and go again on a republish; the token must still
// lead to the gateway's version of the publish. Before, a released token
// reached the gateway as a version ("held/1"), which it refuses, and the
// runner took that refusal for a NACK and held the canary.
func TestHeldTokenOutlivesItsRelease(t *testing.T) {
	eps := endpointsByHash{"h1": {"10.244.0.1:8080"}}
	gw := &ackLog{}
	c := NewClusterTraffic(gw, eps, slog.New(slog.DiscardHandler))
	key := api.Key{Namespace: "shop", Name: "checkout"}
	tr := api.Traffic{Rollout: key, Host: "checkout.shop", StableWorkload: "h1", CanaryWorkload: "h2", Weights: api.CanaryWeights(20)}
	token, err := c.SetTraffic(tr)
	if err != nil || !strings.HasPrefix(token, heldPrefix) {
		t.Fatalf("SetTraffic with no canary endpoint: %q, %v; want a hold's token", token, err)
	}
	eps["h2"] = []string{"10.244.0.2:8080"}
	c.EndpointsChanged(key) // published as version 1
	delete(eps, "h2")
	c.EndpointsChanged(key) // held again: a second hold, its own token
	eps["h2"] = []string{"10.244.0.3:8080"}
	c.EndpointsChanged(key) // published as version 2

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.WaitForAck(ctx, tr.Host, token); err != nil {
		t.Fatalf("wait on a token released before the wait: %v", err)
	}
	if !slices.Equal(gw.waited, []string{"1"}) {
		t.Errorf("waited for versions %v; want the version of the token's publish, 1", gw.waited)
	}

	// Newer traffic of the rollout supersedes waits on the old tokens.
	if _, err := c.SetTraffic(tr); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitForAck(ctx, tr.Host, token); !errors.Is(err, context.Canceled) {
		t.Errorf("wait on a token of superseded traffic: %v; want it cancelled", err)
	}
	if len(c.tokens) != 0 {
		t.Errorf("%d tokens kept after newer traffic was published; want none", len(c.tokens))
	}
}
