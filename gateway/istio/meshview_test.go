package istio

import (
	"maps"
	"slices"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// What Apply asks the observer to see, read from VirtualServices as
// written; the comparison with istiod's own routes is in
// observer_test.go, against a real istiod.
func TestMeshWants(t *testing.T) {
	tests := []struct {
		name      string
		vs        string
		at        []int
		wantHosts []string
		want      []routeWant
	}{{
		name: "short host, subsets, weight 0 left out",
		vs: `metadata: {name: web, namespace: shop}
spec:
  hosts: [web, web.example.com, "*.example.org"]
  http:
  - name: primary
    route:
    - {destination: {host: web, subset: stable}, weight: 100}
    - {destination: {host: web, subset: canary}, weight: 0}`,
		at:        []int{0},
		wantHosts: []string{"web.shop.svc.cluster.local", "web.example.com"},
		want:      []routeWant{{Name: "primary", Split: map[string]uint32{"stable|web.shop.svc.cluster.local": 100}}},
	}, {
		name: "services, a lone destination without a weight, named matches",
		vs: `metadata: {name: web, namespace: shop}
spec:
  hosts: [web]
  gateways: [mesh, edge/public]
  http:
  - name: beta
    match: [{name: h, headers: {x-canary: {exact: "yes"}}}, {uri: {prefix: /b}}]
    route: [{destination: {host: web-canary}}]
  - name: primary
    route:
    - {destination: {host: web-stable.shop.svc.cluster.local}, weight: 70}
    - {destination: {host: web-canary}, weight: 30}`,
		at:        []int{0, 1},
		wantHosts: []string{"web.shop.svc.cluster.local"},
		want: []routeWant{
			{Name: "beta", MatchNames: []string{"h"}, Split: map[string]uint32{"|web-canary.shop.svc.cluster.local": 100}},
			{Name: "primary", Split: map[string]uint32{"|web-stable.shop.svc.cluster.local": 70, "|web-canary.shop.svc.cluster.local": 30}},
		},
	}, {
		name: "a mirror route",
		vs: `metadata: {name: web, namespace: shop}
spec:
  hosts: [web]
  http:
  - name: shadow
    match: [{uri: {prefix: /api/}}]
    route:
    - {destination: {host: web, subset: stable}, weight: 80}
    - {destination: {host: web, subset: canary}, weight: 20}
    mirror: {host: web, subset: canary}
    mirrorPercentage: {value: 35}`,
		at:        []int{0},
		wantHosts: []string{"web.shop.svc.cluster.local"},
		want: []routeWant{{Name: "shadow", Split: map[string]uint32{"stable|web.shop.svc.cluster.local": 80, "canary|web.shop.svc.cluster.local": 20},
			Mirrors: map[string]float64{"canary|web.shop.svc.cluster.local": 35}}},
	}, {
		name: "bound to gateways only: proxyless clients never see it",
		vs: `metadata: {name: web, namespace: shop}
spec:
  hosts: [web]
  gateways: [edge/public]
  http:
  - name: primary
    route: [{destination: {host: web}}]`,
		at: []int{0},
	}, {
		name: "a route only for proxies with source labels is left out",
		vs: `metadata: {name: web, namespace: shop}
spec:
  hosts: [web]
  http:
  - name: internal
    match: [{sourceLabels: {app: billing}}]
    route: [{destination: {host: web}}]`,
		at:        []int{0},
		wantHosts: []string{"web.shop.svc.cluster.local"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var obj map[string]any
			if err := yaml.Unmarshal([]byte(tt.vs), &obj); err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{Object: obj}
			http, _, _ := unstructured.NestedSlice(obj, "spec", "http")
			hosts, wants := meshWants(u, http, tt.at)
			if !slices.Equal(hosts, tt.wantHosts) {
				t.Errorf("hosts %v, want %v", hosts, tt.wantHosts)
			}
			if len(wants) != len(tt.want) {
				t.Fatalf("routes %+v, want %+v", wants, tt.want)
			}
			for i := range wants {
				if wants[i].Name != tt.want[i].Name || !slices.Equal(wants[i].MatchNames, tt.want[i].MatchNames) || !maps.Equal(wants[i].Split, tt.want[i].Split) || !maps.Equal(wants[i].Mirrors, tt.want[i].Mirrors) {
					t.Errorf("route %d: %+v, want %+v", i, wants[i], tt.want[i])
				}
			}
		})
	}
}

// routesShow takes istiod's two forms of a lone side (a single cluster, or
// a weighted cluster list whose other entries weigh 0) as the same, and
// tells a split that differs, a route from another VirtualService and a
// missing route apart from a match.
func TestRoutesShow(t *testing.T) {
	const src = "/apis/networking.istio.io/v1/namespaces/shop/virtual-service/web"
	route := func(name, source string, clusters ...any) *routev3.Route {
		r := &routev3.Route{Name: name, Metadata: configInfo(source)}
		if len(clusters) == 1 {
			r.Action = &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: clusters[0].(string)}}}
			return r
		}
		wc := &routev3.WeightedCluster{}
		for i := 0; i < len(clusters); i += 2 {
			wc.Clusters = append(wc.Clusters, &routev3.WeightedCluster_ClusterWeight{Name: clusters[i].(string), Weight: wrapperspb.UInt32(uint32(clusters[i+1].(int)))})
		}
		r.Action = &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_WeightedClusters{WeightedClusters: wc}}}
		return r
	}
	const stable, canary = "outbound|8080|stable|web.shop.svc.cluster.local", "outbound|8080|canary|web.shop.svc.cluster.local"
	all := []routeWant{{Name: "primary", Split: map[string]uint32{"stable|web.shop.svc.cluster.local": 100}}}
	split := []routeWant{{Name: "primary", Split: map[string]uint32{"stable|web.shop.svc.cluster.local": 80, "canary|web.shop.svc.cluster.local": 20}}}
	tests := []struct {
		name string
		got  []*routev3.Route
		want []routeWant
		ok   bool
	}{
		{"single cluster", []*routev3.Route{route("primary", src, stable)}, all, true},
		{"weighted, the other side at 0", []*routev3.Route{route("primary", src, stable, 100, canary, 0)}, all, true},
		{"weighted", []*routev3.Route{route("primary", src, stable, 80, canary, 20)}, split, true},
		{"another split", []*routev3.Route{route("primary", src, stable, 90, canary, 10)}, split, false},
		{"the old single cluster", []*routev3.Route{route("primary", src, stable)}, split, false},
		{"another VirtualService's route", []*routev3.Route{route("primary", "/apis/networking.istio.io/v1/namespaces/shop/virtual-service/other", stable, 80, canary, 20)}, split, false},
		{"no route yet", nil, split, false},
		{"one port right, one not yet", []*routev3.Route{route("primary", src, stable, 80, canary, 20), route("primary", src, stable)}, split, false},
		{"mirror as wanted", []*routev3.Route{mirrored(route("primary", src, stable, 80, canary, 20), canary, 350000)}, withMirror(split, 35), true},
		{"mirror at another percentage", []*routev3.Route{mirrored(route("primary", src, stable, 80, canary, 20), canary, 500000)}, withMirror(split, 35), false},
		{"mirror not yet", []*routev3.Route{route("primary", src, stable, 80, canary, 20)}, withMirror(split, 35), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if ok, why := routesShow(tt.got, "shop", "web", tt.want); ok != tt.ok {
				t.Errorf("routesShow = %v (%s), want %v", ok, why, tt.ok)
			}
		})
	}
}

// mirrored adds a mirror policy as istiod writes it (a fraction of a
// million).
func mirrored(r *routev3.Route, cluster string, millionths uint32) *routev3.Route {
	r.GetRoute().RequestMirrorPolicies = append(r.GetRoute().RequestMirrorPolicies, &routev3.RouteAction_RequestMirrorPolicy{
		Cluster: cluster,
		RuntimeFraction: &corev3.RuntimeFractionalPercent{DefaultValue: &typev3.FractionalPercent{
			Numerator: millionths, Denominator: typev3.FractionalPercent_MILLION}},
	})
	return r
}

// withMirror is wants with the canary mirrored at pct.
func withMirror(wants []routeWant, pct float64) []routeWant {
	out := slices.Clone(wants)
	out[0].Mirrors = map[string]float64{"canary|web.shop.svc.cluster.local": pct}
	return out
}

// configInfo is the metadata istiod tags a route with: the object it came
// from.
func configInfo(source string) *corev3.Metadata {
	return &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
		"istio": {Fields: map[string]*structpb.Value{"config": structpb.NewStringValue(source)}},
	}}
}
