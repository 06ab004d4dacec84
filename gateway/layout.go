package gateway

import (
	"fmt"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
)

// EnvoyRouteLayout is how the sluice-http listener finds a host's routes.
//
// Scoped RDS was chosen over VHDS and over the combined route
// configuration (docs/xds.md, "Envoy route layout at scale"):
//   - the combined RouteConfiguration sluice-http holds every virtual host,
//     so one weight change resends all of them to every Envoy (2 MB at
//     10,000 rollouts), over delta too, since RDS resources are whole;
//   - VHDS sends one virtual host per change, but only over delta xDS and
//     only on demand: Envoy needs the on_demand filter, pauses the first
//     request to each host for a round trip to sluice, and names virtual
//     hosts by the Host header (aliases), a second naming scheme to serve;
//   - scoped RDS keys one ScopedRouteConfiguration per host on the
//     :authority header and points it at RouteConfiguration <host>, the
//     one gRPC clients already use: no new route resource, every route
//     loaded eagerly, over state of the world and delta alike, and a
//     weight change is one RouteConfiguration of a few hundred bytes.
type EnvoyRouteLayout string

const (
	// EnvoyRoutesScoped (the default): the listener's HttpConnectionManager
	// uses scoped_routes over ADS; scope <host> (key: the :authority
	// header up to its ':') selects RouteConfiguration <host>.
	EnvoyRoutesScoped EnvoyRouteLayout = "scoped"
	// EnvoyRoutesCombined: the listener uses RDS sluice-http, one
	// RouteConfiguration with every rollout's virtual host. Kept to
	// compare, and for Envoys configured before scoped routes.
	EnvoyRoutesCombined EnvoyRouteLayout = "combined"
)

func (l EnvoyRouteLayout) check() error {
	switch l {
	case EnvoyRoutesScoped, EnvoyRoutesCombined:
		return nil
	}
	return fmt.Errorf("envoy route layout %q: want %q or %q", l, EnvoyRoutesScoped, EnvoyRoutesCombined)
}

// authorityHeader is where Envoy keeps the Host header of HTTP/1 and the
// :authority of HTTP/2 alike.
const authorityHeader = ":authority"

// scopedHTTPConnectionManager picks a RouteConfiguration per request by
// the host in :authority (the port, after ':', is cut off), from scopes
// and routes fetched over ADS; router filter last.
func scopedHTTPConnectionManager() *hcmv3.HttpConnectionManager {
	hcm := httpConnectionManager(EnvoyName, EnvoyName)
	hcm.RouteSpecifier = &hcmv3.HttpConnectionManager_ScopedRoutes{ScopedRoutes: &hcmv3.ScopedRoutes{
		Name: EnvoyName,
		ScopeKeyBuilder: &hcmv3.ScopedRoutes_ScopeKeyBuilder{Fragments: []*hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder{{
			Type: &hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder_HeaderValueExtractor_{
				HeaderValueExtractor: &hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder_HeaderValueExtractor{
					Name:             authorityHeader,
					ElementSeparator: ":",
					ExtractType:      &hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder_HeaderValueExtractor_Index{Index: 0},
				},
			},
		}}},
		RdsConfigSource: adsSource(),
		ConfigSpecifier: &hcmv3.ScopedRoutes_ScopedRds{ScopedRds: &hcmv3.ScopedRds{ScopedRdsConfigSource: adsSource()}},
	}}
	return hcm
}

// routeScope is the scope of one host for the scoped layout: requests whose
// :authority host is host use RouteConfiguration host.
func routeScope(host string) *routev3.ScopedRouteConfiguration {
	return &routev3.ScopedRouteConfiguration{
		Name:                   host,
		RouteConfigurationName: host,
		Key: &routev3.ScopedRouteConfiguration_Key{Fragments: []*routev3.ScopedRouteConfiguration_Key_Fragment{{
			Type: &routev3.ScopedRouteConfiguration_Key_Fragment_StringKey{StringKey: host},
		}}},
	}
}

// EnvoyListener is the one listener Envoy serves on port, in layout.
func EnvoyListener(port uint32, layout EnvoyRouteLayout) *listenerv3.Listener {
	hcm := httpConnectionManager(EnvoyName, EnvoyName)
	if layout != EnvoyRoutesCombined {
		hcm = scopedHTTPConnectionManager()
	}
	return &listenerv3.Listener{
		Name:    EnvoyName,
		Address: socketAddress("0.0.0.0", port),
		FilterChains: []*listenerv3.FilterChain{{
			Filters: []*listenerv3.Filter{{
				Name:       hcmFilterName,
				ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(hcm)},
			}},
		}},
	}
}
