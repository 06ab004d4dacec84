package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachetypes "github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/gateway"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// benchServer is one implementation under test.
type benchServer interface {
	serve(ctx context.Context, lis net.Listener) error
	set(canary int32) error
}

func traffic(canary int32) api.Traffic {
	return api.Traffic{
		Rollout: api.Key{Namespace: "bench", Name: "svc"}, Host: benchHost,
		StableEndpoints: []string{"127.0.0.1:1"}, CanaryEndpoints: []string{"127.0.0.1:2"},
		Weights: api.CanaryWeights(canary),
	}
}

// serverMain runs one server process, driven by stdin:
// "set <canary>" publishes a weight change and answers "changed <unixnano>"
// (the moment before publishing); "mem" answers "mem <bytes>" after GC.
func serverMain(args []string) error {
	fs := flag.NewFlagSet("server", flag.ExitOnError)
	impl := fs.String("impl", "sluice", "floor | stock | sluice")
	_ = fs.Parse(args)
	if path := os.Getenv("BENCH_CPUPROFILE"); path != "" {
		f, err := os.Create(path + "." + *impl)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	var s benchServer
	switch *impl {
	case "sluice":
		gw, err := gateway.New(gateway.Options{})
		if err != nil {
			return err
		}
		s = &sluiceServer{gw}
	case "stock":
		s = newStock()
	case "floor":
		s = newFloor()
	default:
		return fmt.Errorf("unknown impl %q", *impl)
	}
	if err := s.set(10); err != nil {
		return err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		if err := s.serve(ctx, lis); err != nil {
			fmt.Fprintln(os.Stderr, "serve:", err)
		}
	}()
	fmt.Printf("addr %s\n", lis.Addr())
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		switch {
		case len(f) == 2 && f[0] == "set":
			w, err := strconv.Atoi(f[1])
			if err != nil {
				return err
			}
			start := time.Now()
			if err := s.set(int32(w)); err != nil {
				return err
			}
			fmt.Printf("changed %d\n", start.UnixNano())
		case len(f) == 1 && f[0] == "mem":
			runtime.GC()
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			fmt.Printf("mem %d\n", m.HeapInuse+m.StackInuse)
		}
	}
	return nil
}

type sluiceServer struct{ gw *gateway.Server }

func (s *sluiceServer) serve(ctx context.Context, lis net.Listener) error {
	return s.gw.Serve(ctx, lis)
}
func (s *sluiceServer) set(canary int32) error {
	_, err := s.gw.SetTraffic(traffic(canary))
	return err
}

// stock is go-control-plane's server over its snapshot cache, used the
// usual way, with per-type versions so a weight change only bumps routes.
type stock struct {
	cache cachev3.SnapshotCache
	gen   int
}

func newStock() *stock { return &stock{cache: cachev3.NewSnapshotCache(false, oneNode{}, nil)} }

// oneNode gives every client the same snapshot: one configuration for all
// nodes, as sluice serves.
type oneNode struct{}

func (oneNode) ID(*corev3.Node) string { return "bench" }

func (s *stock) serve(ctx context.Context, lis net.Listener) error {
	gs := grpc.NewServer(grpc.MaxConcurrentStreams(1 << 20))
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(gs, serverv3.NewServer(ctx, s.cache, nil))
	go func() { <-ctx.Done(); gs.Stop() }()
	return gs.Serve(lis)
}

func (s *stock) set(canary int32) error {
	res, err := gateway.Translate(traffic(canary))
	if err != nil {
		return err
	}
	s.gen++
	snap := &cachev3.Snapshot{}
	snap.Resources[cachetypes.Listener] = cachev3.NewResources("1", []cachetypes.Resource{res.Listener})
	snap.Resources[cachetypes.Cluster] = cachev3.NewResources("1", []cachetypes.Resource{res.Clusters[0], res.Clusters[1]})
	snap.Resources[cachetypes.Endpoint] = cachev3.NewResources("1", []cachetypes.Resource{res.Endpoints[0], res.Endpoints[1]})
	snap.Resources[cachetypes.Route] = cachev3.NewResources(strconv.Itoa(s.gen), []cachetypes.Resource{res.Route})
	return s.cache.SetSnapshot(context.Background(), "bench", snap)
}

// floor is the least a server can do: every stream waits on the change
// with the response already encoded and only writes it.
type floor struct {
	discoveryv3.UnimplementedAggregatedDiscoveryServiceServer
	state atomic.Pointer[floorState] // read without locks by every stream
	gen   int
}

type floorState struct {
	changed  chan struct{} // closed when the next state is published
	listener *discoveryv3.DiscoveryResponse
	route    *encoded
	// the same over incremental xDS
	deltaListener *discoveryv3.DeltaDiscoveryResponse
	deltaRoute    *encoded
}

type encoded struct {
	msg  proto.Message
	once sync.Once
	pm   *grpc.PreparedMsg
}

func (e *encoded) send(gs grpc.ServerStream) error {
	e.once.Do(func() {
		pm := &grpc.PreparedMsg{}
		if pm.Encode(gs, e.msg) == nil {
			e.pm = pm
		}
	})
	if e.pm == nil {
		return gs.SendMsg(e.msg)
	}
	return gs.SendMsg(e.pm)
}

func newFloor() *floor {
	f := &floor{}
	f.state.Store(&floorState{changed: make(chan struct{})})
	return f
}

func (f *floor) serve(ctx context.Context, lis net.Listener) error {
	gs := grpc.NewServer(grpc.MaxConcurrentStreams(1<<20), grpc.StaticStreamWindowSize(1<<20), grpc.StaticConnWindowSize(1<<20))
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(gs, f)
	go func() { <-ctx.Done(); gs.Stop() }()
	return gs.Serve(lis)
}

func (f *floor) set(canary int32) error {
	res, err := gateway.Translate(traffic(canary))
	if err != nil {
		return err
	}
	l, _ := anypb.New(res.Listener)
	r, _ := anypb.New(res.Route)
	f.gen++
	v := strconv.Itoa(f.gen)
	old := f.state.Swap(&floorState{
		changed:  make(chan struct{}),
		listener: &discoveryv3.DiscoveryResponse{VersionInfo: "1", TypeUrl: resourcev3.ListenerType, Nonce: "l", Resources: []*anypb.Any{l}},
		route:    &encoded{msg: &discoveryv3.DiscoveryResponse{VersionInfo: v, TypeUrl: resourcev3.RouteType, Nonce: v, Resources: []*anypb.Any{r}}},
		deltaListener: &discoveryv3.DeltaDiscoveryResponse{TypeUrl: resourcev3.ListenerType, Nonce: "l",
			Resources: []*discoveryv3.Resource{{Name: benchHost, Version: "1", Resource: l}}},
		deltaRoute: &encoded{msg: &discoveryv3.DeltaDiscoveryResponse{TypeUrl: resourcev3.RouteType, Nonce: v,
			Resources: []*discoveryv3.Resource{{Name: benchHost, Version: v, Resource: r}}}},
	})
	close(old.changed)
	return nil
}

func (f *floor) StreamAggregatedResources(gs grpc.BidiStreamingServer[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse]) error {
	return serveFloorStream(f, gs.Recv,
		func(r *discoveryv3.DiscoveryRequest) bool { return r.GetResponseNonce() == "" },
		func(st *floorState) error { return gs.Send(st.listener) },
		func(st *floorState) error { return st.route.send(gs) })
}

// DeltaAggregatedResources is StreamAggregatedResources over incremental
// xDS.
func (f *floor) DeltaAggregatedResources(gs grpc.BidiStreamingServer[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse]) error {
	return serveFloorStream(f, gs.Recv,
		func(r *discoveryv3.DeltaDiscoveryRequest) bool { return len(r.GetResourceNamesSubscribe()) > 0 },
		func(st *floorState) error { return gs.Send(st.deltaListener) },
		func(st *floorState) error { return st.deltaRoute.send(gs) })
}

// serveFloorStream answers a subscription to the listener or the route at
// once and sends the route on each change, in either xDS variant (R is its
// request type; subscribes tells a subscription from an ACK).
func serveFloorStream[R interface{ GetTypeUrl() string }](f *floor, recv func() (R, error), subscribes func(R) bool,
	sendListener, sendRoute func(*floorState) error) error {
	reqs := make(chan R, 4)
	errc := make(chan error, 1)
	go func() {
		for {
			r, err := recv()
			if err != nil {
				errc <- err
				return
			}
			reqs <- r
		}
	}()
	st := f.state.Load()
	routes := false
	for {
		select {
		case err := <-errc:
			return err
		case r := <-reqs:
			if !subscribes(r) {
				continue // ACK
			}
			switch r.GetTypeUrl() {
			case resourcev3.ListenerType:
				if err := sendListener(st); err != nil {
					return err
				}
			case resourcev3.RouteType:
				routes = true
				if err := sendRoute(st); err != nil {
					return err
				}
			}
		case <-st.changed:
			st = f.state.Load()
			if routes {
				if err := sendRoute(st); err != nil {
					return err
				}
			}
		}
	}
}
