package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// routeTable asks the daemon's xDS server for host's RouteConfiguration
// over a plain ADS stream, as a client would, and returns its routes.
func routeTable(t *testing.T, xdsAddr, host string) []*routev3.Route {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+xdsAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	ads, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ads.Send(&discoveryv3.DiscoveryRequest{
		Node:    &corev3.Node{Id: "e2e-route-reader"},
		TypeUrl: resourcev3.RouteType, ResourceNames: []string{host},
	}); err != nil {
		t.Fatal(err)
	}
	resp, err := ads.Recv()
	if err != nil {
		t.Fatalf("read routes of %s: %v", host, err)
	}
	for _, any := range resp.GetResources() {
		var rc routev3.RouteConfiguration
		if err := any.UnmarshalTo(&rc); err != nil {
			t.Fatal(err)
		}
		if rc.GetName() == host && len(rc.GetVirtualHosts()) == 1 {
			return rc.GetVirtualHosts()[0].GetRoutes()
		}
	}
	t.Fatalf("no RouteConfiguration %s in %d resources", host, len(resp.GetResources()))
	return nil
}

// headerRoutes names the routes the gateway made from header routes
// ("header/<name>"); the keep-warm routes after the default route, which
// never match, are not among them.
func headerRoutes(routes []*routev3.Route) []string {
	var names []string
	for _, r := range routes {
		if name, ok := strings.CutPrefix(r.GetName(), "header/"); ok {
			names = append(names, name)
		}
	}
	return names
}
