package main

import (
	"context"
	"fmt"
	"time"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluice-dev/sluice/gateway/subscriber"
)

// envoySubscriber is a raw delta ADS stream shaped like Envoy with
// `api_type: DELTA_GRPC` (what docs/xds.md recommends at scale): listeners
// and clusters by wildcard, the route scopes of sluice-http by wildcard,
// then each scope's RouteConfiguration and each cluster's endpoints. It is
// gateway/subscriber, which ACKs everything and counts bytes.
type envoySubscriber struct {
	cc     *grpc.ClientConn
	sub    *subscriber.Subscriber
	cancel context.CancelFunc
}

func subscribeEnvoy(ctx context.Context, addr, node string) (*envoySubscriber, error) {
	// Envoy takes responses of any size; the first listener or cluster
	// response of 10,000 rollouts exceeds gRPC's default 4 MiB.
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1<<30)))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	sub, err := subscriber.Start(ctx, cc, subscriber.Options{Node: node, Delta: true, Envoy: true})
	if err != nil {
		cancel()
		cc.Close()
		return nil, err
	}
	return &envoySubscriber{cc: cc, sub: sub, cancel: cancel}, nil
}

// counters returns the bytes and responses received so far.
func (e *envoySubscriber) counters() (bytes int64, responses int) {
	return e.sub.Received(), e.sub.Responses()
}

// waitHosts waits until the subscriber holds n route scopes and the
// RouteConfiguration of each, with everything it subscribed to received.
func (e *envoySubscriber) waitHosts(ctx context.Context, n int) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		complete, err := e.sub.Complete()
		if err != nil {
			return fmt.Errorf("envoy-shaped ads stream: %w", err)
		}
		scopes, routes := len(e.sub.Names(resourcev3.ScopedRouteType)), len(e.sub.Names(resourcev3.RouteType))
		if complete && scopes >= n && routes >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("envoy-shaped subscriber holds %d route scopes and %d routes of %d hosts (all subscribed received: %t): %w",
				scopes, routes, n, complete, ctx.Err())
		case <-tick.C:
		}
	}
}

func (e *envoySubscriber) close() {
	e.cancel()
	e.cc.Close()
}
