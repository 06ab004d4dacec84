package gateway

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/sluice-dev/sluice/api"
)

// These tests follow the sluice-http listener the way Envoy does in the
// scoped layout (the default): listeners and clusters by wildcard, route
// scopes by wildcard, then the route configuration each scope names.

var basket = api.Key{Namespace: "shop", Name: "basket"}

func basketTraffic() api.Traffic {
	return api.Traffic{Rollout: basket, Host: "basket.internal", StableEndpoints: []string{"127.0.0.1:9200"}, Weights: api.CanaryWeights(0)}
}

// canaryWeight reads the canary's share of the default route of a
// route configuration.
func canaryWeight(t *testing.T, f *follower, host string) uint32 {
	t.Helper()
	a := f.Resource(resourcev3.RouteType, host)
	if a == nil {
		t.Fatalf("%s has no route configuration %s", f.name, host)
	}
	rc := &routev3.RouteConfiguration{}
	if err := a.UnmarshalTo(rc); err != nil {
		t.Fatal(err)
	}
	for _, r := range rc.GetVirtualHosts()[0].GetRoutes() {
		if r.GetName() != "default" {
			continue
		}
		for _, wc := range r.GetRoute().GetWeightedClusters().GetClusters() {
			if wc.GetName() == ClusterName(checkout, Canary) {
				return wc.GetWeight().GetValue()
			}
		}
		return 0
	}
	t.Fatalf("route configuration %s has no default route", host)
	return 0
}

// TestEnvoyScopedRoutes checks what an Envoy-shaped subscriber of the
// sluice-http listener gets in the scoped layout, over delta and state of
// the world: every host's scope and routes; after a weight change, the
// changed host's route configuration alone (delta: nothing else at all);
// a new rollout's scope, routes, listener and clusters; and, when a
// rollout is removed, its resources withdrawn.
func TestEnvoyScopedRoutes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		delta bool
	}{{"delta", true}, {"sotw", false}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startServer(t, "127.0.0.1:0", nil)
			if _, err := srv.SetTraffic(traffic(nil)); err != nil {
				t.Fatal(err)
			}
			if _, err := srv.SetTraffic(cartTraffic()); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			envoy := startFollower(ctx, t, srv.addr, "envoy-"+tc.name, tc.delta, true, "")
			waitComplete(t, []*follower{envoy})
			hosts := []string{"cart.internal", host}
			for _, typ := range []string{resourcev3.ScopedRouteType, resourcev3.RouteType} {
				if got := envoy.Names(typ); !slices.Equal(got, hosts) {
					t.Fatalf("%s: %v, want %v", typ, got, hosts)
				}
			}

			mark := envoy.Responses()
			v, err := srv.SetTraffic(traffic(func(tr *api.Traffic) { tr.Weights = api.CanaryWeights(40) }))
			if err != nil {
				t.Fatal(err)
			}
			waitAck(t, srv.Server, host, v) // the Envoy subscriber counts as interested through its scopes
			if w := canaryWeight(t, envoy, host); w != 40 {
				t.Fatalf("canary weight %d after the change, want 40", w)
			}
			got := envoy.Since(mark)
			for _, r := range got {
				if r.TypeURL != resourcev3.RouteType {
					t.Errorf("weight change sent %v; want route configurations only", r)
				}
			}
			if tc.delta && (len(got) != 1 || !slices.Equal(got[0].Names, []string{host})) {
				t.Errorf("delta: weight change sent %v; want exactly RouteConfiguration %s", got, host)
			}

			mark = envoy.Responses()
			v, err = srv.SetTraffic(basketTraffic())
			if err != nil {
				t.Fatal(err)
			}
			waitAck(t, srv.Server, "basket.internal", v)
			for typ, name := range map[string]string{
				resourcev3.ScopedRouteType: "basket.internal", resourcev3.RouteType: "basket.internal", resourcev3.ListenerType: "basket.internal",
				resourcev3.ClusterType: "shop/basket/stable", resourcev3.EndpointType: "shop/basket/canary",
			} {
				if envoy.Resource(typ, name) == nil {
					t.Errorf("after adding shop/basket the subscriber has no %s %s", typ, name)
				}
			}
			if tc.delta {
				for _, r := range envoy.Since(mark) {
					for _, n := range r.Names {
						if n != "basket.internal" && n != "shop/basket/stable" && n != "shop/basket/canary" {
							t.Errorf("adding shop/basket sent %v; want shop/basket's resources only", r)
						}
					}
				}
			}

			if err := srv.Remove(basket); err != nil {
				t.Fatal(err)
			}
			gone := map[string]string{resourcev3.ScopedRouteType: "basket.internal", resourcev3.ListenerType: "basket.internal", resourcev3.ClusterType: "shop/basket/stable"}
			if tc.delta { // state of the world never withdraws a route configuration: Envoy forgets it with its scope
				gone[resourcev3.RouteType] = "basket.internal"
				gone[resourcev3.EndpointType] = "shop/basket/stable"
			}
			eventually(t, 10*time.Second, "shop/basket's resources withdrawn", func() bool {
				for typ, name := range gone {
					if envoy.Resource(typ, name) != nil {
						return false
					}
				}
				return true
			})
			if ok, err := envoy.Complete(); err != nil {
				t.Fatalf("stream: %v (ok %v)", err, ok)
			}
		})
	}
}

// TestEnvoyScopedAckWait checks that an Envoy that has the route scopes is
// waited for until it ACKed the host's route configuration, even before it
// asked for it: it asks only after it has the scope.
func TestEnvoyScopedAckWait(t *testing.T) {
	srv := startServer(t, "127.0.0.1:0", nil)
	v, err := srv.SetTraffic(traffic(nil))
	if err != nil {
		t.Fatal(err)
	}
	c := newDeltaClient(t, srv.addr)
	c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURLs[srds], Node: nodeProto("envoy-scopes")})
	scopes := c.recv()
	if !slices.Equal(deltaNames(scopes), []string{host}) {
		t.Fatalf("scopes %v, want [%s]", deltaNames(scopes), host)
	}
	c.ack(scopes)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := srv.WaitForAck(ctx, host, v); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitForAck while the routes are not ACKed = %v, want deadline exceeded", err)
	}
	c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURLs[rds], ResourceNamesSubscribe: []string{host}})
	c.ack(c.recv())
	waitAck(t, srv.Server, host, v)
}

// TestPublishedResourcesValidate checks every resource the server
// publishes, in both Envoy layouts, with the protos' ValidateAll, and the
// HttpConnectionManager inside every listener's Any with ValidateAll and
// the listener rules (ValidateEnvoy for sluice-http).
func TestPublishedResourcesValidate(t *testing.T) {
	for _, layout := range []EnvoyRouteLayout{EnvoyRoutesScoped, EnvoyRoutesCombined} {
		t.Run(string(layout), func(t *testing.T) {
			s, err := New(Options{EnvoyRoutes: layout})
			if err != nil {
				t.Fatal(err)
			}
			for _, tr := range []api.Traffic{traffic(nil), cartTraffic(), basketTraffic(), traffic(func(tr *api.Traffic) {
				tr.HeaderRoutes = []api.HeaderRoute{{Name: "testers", Match: []api.HeaderMatch{{HeaderName: "x-canary", HeaderValue: api.StringMatch{Regex: "on|yes"}}}}}
			})} {
				if _, err := s.SetTraffic(tr); err != nil {
					t.Fatal(err)
				}
			}
			snap := s.snap.Load()
			counts := map[typeIdx]int{}
			for ti, ts := range snap.types {
				for _, r := range ts.all() {
					m, err := r.any.UnmarshalNew()
					if err != nil {
						t.Fatalf("%s: %v", r.name, err)
					}
					if err := m.(validator).ValidateAll(); err != nil {
						t.Errorf("%s %s: %v", ts.url, r.name, err)
					}
					if l, ok := m.(*listenerv3.Listener); ok && l.GetName() == EnvoyName {
						if err := ValidateEnvoy(l, nil); err != nil {
							t.Errorf("sluice-http listener: %v", err)
						}
					} else if ok {
						if _, err := unpackHCM(l.GetApiListener().GetApiListener()); err != nil {
							t.Errorf("listener %s: %v", l.GetName(), err)
						}
					}
					counts[typeIdx(ti)]++
				}
			}
			wantScopes, wantRoutes := 3, 3
			if layout == EnvoyRoutesCombined {
				wantScopes, wantRoutes = 0, 4
			}
			if counts[srds] != wantScopes || counts[rds] != wantRoutes || counts[lds] != 4 {
				t.Errorf("published %d scopes, %d routes, %d listeners; want %d, %d, 4", counts[srds], counts[rds], counts[lds], wantScopes, wantRoutes)
			}
		})
	}
}
