package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

const maxUpdates = 256

// update aggregates one route change over all streams of this process.
type update struct {
	count   atomic.Int64
	maxRecv atomic.Int64
	maxAck  atomic.Int64
}

func storeMax(a *atomic.Int64, v int64) {
	for {
		cur := a.Load()
		if v <= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

// clientsMain opens n ADS streams, one connection each, subscribes like a
// gRPC client of benchHost and prints "ready" once all have their first
// routes, then "update <k> <last receive> <last ack>" (unix ns) each time
// all n received the k-th route change. It exits when stdin closes.
func clientsMain(args []string) error {
	fs := flag.NewFlagSet("clients", flag.ExitOnError)
	addr := fs.String("addr", "", "xds server address")
	n := fs.Int("n", 1000, "streams (one connection each)")
	delta := fs.Bool("delta", false, "incremental xDS streams instead of state of the world")
	_ = fs.Parse(args)
	var out sync.Mutex
	say := func(format string, a ...any) {
		out.Lock()
		fmt.Printf(format+"\n", a...)
		out.Unlock()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var updates [maxUpdates]update
	var ready atomic.Int64
	errs := make(chan error, *n)
	sem := make(chan struct{}, 64)
	for i := range *n {
		sem <- struct{}{}
		cc, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		defer cc.Close()
		follow, err := open(ctx, cc, *delta)
		if err != nil {
			return fmt.Errorf("stream %d: %w", i, err)
		}
		go func() {
			err := follow(fmt.Sprintf("client-%d", i), func(k int, recv, ack int64) {
				if k == 0 {
					<-sem
					if ready.Add(1) == int64(*n) {
						say("ready")
					}
					return
				}
				if k >= maxUpdates {
					return
				}
				u := &updates[k]
				storeMax(&u.maxRecv, recv)
				storeMax(&u.maxAck, ack)
				if u.count.Add(1) == int64(*n) {
					say("update %d %d %d", k, u.maxRecv.Load(), u.maxAck.Load())
				}
			})
			if err != nil && ctx.Err() == nil {
				errs <- err
			}
		}()
	}
	done := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, bufio.NewReader(os.Stdin)); close(done) }()
	select {
	case <-done:
		return nil
	case err := <-errs:
		return err
	}
}

// open opens one stream of the variant asked for and returns the function
// that runs it (see sotwStream, deltaStream).
func open(ctx context.Context, cc *grpc.ClientConn, delta bool) (func(node string, seen func(k int, recv, ack int64)) error, error) {
	ads := discoveryv3.NewAggregatedDiscoveryServiceClient(cc)
	if delta {
		s, err := ads.DeltaAggregatedResources(ctx)
		return func(node string, seen func(k int, recv, ack int64)) error { return deltaStream(s, node, seen) }, err
	}
	s, err := ads.StreamAggregatedResources(ctx)
	return func(node string, seen func(k int, recv, ack int64)) error { return sotwStream(s, node, seen) }, err
}

// sotwStream runs one client: LDS then RDS, ACKing everything; on each route
// response it calls seen(k, receive time, ack time), k counting from 0.
func sotwStream(s grpc.BidiStreamingClient[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse], node string, seen func(k int, recv, ack int64)) error {
	names := map[string][]string{resourcev3.ListenerType: {benchHost}, resourcev3.RouteType: {benchHost}}
	if err := s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ListenerType, ResourceNames: names[resourcev3.ListenerType], Node: &corev3.Node{Id: node}}); err != nil {
		return err
	}
	routes, listeners := 0, 0
	for {
		r, err := s.Recv()
		if err != nil {
			return err
		}
		recv := time.Now().UnixNano()
		if err := s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResourceNames: names[r.GetTypeUrl()], VersionInfo: r.GetVersionInfo(), ResponseNonce: r.GetNonce()}); err != nil {
			return err
		}
		ack := time.Now().UnixNano()
		switch r.GetTypeUrl() {
		case resourcev3.ListenerType:
			if listeners == 0 {
				if err := s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.RouteType, ResourceNames: names[resourcev3.RouteType]}); err != nil {
					return err
				}
			}
			listeners++
		case resourcev3.RouteType:
			seen(routes, recv, ack)
			routes++
		}
	}
}

// deltaStream is sotwStream over incremental xDS: it subscribes to the
// listener, then to the route, and ACKs every response by its nonce.
func deltaStream(s grpc.BidiStreamingClient[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse], node string, seen func(k int, recv, ack int64)) error {
	if err := s.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.ListenerType, ResourceNamesSubscribe: []string{benchHost}, Node: &corev3.Node{Id: node}}); err != nil {
		return err
	}
	routes, listeners := 0, 0
	for {
		r, err := s.Recv()
		if err != nil {
			return err
		}
		recv := time.Now().UnixNano()
		if err := s.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce()}); err != nil {
			return err
		}
		ack := time.Now().UnixNano()
		switch r.GetTypeUrl() {
		case resourcev3.ListenerType:
			if listeners == 0 {
				if err := s.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.RouteType, ResourceNamesSubscribe: []string{benchHost}}); err != nil {
					return err
				}
			}
			listeners++
		case resourcev3.RouteType:
			seen(routes, recv, ack)
			routes++
		}
	}
}
