package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// routeSplit is the default route of one RouteConfiguration a routeWatch
// was sent: cluster → weight (a single-cluster route counts as 100).
type routeSplit struct {
	at      time.Time
	version string
	weights map[string]uint32
}

// routeWatch is a raw ADS stream subscribed to one host's
// RouteConfiguration as a proxyless gRPC client is: it ACKs every
// response and keeps the default route of each, so that a test reads
// from outside sluice what every client was told, including a split
// that was replaced before any call could show it.
//
// withhold makes it stop ACKing: every response received from then on is
// kept but not ACKed, as a client that has not applied the routes yet,
// so that a step that changes traffic stays before its ACK (sluice waits
// up to --ack-timeout) for as long as a test needs.
type routeWatch struct {
	withhold atomic.Bool
	mu       sync.Mutex
	splits   []routeSplit
	err      error
}

// watchRoutes subscribes to host's routes on xdsAddr until the test ends
// and waits for the first response.
func watchRoutes(t *testing.T, xdsAddr, host string) *routeWatch {
	t.Helper()
	w := startRouteWatch(t, xdsAddr, host, "e2e-route-watch", insecure.NewCredentials())
	deadline := time.Now().Add(30 * time.Second)
	for {
		splits, err := w.seen()
		if len(splits) > 0 {
			return w
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("no routes of %s from %s: %v", host, xdsAddr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startRouteWatch opens the stream as node, over creds, and returns at
// once; the watch runs until the test ends or the server ends the stream
// (seen returns its error then).
func startRouteWatch(t *testing.T, xdsAddr, host, node string, creds credentials.TransportCredentials) *routeWatch {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+xdsAddr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ads, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		cancel()
		cc.Close()
		t.Fatal(err)
	}
	w := &routeWatch{}
	done := make(chan struct{})
	go func() { defer close(done); w.run(ctx, ads, host, node) }()
	t.Cleanup(func() { cancel(); <-done; cc.Close() })
	return w
}

func (w *routeWatch) run(ctx context.Context, ads grpc.BidiStreamingClient[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse], host, node string) {
	req := &discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: node}, TypeUrl: resourcev3.RouteType, ResourceNames: []string{host}}
	var err error
	for {
		if req != nil {
			if err = ads.Send(req); err != nil {
				_, err = ads.Recv() // the status that ended the stream, not Send's io.EOF
				break
			}
		}
		var resp *discoveryv3.DiscoveryResponse
		if resp, err = ads.Recv(); err != nil {
			break
		}
		split := routeSplit{at: time.Now(), version: resp.GetVersionInfo()}
		if split.weights, err = defaultSplit(resp, host); err != nil {
			break
		}
		w.mu.Lock()
		w.splits = append(w.splits, split)
		w.mu.Unlock()
		if w.withhold.Load() {
			req = nil // no ACK: keep receiving
			continue
		}
		req = &discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: node}, TypeUrl: resourcev3.RouteType, ResourceNames: []string{host},
			VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce()}
	}
	// The stream's own context ends with the stream, refused or not:
	// only the test's ending is no error.
	if ctx.Err() == nil {
		w.mu.Lock()
		w.err = err
		w.mu.Unlock()
	}
}

// defaultSplit reads the weights of host's default route in resp.
func defaultSplit(resp *discoveryv3.DiscoveryResponse, host string) (map[string]uint32, error) {
	for _, any := range resp.GetResources() {
		var rc routev3.RouteConfiguration
		if err := any.UnmarshalTo(&rc); err != nil {
			return nil, fmt.Errorf("route configuration: %w", err)
		}
		if rc.GetName() != host || len(rc.GetVirtualHosts()) != 1 {
			continue
		}
		for _, r := range rc.GetVirtualHosts()[0].GetRoutes() {
			if r.GetName() != "default" {
				continue
			}
			a := r.GetRoute()
			if c := a.GetCluster(); c != "" {
				return map[string]uint32{c: 100}, nil
			}
			weights := map[string]uint32{}
			for _, c := range a.GetWeightedClusters().GetClusters() {
				weights[c.GetName()] += c.GetWeight().GetValue()
			}
			if len(weights) == 0 {
				return nil, fmt.Errorf("default route of %s names no cluster: %v", host, a)
			}
			return weights, nil
		}
		return nil, fmt.Errorf("RouteConfiguration %s has no route named default", host)
	}
	return nil, fmt.Errorf("no RouteConfiguration %s in %d resources", host, len(resp.GetResources()))
}

// seen is every split received so far, and the stream's error if it
// ended before the test did.
func (w *routeWatch) seen() ([]routeSplit, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.splits), w.err
}
