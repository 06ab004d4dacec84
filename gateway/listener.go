package gateway

import (
	"fmt"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

const (
	routerFilterName = "envoy.filters.http.router"
	hcmFilterName    = "envoy.filters.network.http_connection_manager"
	httpOptionsKey   = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
)

// adsSource is the config source for anything fetched over the same ADS
// stream (RDS from a listener, EDS from a cluster).
func adsSource() *corev3.ConfigSource {
	return &corev3.ConfigSource{
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
		ResourceApiVersion:    corev3.ApiVersion_V3,
	}
}

// httpConnectionManager fetches route configuration routeName over ADS and
// ends its filter chain with the router, as gRPC requires.
func httpConnectionManager(statPrefix, routeName string) *hcmv3.HttpConnectionManager {
	return &hcmv3.HttpConnectionManager{
		StatPrefix: statPrefix,
		CodecType:  hcmv3.HttpConnectionManager_AUTO,
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			ConfigSource: adsSource(), RouteConfigName: routeName,
		}},
		HttpFilters: []*hcmv3.HttpFilter{{
			Name:       routerFilterName,
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(&routerv3.Router{})},
		}},
	}
}

// apiListener is the Listener a proxyless gRPC client dialing xds:///host
// asks for.
func apiListener(host string) *listenerv3.Listener {
	return &listenerv3.Listener{
		Name:        host,
		ApiListener: &listenerv3.ApiListener{ApiListener: mustAny(httpConnectionManager(host, host))},
	}
}

// EnvoyResources builds the sluice-http Listener on port and the sluice-http
// RouteConfiguration holding the given virtual hosts (one per rollout, in
// the order given): the combined layout (EnvoyRoutesCombined).
func EnvoyResources(port uint32, vhosts []*routev3.VirtualHost) (*listenerv3.Listener, *routev3.RouteConfiguration) {
	return EnvoyListener(port, EnvoyRoutesCombined), &routev3.RouteConfiguration{Name: EnvoyName, VirtualHosts: vhosts}
}

// edsCluster is one side of a rollout: endpoints over ADS, round robin, and
// upstream HTTP matching the downstream protocol (so gRPC stays HTTP/2).
func edsCluster(name string) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig:     &clusterv3.Cluster_EdsClusterConfig{EdsConfig: adsSource()},
		ConnectTimeout:       durationpb.New(time.Second),
		LbPolicy:             clusterv3.Cluster_ROUND_ROBIN,
		TypedExtensionProtocolOptions: map[string]*anypb.Any{
			httpOptionsKey: mustAny(&httpv3.HttpProtocolOptions{
				UpstreamProtocolOptions: &httpv3.HttpProtocolOptions_UseDownstreamProtocolConfig{
					UseDownstreamProtocolConfig: &httpv3.HttpProtocolOptions_UseDownstreamHttpConfig{
						HttpProtocolOptions:  &corev3.Http1ProtocolOptions{},
						Http2ProtocolOptions: &corev3.Http2ProtocolOptions{},
					},
				},
			}),
		},
	}
}

// mustAny packs a message deterministically; it only fails for messages
// that cannot be marshaled at all, which is a programming error here.
func mustAny(m proto.Message) *anypb.Any {
	a := &anypb.Any{}
	if err := anypb.MarshalFrom(a, m, proto.MarshalOptions{Deterministic: true}); err != nil {
		panic(fmt.Sprintf("pack %T: %v", m, err))
	}
	return a
}
