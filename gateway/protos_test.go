package gateway

import (
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

type (
	listenerProto = listenerv3.Listener
	clusterProto  = clusterv3.Cluster
	routeProto    = routev3.RouteConfiguration
	claProto      = endpointv3.ClusterLoadAssignment
)

func nodeProto(id string) *corev3.Node { return &corev3.Node{Id: id} }
