package api

import (
	"reflect"
	"strings"
	"testing"
)

// routedRollout is kubeRollout with its trafficRouting replaced by tr
// (YAML indented for the trafficRouting block).
func routedRollout(tr string) string {
	return strings.Replace(kubeRollout, "        plugins:\n          sluice.io/xds: {host: checkout.shop}\n", tr, 1)
}

// TestClusterRoutingParse reads the Argo Gateway API plugin's and Argo's
// istio blocks into Rollout.Routing, and names file:line:field on errors.
func TestClusterRoutingParse(t *testing.T) {
	tests := []struct {
		name    string
		tr      string
		want    *ClusterRouting
		wantErr string // a substring of the error text; "" for no error
	}{{
		name: "gateway api single and list",
		tr: `        plugins:
          argoproj-labs/gatewayAPI:
            httpRoute: edge
            httpRoutes: [{name: admin, useHeaderRoutes: true}, {name: api}]
            grpcRoutes: [{name: rpc}]
`,
		want: &ClusterRouting{StableService: "checkout-stable", CanaryService: "checkout-canary", GatewayAPI: &GatewayAPIRouting{
			Namespace:  "shop",
			HTTPRoutes: []GatewayRouteRef{{Name: "edge", UseHeaderRoutes: true}, {Name: "admin", UseHeaderRoutes: true}, {Name: "api"}},
			GRPCRoutes: []GatewayRouteRef{{Name: "rpc"}},
		}},
	}, {
		name: "gateway api namespace and xds together",
		tr: `        plugins:
          sluice.io/xds: {host: checkout.shop}
          argoproj-labs/gatewayAPI: {grpcRoute: rpc, namespace: edge}
`,
		want: &ClusterRouting{StableService: "checkout-stable", CanaryService: "checkout-canary", GatewayAPI: &GatewayAPIRouting{
			Namespace: "edge", GRPCRoutes: []GatewayRouteRef{{Name: "rpc", UseHeaderRoutes: true}},
		}},
	}, {
		name: "istio name.namespace",
		tr: `        istio:
          virtualServices: [{name: vs1, routes: [primary]}, {name: vs2.mesh}]
          destinationRule: {name: dr.mesh, canarySubsetName: canary, stableSubsetName: stable}
`,
		want: &ClusterRouting{StableService: "checkout-stable", CanaryService: "checkout-canary", Istio: &IstioRouting{
			VirtualServices: []IstioVirtualService{{Name: "vs1", Namespace: "shop", Routes: []string{"primary"}}, {Name: "vs2", Namespace: "mesh"}},
			DestinationRule: &IstioDestinationRule{Name: "dr", Namespace: "mesh", CanarySubsetName: "canary", StableSubsetName: "stable"},
		}},
	}, {
		name: "route without name",
		tr: `        plugins:
          argoproj-labs/gatewayAPI: {httpRoutes: [{useHeaderRoutes: true}]}
`,
		wantErr: "r.yaml:23: spec.strategy.canary.trafficRouting.plugins[argoproj-labs/gatewayAPI].httpRoutes[0].name: required",
	}, {
		name: "misspelt field",
		tr: `        plugins:
          argoproj-labs/gatewayAPI: {httpRouts: edge}
`,
		wantErr: `plugins[argoproj-labs/gatewayAPI]: cannot read plugin config: json: unknown field "httpRouts"`,
	}, {
		name: "no route",
		tr: `        plugins:
          argoproj-labs/gatewayAPI: {namespace: shop}
`,
		wantErr: "plugins[argoproj-labs/gatewayAPI]: required: at least one of httpRoute",
	}, {
		name: "istio subsets equal",
		tr: `        istio:
          virtualService: {name: vs1}
          destinationRule: {name: dr, canarySubsetName: a, stableSubsetName: a}
`,
		wantErr: "trafficRouting.istio.destinationRule.canarySubsetName: must differ from stableSubsetName",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := loadKube(t, routedRollout(tt.tr))
			text := string(diagnosticText(set.Diagnostics))
			if tt.wantErr != "" {
				if !strings.Contains(text, tt.wantErr) {
					t.Fatalf("diagnostics lack %q:\n%s", tt.wantErr, text)
				}
				return
			}
			if set.Diagnostics.HasErrors() || len(set.Rollouts) != 1 {
				t.Fatalf("errors:\n%s", text)
			}
			if strings.Contains(text, "not implemented") {
				t.Errorf("a cluster router is still reported as not implemented:\n%s", text)
			}
			if got := set.Rollouts[0].Routing; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Routing:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestClusterRoutingStandalone keeps the routers as warnings without
// --kubernetes: standalone mode has no cluster to write routes into.
func TestClusterRoutingStandalone(t *testing.T) {
	doc := routedRollout(`        plugins:
          sluice.io/xds: {host: checkout.shop, endpoints: {"shop/checkout:v2": ["10.0.0.1:80"]}}
          argoproj-labs/gatewayAPI: {httpRoute: edge}
        istio: {virtualService: {name: vs1}}
`)
	set := Load([]Source{{Name: "r.yaml", Data: []byte(doc)}})
	text := string(diagnosticText(set.Diagnostics))
	for _, want := range []string{"plugins[argoproj-labs/gatewayAPI]: the Gateway API router needs --kubernetes", "trafficRouting.istio: the Istio router needs --kubernetes"} {
		if !strings.Contains(text, want) {
			t.Errorf("diagnostics lack %q:\n%s", want, text)
		}
	}
	if len(set.Rollouts) == 1 && set.Rollouts[0].Routing != nil {
		t.Errorf("standalone mode read Routing %+v", set.Rollouts[0].Routing)
	}
}
