package subscriber

import (
	"fmt"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// references decodes one resource and returns its name and the resources
// it makes a client ask for next, by type URL (an empty list of route
// scopes means: subscribe to them all).
func references(a *anypb.Any, envoy bool) (string, map[string][]string, error) {
	m, err := a.UnmarshalNew()
	if err != nil {
		return "", nil, fmt.Errorf("decode %s: %w", a.GetTypeUrl(), err)
	}
	refs := map[string][]string{}
	switch r := m.(type) {
	case *listenerv3.Listener:
		if err := listenerReferences(r, envoy, refs); err != nil {
			return "", nil, fmt.Errorf("listener %s: %w", r.GetName(), err)
		}
		return r.GetName(), refs, nil
	case *routev3.ScopedRouteConfiguration:
		refs[resourcev3.RouteType] = []string{r.GetRouteConfigurationName()}
		return r.GetName(), refs, nil
	case *routev3.RouteConfiguration:
		if !envoy { // Envoy takes every cluster by wildcard
			refs[resourcev3.ClusterType] = routeClusters(r)
		}
		return r.GetName(), refs, nil
	case *clusterv3.Cluster:
		refs[resourcev3.EndpointType] = []string{r.GetName()}
		return r.GetName(), refs, nil
	case *endpointv3.ClusterLoadAssignment:
		return r.GetClusterName(), refs, nil
	}
	return "", nil, fmt.Errorf("unexpected resource %s", a.GetTypeUrl())
}

// listenerReferences adds the routes or route scopes a listener's
// HttpConnectionManagers fetch. Envoy does not take an api_listener over
// LDS (it logs and skips it); gRPC uses nothing but the api_listener.
func listenerReferences(l *listenerv3.Listener, envoy bool, refs map[string][]string) error {
	var hcms []*anypb.Any
	if !envoy {
		hcms = append(hcms, l.GetApiListener().GetApiListener())
	}
	for _, fc := range l.GetFilterChains() {
		for _, f := range fc.GetFilters() {
			hcms = append(hcms, f.GetTypedConfig())
		}
	}
	for _, h := range hcms {
		if h == nil {
			continue
		}
		hcm := &hcmv3.HttpConnectionManager{}
		if err := h.UnmarshalTo(hcm); err != nil {
			return err
		}
		if n := hcm.GetRds().GetRouteConfigName(); n != "" {
			refs[resourcev3.RouteType] = append(refs[resourcev3.RouteType], n)
		}
		if hcm.GetScopedRoutes().GetScopedRds() != nil {
			refs[resourcev3.ScopedRouteType] = []string{}
		}
	}
	return nil
}

// routeClusters are the clusters a route configuration's routes use.
func routeClusters(rc *routev3.RouteConfiguration) []string {
	var out []string
	for _, vh := range rc.GetVirtualHosts() {
		for _, rt := range vh.GetRoutes() {
			if c := rt.GetRoute().GetCluster(); c != "" {
				out = append(out, c)
			}
			for _, wc := range rt.GetRoute().GetWeightedClusters().GetClusters() {
				out = append(out, wc.GetName())
			}
		}
	}
	return out
}
