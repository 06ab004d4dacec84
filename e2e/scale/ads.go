package main

import (
	"context"
	"fmt"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
)

// adsSubscriber is a raw state-of-the-world ADS stream shaped like a gRPC
// client of one host: the listener, route configuration, two clusters and
// two endpoint sets of that host only. It ACKs every response and counts
// the bytes (proto.Size of each DiscoveryResponse) it receives. (The
// Envoy-shaped subscriber is envoySubscriber.)
type adsSubscriber struct {
	cc   *grpc.ClientConn
	s    grpc.BidiStreamingClient[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse]
	host string

	mu        sync.Mutex
	bytes     int64
	responses int
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
	a.names[resourcev3.ListenerType] = []string{host}
	a.names[resourcev3.RouteType] = []string{host}
	a.names[resourcev3.ClusterType] = clusters
	a.names[resourcev3.EndpointType] = clusters
	for _, typ := range []string{resourcev3.ListenerType, resourcev3.RouteType, resourcev3.ClusterType, resourcev3.EndpointType} {
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
		// Counted before the ACK goes: the ACK can move the rollout on,
		// and a reader of the counters that saw it moved must see this.
		a.mu.Lock()
		names := a.names[typ]
		a.bytes += int64(proto.Size(r))
		a.responses++
		close(a.changed)
		a.changed = make(chan struct{})
		a.mu.Unlock()
		a.send(&discoveryv3.DiscoveryRequest{TypeUrl: typ, ResourceNames: names, VersionInfo: r.GetVersionInfo(), ResponseNonce: r.GetNonce()})
	}
}

// counters returns the bytes and responses received so far.
func (a *adsSubscriber) counters() (bytes int64, responses int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.bytes, a.responses
}

func (a *adsSubscriber) close() {
	close(a.done)
	a.cc.Close()
}
