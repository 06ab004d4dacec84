package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/gateway"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestDroppedRouting finds the routes a change stops naming, which the
// daemon releases (restores to 100% stable without sluice's rules).
func TestDroppedRouting(t *testing.T) {
	gw := func(ns string, names ...string) *api.ClusterRouting {
		g := &api.GatewayAPIRouting{Namespace: ns}
		for _, n := range names {
			g.HTTPRoutes = append(g.HTTPRoutes, api.GatewayRouteRef{Name: n})
		}
		return &api.ClusterRouting{StableService: "s", CanaryService: "c", GatewayAPI: g}
	}
	vs := func(names ...string) *api.ClusterRouting {
		i := &api.IstioRouting{}
		for _, n := range names {
			i.VirtualServices = append(i.VirtualServices, api.IstioVirtualService{Name: n, Namespace: "shop"})
		}
		return &api.ClusterRouting{StableService: "s", CanaryService: "c", Istio: i}
	}
	tests := []struct {
		name     string
		old, new *api.ClusterRouting
		want     *api.ClusterRouting
	}{
		{"removed rollout", gw("shop", "a", "b"), nil, gw("shop", "a", "b")},
		{"same routes", gw("shop", "a"), gw("shop", "a"), nil},
		{"one route renamed", gw("shop", "a", "b"), gw("shop", "a", "c"), gw("shop", "b")},
		{"namespace moved", gw("shop", "a"), gw("edge", "a"), gw("shop", "a")},
		{"gateway api dropped for istio", gw("shop", "a"), vs("v"), gw("shop", "a")},
		{"virtual service dropped", vs("v", "w"), vs("w"), vs("v")},
		{"nothing before", nil, gw("shop", "a"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := droppedRouting(tt.old, tt.new); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("droppedRouting:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// flakyRouter stands in for a cluster router whose apiserver is down for
// its first fails writes (connection refused), then takes them: the test
// is about what routedTraffic makes of the failure, not about a router.
type flakyRouter struct {
	mu     sync.Mutex
	fails  int
	err    error
	writes []api.Traffic
}

func (f *flakyRouter) Name() string { return "flaky" }

func (f *flakyRouter) Apply(_ context.Context, t api.Traffic) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fails > 0 {
		f.fails--
		return "", fmt.Errorf("update httproutes ns/x: %w", f.err)
	}
	f.writes = append(f.writes, t)
	return fmt.Sprint(len(f.writes)), nil
}

func (f *flakyRouter) Release(context.Context, api.Key, *api.ClusterRouting) error { return nil }

func (f *flakyRouter) Verify(context.Context, api.Key, string) (gateway.Verification, error) {
	return gateway.Verification{Verified: true}, nil
}

// TestRouterWriteRetriedNotNacked: a router write that fails because the
// apiserver cannot be reached is not a NACK (which would hold the rollout
// for good, across restarts); the step's ACK wait writes it again until
// it is taken, or runs out as a slow ACK does. A write the apiserver
// refuses is still an error.
func TestRouterWriteRetriedNotNacked(t *testing.T) {
	refused := &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}
	tr := api.Traffic{Rollout: api.Key{Namespace: "ns", Name: "x"}, Routing: &api.ClusterRouting{}, Weights: api.CanaryWeights(50)}

	f := &flakyRouter{fails: 2, err: refused}
	r := &routedTraffic{routers: []gateway.ClusterRouter{f}, applyTimeout: time.Second, log: slog.New(slog.DiscardHandler)}
	version, err := r.SetTraffic(tr)
	if err != nil {
		t.Fatalf("SetTraffic with the apiserver unreachable: %v; want no error (no NACK)", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.WaitForAck(ctx, "", version); err != nil {
		t.Fatalf("WaitForAck: %v", err)
	}
	if len(f.writes) != 1 || f.writes[0].Weights != tr.Weights {
		t.Errorf("writes taken %+v; want the step's traffic once", f.writes)
	}

	down := &flakyRouter{fails: 1 << 30, err: refused}
	r.routers = []gateway.ClusterRouter{down}
	if version, err = r.SetTraffic(tr); err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancelShort()
	if err := r.WaitForAck(short, "", version); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitForAck with the apiserver down throughout: %v; want a deadline (a slow ACK, not a NACK)", err)
	}

	invalid := &flakyRouter{fails: 1, err: apierrors.NewInvalid(schema.GroupKind{Kind: "HTTPRoute"}, "x", nil)}
	r.routers = []gateway.ClusterRouter{invalid}
	if _, err := r.SetTraffic(tr); err == nil {
		t.Error("SetTraffic with a write the apiserver refused: no error")
	}
}

// gatedRouter stands in for a cluster router whose apiserver refuses the
// first write (down), then holds the next one on the wire until the test
// opens gate: the test is about the order routedTraffic writes in.
type gatedRouter struct {
	mu       sync.Mutex
	calls    int
	inFlight chan struct{} // closed when the held write is on the wire
	gate     chan struct{} // closed by the test to let it land
	landed   []int32       // canary weights, in the order they landed
}

func (g *gatedRouter) Name() string { return "gated" }

func (g *gatedRouter) Apply(_ context.Context, t api.Traffic) (string, error) {
	g.mu.Lock()
	g.calls++
	call := g.calls
	g.mu.Unlock()
	switch call {
	case 1:
		return "", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}
	case 2:
		close(g.inFlight)
		<-g.gate
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.landed = append(g.landed, t.Weights.Canary)
	return fmt.Sprint(call), nil
}

func (g *gatedRouter) Release(context.Context, api.Key, *api.ClusterRouting) error { return nil }

func (g *gatedRouter) Verify(context.Context, api.Key, string) (gateway.Verification, error) {
	return gateway.Verification{Verified: true}, nil
}

// TestRouterRetryNeverLandsAfterNewerWrite: the runner cancels a step's
// ACK wait as it publishes the next step's traffic, but a retried write
// of the older step may already be on the wire. The newer write waits for
// it, so the router ends on the newer weights, and the older wait ends
// as superseded (context.Canceled), not as a NACK.
func TestRouterRetryNeverLandsAfterNewerWrite(t *testing.T) {
	key := api.Key{Namespace: "ns", Name: "x"}
	g := &gatedRouter{inFlight: make(chan struct{}), gate: make(chan struct{})}
	r := &routedTraffic{routers: []gateway.ClusterRouter{g}, applyTimeout: 5 * time.Second, log: slog.New(slog.DiscardHandler)}

	older, err := r.SetTraffic(api.Traffic{Rollout: key, Routing: &api.ClusterRouting{}, Weights: api.CanaryWeights(20)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	waited := make(chan error, 1)
	go func() { waited <- r.WaitForAck(ctx, "", older) }()
	<-g.inFlight // the retry of 20 % is on the wire

	cancel() // what the runner does before it publishes the next step
	newer := make(chan error, 1)
	go func() {
		_, err := r.SetTraffic(api.Traffic{Rollout: key, Routing: &api.ClusterRouting{}, Weights: api.CanaryWeights(50)})
		newer <- err
	}()
	select {
	case err := <-newer:
		t.Fatalf("the newer write returned (%v) while the older one was still on the wire", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(g.gate)
	if err := <-newer; err != nil {
		t.Fatal(err)
	}
	if err := <-waited; !errors.Is(err, context.Canceled) {
		t.Errorf("older step's wait: %v; want it superseded (context.Canceled)", err)
	}
	if want := []int32{20, 50}; !slices.Equal(g.landed, want) {
		t.Errorf("canary weights landed in the order %v; want %v (the newer write last)", g.landed, want)
	}
}

// TestRouterRetryStopsOnceSuperseded: a retry waiting out its back-off
// when a newer write starts does not write again, even if nobody
// cancelled its wait.
func TestRouterRetryStopsOnceSuperseded(t *testing.T) {
	key := api.Key{Namespace: "ns", Name: "x"}
	f := &flakyRouter{fails: 1, err: &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}}
	r := &routedTraffic{routers: []gateway.ClusterRouter{f}, applyTimeout: time.Second, log: slog.New(slog.DiscardHandler)}
	older, err := r.SetTraffic(api.Traffic{Rollout: key, Routing: &api.ClusterRouting{}, Weights: api.CanaryWeights(20)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.SetTraffic(api.Traffic{Rollout: key, Routing: &api.ClusterRouting{}, Weights: api.CanaryWeights(50)}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.WaitForAck(ctx, "", older); !errors.Is(err, context.Canceled) {
		t.Errorf("older step's wait: %v; want it superseded (context.Canceled)", err)
	}
	if len(f.writes) != 1 || f.writes[0].Weights.Canary != 50 {
		t.Errorf("writes taken %+v; want only the newer 50 %%", f.writes)
	}
}
