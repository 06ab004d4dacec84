package diffengine

import (
	"slices"
	"testing"

	"github.com/sluice-dev/sluice/api"
)

func TestDiffTraffic(t *testing.T) {
	base := api.Traffic{
		Rollout:         api.Key{Namespace: "default", Name: "checkout"},
		Host:            "checkout.internal",
		StableVersion:   "shop/checkout:v1",
		CanaryVersion:   "shop/checkout:v2",
		StableEndpoints: []string{"127.0.0.1:9001"},
		CanaryEndpoints: []string{"127.0.0.1:9002"},
		Weights:         api.CanaryWeights(10),
	}
	testers := api.HeaderRoute{Name: "testers", Match: []api.HeaderMatch{{HeaderName: "x-canary", HeaderValue: api.StringMatch{Exact: "always"}}}}
	tests := []struct {
		name   string
		change func(*api.Traffic)
		want   []string
	}{
		{"no change", func(*api.Traffic) {}, nil},
		{"cluster routes", func(tr *api.Traffic) {
			tr.Routing = &api.ClusterRouting{
				GatewayAPI: &api.GatewayAPIRouting{Namespace: "shop", HTTPRoutes: []api.GatewayRouteRef{{Name: "edge"}}},
				Istio:      &api.IstioRouting{VirtualServices: []api.IstioVirtualService{{Name: "mesh", Namespace: "shop"}}},
			}
		}, []string{"checkout.internal: routes + HTTPRoute shop/edge + VirtualService shop/mesh"}},
		{"weight", func(tr *api.Traffic) { tr.Weights = api.CanaryWeights(50) },
			[]string{"checkout.internal: canary 10% → 50%"}},
		{"header route added", func(tr *api.Traffic) { tr.HeaderRoutes = []api.HeaderRoute{testers} },
			[]string{"checkout.internal: + header route testers: x-canary=always → canary"}},
		{"endpoints as sets", func(tr *api.Traffic) {
			tr.CanaryEndpoints = []string{"127.0.0.1:9003", "127.0.0.1:9002"}
		}, []string{"checkout.internal: canary endpoints + 127.0.0.1:9003"}},
		{"endpoint order is no change", func(tr *api.Traffic) {
			tr.StableEndpoints = []string{"127.0.0.1:9001"}
		}, nil},
		{"promotion", func(tr *api.Traffic) {
			tr.StableVersion, tr.Weights = "shop/checkout:v2", api.CanaryWeights(0)
			tr.StableEndpoints = []string{"127.0.0.1:9002"}
		}, []string{
			"checkout.internal: canary 10% → 0%",
			"checkout.internal: stable version shop/checkout:v1 → shop/checkout:v2",
			"checkout.internal: stable endpoints + 127.0.0.1:9002 - 127.0.0.1:9001",
		}},
		{"mirror and stickiness", func(tr *api.Traffic) {
			tr.MirrorRoutes = []api.MirrorRoute{{Name: "shadow", Percentage: 20, Match: []api.RouteMatch{{Method: &api.StringMatch{Exact: "POST"}}}}}
			tr.SessionAffinity = &api.SessionAffinity{CookieName: "sluice-canary", MaxAge: 3600}
		}, []string{
			"checkout.internal: + mirror route shadow: 20% of method=POST → canary",
			"checkout.internal: + sticky canary: cookie sluice-canary, max age 3600s",
		}},
		{"stable pinned", func(tr *api.Traffic) {
			tr.SessionAffinity = &api.SessionAffinity{CookieName: "sluice-canary", PinStable: true}
		}, []string{"checkout.internal: + sticky canary: cookie sluice-canary, stable users pinned too"}},
		{"host", func(tr *api.Traffic) { tr.Host = "shop.internal" },
			[]string{"shop.internal: host checkout.internal → shop.internal"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next := base
			next.HeaderRoutes = slices.Clone(base.HeaderRoutes)
			tt.change(&next)
			got := DiffTraffic(base, next)
			if !slices.Equal(got, tt.want) {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
	t.Run("stable pin turned on", func(t *testing.T) {
		old, next := base, base
		old.SessionAffinity = &api.SessionAffinity{CookieName: "sluice-canary", MaxAge: 600}
		next.SessionAffinity = &api.SessionAffinity{CookieName: "sluice-canary", MaxAge: 600, PinStable: true}
		got := DiffTraffic(old, next)
		if want := []string{"checkout.internal: ~ sticky canary: cookie sluice-canary, max age 600s → cookie sluice-canary, max age 600s, stable users pinned too"}; !slices.Equal(got, want) {
			t.Errorf("got %q, want %q", got, want)
		}
	})
	t.Run("header route match changed", func(t *testing.T) {
		old, next := base, base
		old.HeaderRoutes = []api.HeaderRoute{testers}
		next.HeaderRoutes = []api.HeaderRoute{{Name: "testers", Match: []api.HeaderMatch{{HeaderName: "x-canary", HeaderValue: api.StringMatch{Prefix: "team-"}}}}}
		got := DiffTraffic(old, next)
		if want := []string{"checkout.internal: ~ header route testers: x-canary=always → x-canary^=team-"}; !slices.Equal(got, want) {
			t.Errorf("got %q, want %q", got, want)
		}
	})
	t.Run("header route removed", func(t *testing.T) {
		old := base
		old.HeaderRoutes = []api.HeaderRoute{testers}
		got := DiffTraffic(old, base)
		if want := []string{"checkout.internal: - header route testers"}; !slices.Equal(got, want) {
			t.Errorf("got %q, want %q", got, want)
		}
	})
}
