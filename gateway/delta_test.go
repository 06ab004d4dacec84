package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/sluice-dev/sluice/api"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
)

type deltaClient struct {
	t *testing.T
	s grpc.BidiStreamingClient[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse]
}

func newDeltaClient(t *testing.T, addr string) *deltaClient {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := adsClient(t, addr).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return &deltaClient{t: t, s: s}
}

func (c *deltaClient) send(req *discoveryv3.DeltaDiscoveryRequest) {
	c.t.Helper()
	// io.EOF means the server already ended the stream (a refused
	// stream ends before its first request is read); the status is
	// what the next Recv returns, as gRPC's SendMsg documents.
	if err := c.s.Send(req); err != nil && !errors.Is(err, io.EOF) {
		c.t.Fatal(err)
	}
}

func (c *deltaClient) recv() *discoveryv3.DeltaDiscoveryResponse {
	c.t.Helper()
	type result struct {
		r   *discoveryv3.DeltaDiscoveryResponse
		err error
	}
	ch := make(chan result, 1)
	go func() { r, err := c.s.Recv(); ch <- result{r, err} }()
	select {
	case res := <-ch:
		if res.err != nil {
			c.t.Fatalf("recv: %v", res.err)
		}
		return res.r
	case <-time.After(20 * time.Second):
		c.t.Fatal("no delta response within 20s")
	}
	return nil
}

func (c *deltaClient) ack(r *discoveryv3.DeltaDiscoveryResponse) {
	c.t.Helper()
	c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce()})
}

func deltaNames(r *discoveryv3.DeltaDiscoveryResponse) []string {
	var out []string
	for _, x := range r.GetResources() {
		out = append(out, x.GetName())
	}
	slices.Sort(out)
	return out
}

// TestDelta checks incremental xDS: initial state, a change sends only the
// changed resource, removal sends removed names, and a reconnect with
// initial_resource_versions gets only what differs. It subscribes to the
// sluice-http route of the combined layout (TestEnvoyScopedRoutes covers
// the scoped one).
func TestDelta(t *testing.T) {
	srv := startServer(t, "127.0.0.1:0", func(o *Options) { o.EnvoyRoutes = EnvoyRoutesCombined })
	ver, err := srv.SetTraffic(traffic(nil))
	if err != nil {
		t.Fatal(err)
	}
	c := newDeltaClient(t, srv.addr)
	c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURLs[cds], Node: nodeProto("envoy-delta")})
	clusters := c.recv()
	if got := deltaNames(clusters); !slices.Equal(got, []string{"default/checkout/canary", "default/checkout/stable"}) {
		t.Fatalf("wildcard clusters %v", got)
	}
	c.ack(clusters)
	c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURLs[rds], ResourceNamesSubscribe: []string{EnvoyName}})
	c.ack(c.recv())
	waitAck(t, srv.Server, host, ver)

	t.Run("weight change sends the route only", func(t *testing.T) {
		v, err := srv.SetTraffic(traffic(func(tr *api.Traffic) { tr.Weights = api.CanaryWeights(40) }))
		if err != nil {
			t.Fatal(err)
		}
		r := c.recv()
		if r.GetTypeUrl() != typeURLs[rds] || !slices.Equal(deltaNames(r), []string{EnvoyName}) {
			t.Fatalf("got %s %v, want the sluice-http route", r.GetTypeUrl(), deltaNames(r))
		}
		c.ack(r)
		waitAck(t, srv.Server, host, v)
	})

	other := api.Key{Namespace: "shop", Name: "cart"}
	t.Run("new rollout sends only its clusters", func(t *testing.T) {
		if _, err := srv.SetTraffic(api.Traffic{Rollout: other, Host: "cart.internal", StableEndpoints: []string{"127.0.0.1:9100"}, Weights: api.CanaryWeights(0)}); err != nil {
			t.Fatal(err)
		}
		r := c.recv()
		if r.GetTypeUrl() != typeURLs[cds] || !slices.Equal(deltaNames(r), []string{"shop/cart/canary", "shop/cart/stable"}) {
			t.Fatalf("got %s %v, want shop/cart clusters", r.GetTypeUrl(), deltaNames(r))
		}
		c.ack(r)
		c.ack(c.recv()) // the sluice-http route gained a virtual host
	})

	t.Run("reconnect with versions gets only what differs", func(t *testing.T) {
		c2 := newDeltaClient(t, srv.addr)
		known := map[string]string{}
		for _, x := range clusters.GetResources() {
			known[x.GetName()] = x.GetVersion()
		}
		known["gone/cluster/stable"] = "stale"
		c2.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURLs[cds], InitialResourceVersions: known})
		r := c2.recv()
		if !slices.Equal(deltaNames(r), []string{"shop/cart/canary", "shop/cart/stable"}) || !slices.Equal(r.GetRemovedResources(), []string{"gone/cluster/stable"}) {
			t.Fatalf("got %v removed %v, want only shop/cart and the stale name removed", deltaNames(r), r.GetRemovedResources())
		}
	})

	t.Run("remove sends removed names", func(t *testing.T) {
		if err := srv.Remove(other); err != nil {
			t.Fatal(err)
		}
		r := c.recv()
		got := slices.Sorted(slices.Values(r.GetRemovedResources()))
		if r.GetTypeUrl() != typeURLs[cds] || !slices.Equal(got, []string{"shop/cart/canary", "shop/cart/stable"}) {
			t.Fatalf("got %s removed %v", r.GetTypeUrl(), got)
		}
	})
}

// TestDeltaNack checks that a delta NACK is recorded, reported, surfaced by
// WaitForAck, and not answered by re-sending the rejected resource.
func TestDeltaNack(t *testing.T) {
	var got []Nack
	var mu sync.Mutex
	srv := startServer(t, "127.0.0.1:0", func(o *Options) {
		o.EnvoyRoutes = EnvoyRoutesCombined // subscribes to the sluice-http route
		o.OnNack = func(n Nack) { mu.Lock(); got = append(got, n); mu.Unlock() }
	})
	if _, err := srv.SetTraffic(traffic(nil)); err != nil {
		t.Fatal(err)
	}
	c := newDeltaClient(t, srv.addr)
	c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURLs[rds], ResourceNamesSubscribe: []string{EnvoyName}, Node: nodeProto("envoy-nack")})
	c.ack(c.recv())
	c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURLs[cds]})
	c.ack(c.recv())

	v, err := srv.SetTraffic(traffic(func(tr *api.Traffic) { tr.Weights = api.CanaryWeights(30) }))
	if err != nil {
		t.Fatal(err)
	}
	r := c.recv()
	c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce(), ErrorDetail: &statuspb.Status{Code: 3, Message: "delta says no"}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.WaitForAck(ctx, host, v); !errors.Is(err, ErrNack) || !strings.Contains(err.Error(), "delta says no") {
		t.Fatalf("WaitForAck = %v, want ErrNack with the detail", err)
	}
	// The next response is the next change (a new cluster), not the
	// rejected route again.
	if _, err := srv.SetTraffic(api.Traffic{Rollout: api.Key{Namespace: "shop", Name: "cart"}, Host: "cart.internal", StableEndpoints: []string{"127.0.0.1:9100"}, Weights: api.CanaryWeights(0)}); err != nil {
		t.Fatal(err)
	}
	if r := c.recv(); r.GetTypeUrl() != typeURLs[cds] {
		t.Fatalf("after nack got %s, want the cluster change", r.GetTypeUrl())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0].Node != "envoy-nack" || got[0].Detail != "delta says no" || got[0].TypeURL != typeURLs[rds] {
		t.Errorf("OnNack got %+v", got)
	}
}

// TestDeltaAckAfterManyResponses checks that a delta client's ACKs count
// when it was sent more responses than the server remembers (maxInflight)
// before it answered the first: the older responses' resources are ACKed
// with a later response's nonce instead of being forgotten.
func TestDeltaAckAfterManyResponses(t *testing.T) {
	srv := startServer(t, "127.0.0.1:0", nil)
	const n = maxInflight + 8
	hosts := make([]string, n)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("h%03d.internal", i)
	}
	c := newDeltaClient(t, srv.addr)
	// A gRPC client of every host: named listeners and routes.
	c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURLs[lds], ResourceNamesSubscribe: hosts, Node: nodeProto("delta-lagging")})
	c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURLs[rds], ResourceNamesSubscribe: hosts})
	versions := make([]string, n)
	var responses []*discoveryv3.DeltaDiscoveryResponse
	for i, h := range hosts {
		v, err := srv.SetTraffic(api.Traffic{Rollout: api.Key{Namespace: "lag", Name: fmt.Sprintf("r%03d", i)}, Host: h,
			StableEndpoints: []string{"127.0.0.1:9100"}, Weights: api.CanaryWeights(0)})
		if err != nil {
			t.Fatal(err)
		}
		versions[i] = v
		// Each rollout adds one listener and one route: read both before
		// the next, so every response carries one host and none is merged.
		responses = append(responses, c.recv(), c.recv())
	}
	for _, r := range responses {
		c.ack(r)
	}
	for _, i := range []int{0, n / 2, n - 1} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := srv.WaitForAck(ctx, hosts[i], versions[i])
		cancel()
		if err != nil {
			t.Errorf("host %d of %d, ACKed after %d unanswered responses: %v", i, n, len(responses), err)
		}
	}
}
