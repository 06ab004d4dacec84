package daemon

import (
	"reflect"
	"testing"

	"github.com/sluice-dev/sluice/api"
)

// TestDroppedRouting finds the routes a change stops naming, which the
// daemon releases (restores to 100% stable without sluice's rules).
func TestDroppedRouting(t *testing.T) {
	gw := func(ns string, names ...string) *api.ClusterRouting {
		g := &api.GatewayAPIRouting{Namespace: ns}
		for _, n := range names {
			g.HTTPRoutes = append(g.HTTPRoutes, api.GatewayRouteRef{Name: n})
		}
		return &api.ClusterRouting{StableService: "s", CanaryService: "c", GatewayAPI: g}
	}
	vs := func(names ...string) *api.ClusterRouting {
		i := &api.IstioRouting{}
		for _, n := range names {
			i.VirtualServices = append(i.VirtualServices, api.IstioVirtualService{Name: n, Namespace: "shop"})
		}
		return &api.ClusterRouting{StableService: "s", CanaryService: "c", Istio: i}
	}
	tests := []struct {
		name     string
		old, new *api.ClusterRouting
		want     *api.ClusterRouting
	}{
		{"removed rollout", gw("shop", "a", "b"), nil, gw("shop", "a", "b")},
		{"same routes", gw("shop", "a"), gw("shop", "a"), nil},
		{"one route renamed", gw("shop", "a", "b"), gw("shop", "a", "c"), gw("shop", "b")},
		{"namespace moved", gw("shop", "a"), gw("edge", "a"), gw("shop", "a")},
		{"gateway api dropped for istio", gw("shop", "a"), vs("v"), gw("shop", "a")},
		{"virtual service dropped", vs("v", "w"), vs("w"), vs("v")},
		{"nothing before", nil, gw("shop", "a"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := droppedRouting(tt.old, tt.new); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("droppedRouting:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}
