package api

import "slices"

// GatewayAPIPluginName is the trafficRouting plugin key of the Argo
// Rollouts Gateway API plugin, whose configuration sluice reads as is.
const GatewayAPIPluginName = "argoproj-labs/gatewayAPI"

// ClusterRouting names the cluster's own traffic routers a rollout drives
// in Kubernetes mode, beside (or instead of) sluice's xDS: Gateway API
// routes and Istio virtual services. Every step changes all of them and
// waits until all are verified. The routers send each side's share to the
// rollout's stable and canary Services, whose selectors sluice pins to
// each side's pod-template hash.
type ClusterRouting struct {
	StableService string `json:"stableService"`
	CanaryService string `json:"canaryService"`
	// ActiveService and PreviewService are a blue-green rollout's
	// Services: sluice's service router pins the active one to the
	// version that has the traffic and the preview one to the new version.
	ActiveService  string             `json:"activeService,omitempty"`
	PreviewService string             `json:"previewService,omitempty"`
	GatewayAPI     *GatewayAPIRouting `json:"gatewayAPI,omitempty"`
	Istio          *IstioRouting      `json:"istio,omitempty"`
}

// GatewayAPIRouting is trafficRouting.plugins["argoproj-labs/gatewayAPI"].
type GatewayAPIRouting struct {
	// Namespace of the routes; the rollout's when the plugin sets none.
	Namespace  string            `json:"namespace"`
	HTTPRoutes []GatewayRouteRef `json:"httpRoutes,omitempty"`
	GRPCRoutes []GatewayRouteRef `json:"grpcRoutes,omitempty"`
}

// GatewayRouteRef is one HTTPRoute or GRPCRoute the rollout manages.
type GatewayRouteRef struct {
	Name string `json:"name"`
	// UseHeaderRoutes lets setHeaderRoute steps add their rules to this
	// route (the Argo plugin's useHeaderRoutes).
	UseHeaderRoutes bool `json:"useHeaderRoutes,omitempty"`
}

// IstioRouting is trafficRouting.istio.
type IstioRouting struct {
	VirtualServices []IstioVirtualService `json:"virtualServices"`
	// DestinationRule is set for subset-level routing: its two subsets
	// are keyed on rollouts-pod-template-hash.
	DestinationRule *IstioDestinationRule `json:"destinationRule,omitempty"`
}

// IstioVirtualService is one VirtualService and the named http routes in
// it that sluice manages (all of its http routes when Routes is empty and
// it has exactly one).
type IstioVirtualService struct {
	Name      string   `json:"name"`
	Namespace string   `json:"namespace"`
	Routes    []string `json:"routes,omitempty"`
}

// IstioDestinationRule is trafficRouting.istio.destinationRule.
type IstioDestinationRule struct {
	Name             string `json:"name"`
	Namespace        string `json:"namespace"`
	CanarySubsetName string `json:"canarySubsetName"`
	StableSubsetName string `json:"stableSubsetName"`
}

// Clone returns a deep copy of r (nil for nil), so that a Traffic never
// shares slices with the rollout's spec.
func (r *ClusterRouting) Clone() *ClusterRouting {
	if r == nil {
		return nil
	}
	out := *r
	if g := r.GatewayAPI; g != nil {
		out.GatewayAPI = &GatewayAPIRouting{Namespace: g.Namespace, HTTPRoutes: slices.Clone(g.HTTPRoutes), GRPCRoutes: slices.Clone(g.GRPCRoutes)}
	}
	if i := r.Istio; i != nil {
		is := &IstioRouting{VirtualServices: slices.Clone(i.VirtualServices)}
		for k := range is.VirtualServices {
			is.VirtualServices[k].Routes = slices.Clone(is.VirtualServices[k].Routes)
		}
		if i.DestinationRule != nil {
			dr := *i.DestinationRule
			is.DestinationRule = &dr
		}
		out.Istio = is
	}
	return &out
}
