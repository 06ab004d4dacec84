package main

import (
	"context"
	"fmt"
	"slices"
	"sync"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
)

// envoyName is the shared listener and route configuration Envoy uses
// (gateway.EnvoyName; not imported, so that this program sees only the
// wire).
const envoyName = "sluice-http"

// adsSubscriber is a raw state-of-the-world ADS stream that ACKs every
// response and counts the bytes (proto.Size of each DiscoveryResponse) it
// receives. Envoy-shaped: listeners and clusters by wildcard, the
// sluice-http route configuration, the endpoints of every cluster it was
// sent. gRPC-shaped (host set): the listener, route configuration, two
// clusters and two endpoint sets of that host only.
type adsSubscriber struct {
	cc   *grpc.ClientConn
	s    grpc.BidiStreamingClient[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse]
	host string // "" for Envoy-shaped

	mu        sync.Mutex
	bytes     int64
	responses int
	vhosts    int // virtual hosts in the last route configuration
	names     map[string][]string
	changed   chan struct{}
	err       error
	// outbox holds requests for the sender goroutine: like Envoy, the
	// subscriber never stops reading while a request waits for flow
	// control (sending inline deadlocks once the server's window fills
	// while it waits for us to read).
	outbox  []*discoveryv3.DiscoveryRequest
	pending chan struct{}
	done    chan struct{}
}

func subscribeADS(ctx context.Context, addr, node, host string, clusters []string) (*adsSubscriber, error) {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1<<30)))
	if err != nil {
		return nil, err
	}
	s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		cc.Close()
		return nil, fmt.Errorf("ads stream: %w", err)
	}
	a := &adsSubscriber{cc: cc, s: s, host: host, names: map[string][]string{}, changed: make(chan struct{}), pending: make(chan struct{}, 1), done: make(chan struct{})}
	nodeProto := &corev3.Node{Id: node}
	first := []string{resourcev3.ListenerType, resourcev3.ClusterType}
	if host != "" {
		a.names[resourcev3.ListenerType] = []string{host}
		a.names[resourcev3.RouteType] = []string{host}
		a.names[resourcev3.ClusterType] = clusters
		a.names[resourcev3.EndpointType] = clusters
		first = append(first, resourcev3.RouteType, resourcev3.EndpointType)
	}
	for _, typ := range first {
		a.send(&discoveryv3.DiscoveryRequest{Node: nodeProto, TypeUrl: typ, ResourceNames: a.names[typ]})
	}
	go a.run()
	go a.sender()
	return a, nil
}

// send queues a request for the sender.
func (a *adsSubscriber) send(r *discoveryv3.DiscoveryRequest) {
	a.mu.Lock()
	a.outbox = append(a.outbox, r)
	a.mu.Unlock()
	select {
	case a.pending <- struct{}{}:
	default:
	}
}

func (a *adsSubscriber) sender() {
	for {
		select {
		case <-a.done:
			return
		case <-a.pending:
		}
		a.mu.Lock()
		batch := a.outbox
		a.outbox = nil
		a.mu.Unlock()
		for _, r := range batch {
			if err := a.s.Send(r); err != nil {
				return // Recv sees the stream's end too
			}
		}
	}
}

func (a *adsSubscriber) run() {
	err := a.loop()
	a.mu.Lock()
	a.err = err
	close(a.changed)
	a.changed = make(chan struct{})
	a.mu.Unlock()
}

func (a *adsSubscriber) loop() error {
	for {
		r, err := a.s.Recv()
		if err != nil {
			return err
		}
		typ := r.GetTypeUrl()
		a.mu.Lock()
		names := a.names[typ]
		a.mu.Unlock()
		a.send(&discoveryv3.DiscoveryRequest{TypeUrl: typ, ResourceNames: names, VersionInfo: r.GetVersionInfo(), ResponseNonce: r.GetNonce()})
		if err := a.follow(r); err != nil {
			return err
		}
		a.mu.Lock()
		a.bytes += int64(proto.Size(r))
		a.responses++
		close(a.changed)
		a.changed = make(chan struct{})
		a.mu.Unlock()
	}
}

// follow subscribes, as Envoy does, to what an Envoy-shaped response
// names: sluice-http's routes once its listener arrives, and the
// endpoints of every cluster; it also counts sluice-http's virtual hosts.
func (a *adsSubscriber) follow(r *discoveryv3.DiscoveryResponse) error {
	switch r.GetTypeUrl() {
	case resourcev3.ListenerType:
		if a.host != "" || a.subscribed(resourcev3.RouteType) {
			return nil
		}
		for _, res := range r.GetResources() {
			l := &listenerv3.Listener{}
			if err := res.UnmarshalTo(l); err == nil && l.GetName() == envoyName {
				return a.subscribe(resourcev3.RouteType, []string{envoyName})
			}
		}
	case resourcev3.ClusterType:
		if a.host != "" {
			return nil
		}
		var names []string
		for _, res := range r.GetResources() {
			c := &clusterv3.Cluster{}
			if err := res.UnmarshalTo(c); err != nil {
				return fmt.Errorf("cluster: %w", err)
			}
			names = append(names, c.GetName())
		}
		slices.Sort(names)
		a.mu.Lock()
		same := slices.Equal(names, a.names[resourcev3.EndpointType])
		a.mu.Unlock()
		if !same {
			return a.subscribe(resourcev3.EndpointType, names)
		}
	case resourcev3.RouteType:
		n := 0
		for _, res := range r.GetResources() {
			rc := &routev3.RouteConfiguration{}
			if err := res.UnmarshalTo(rc); err != nil {
				return fmt.Errorf("route configuration: %w", err)
			}
			n += len(rc.GetVirtualHosts())
		}
		a.mu.Lock()
		a.vhosts = n
		a.mu.Unlock()
	}
	return nil
}

func (a *adsSubscriber) subscribed(typ string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.names[typ]
	return ok
}

func (a *adsSubscriber) subscribe(typ string, names []string) error {
	a.mu.Lock()
	a.names[typ] = names
	a.mu.Unlock()
	a.send(&discoveryv3.DiscoveryRequest{TypeUrl: typ, ResourceNames: names})
	return nil
}

// counters returns the bytes and responses received so far.
func (a *adsSubscriber) counters() (bytes int64, responses int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.bytes, a.responses
}

// waitVhosts waits until the route configuration holds n virtual hosts.
func (a *adsSubscriber) waitVhosts(ctx context.Context, n int) error {
	for {
		a.mu.Lock()
		got, ch, err := a.vhosts, a.changed, a.err
		a.mu.Unlock()
		if got >= n {
			return nil
		}
		if err != nil {
			return fmt.Errorf("ads stream: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("route configuration %s has %d of %d virtual hosts: %w", envoyName, got, n, ctx.Err())
		case <-ch:
		}
	}
}

func (a *adsSubscriber) close() {
	close(a.done)
	a.cc.Close()
}
