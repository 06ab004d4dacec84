package replica

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/xds"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/gateway"
	"github.com/sluice-dev/sluice/gateway/probe"
)

// TestHandoverListenerKeepsSocket: a gateway stopped on a handoverListener
// leaves the socket open, so that a client dialing before the next gateway
// serves is queued, not refused; a real gRPC xDS client made in that gap
// gets its answer once the next gateway serves the released socket.
// closeSocket, for a follower that stops without handing over, closes it.
func TestHandoverListenerKeepsSocket(t *testing.T) {
	backend := startProbeBackend(t, "v1")
	traffic := api.Traffic{Rollout: api.Key{Namespace: "shop", Name: "cart"}, Host: "cart.shop",
		StableEndpoints: []string{backend}, Weights: api.CanaryWeights(0)}
	bound, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := bound.Addr().String()
	lis, err := newHandoverListener(bound)
	if err != nil {
		t.Fatal(err)
	}
	stopFirst := serveGateway(t, lis, traffic)
	if err := callFresh(context.Background(), "before", addr, traffic.Host); err != nil {
		t.Fatalf("call on the first gateway: %v", err)
	}
	stopFirst() // what a follower does on winning the lease

	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatalf("dial between the two gateways: %v (want queued in the backlog, not refused)", err)
	}
	conn.Close()
	answered := make(chan error, 1)
	go func() { answered <- callFresh(context.Background(), "between", addr, traffic.Host) }()
	select {
	case err := <-answered:
		t.Fatalf("a call was answered while no gateway served (err %v)", err)
	case <-time.After(200 * time.Millisecond): // nothing to wait on: no one serves
	}

	released, err := lis.release()
	if err != nil {
		t.Fatal(err)
	}
	stopSecond := serveGateway(t, released, traffic)
	select {
	case err := <-answered:
		if err != nil {
			t.Fatalf("the client that dialed between the gateways: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the client that dialed between the gateways got no answer from the second one")
	}
	stopSecond()
	if _, err := net.DialTimeout("tcp", addr, time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial after the second gateway stopped: %v, want refused (it owns and closes the socket)", err)
	}
}

// TestHandoverListenerCloseSocket: a follower that stops without handing
// over releases its address.
func TestHandoverListenerCloseSocket(t *testing.T) {
	bound, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lis, err := newHandoverListener(bound)
	if err != nil {
		t.Fatal(err)
	}
	serveGateway(t, lis, api.Traffic{})()
	if err := lis.closeSocket(); err != nil {
		t.Fatal(err)
	}
	again, err := net.Listen("tcp", bound.Addr().String())
	if err != nil {
		t.Fatalf("bind the address again after closeSocket: %v", err)
	}
	again.Close()
}

// serveGateway serves a gateway with traffic (when it has a host) on lis
// and returns its stop, which waits until Serve returned.
func serveGateway(t *testing.T, lis net.Listener, traffic api.Traffic) (stop func()) {
	t.Helper()
	gw, err := gateway.New(gateway.Options{Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	if traffic.Host != "" {
		if _, err := gw.SetTraffic(traffic); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- gw.Serve(ctx, lis) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-served; err != nil {
			t.Errorf("gateway serve: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

func startProbeBackend(t *testing.T, version string) string {
	t.Helper()
	b, err := probe.NewBackend(probe.BackendOptions{Version: version})
	if err != nil {
		t.Fatal(err)
	}
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = b.Serve(ctx, gl, hl); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return gl.Addr().String()
}

// callFresh makes a new gRPC xDS client of addr and one wait-for-ready
// call to host on it.
func callFresh(ctx context.Context, node, addr, host string) error {
	rb, err := xds.NewXDSResolverWithConfigForTesting(probe.Bootstrap(addr, node))
	if err != nil {
		return err
	}
	cc, err := grpc.NewClient("xds:///"+host, grpc.WithResolvers(rb), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, err = probe.Call(ctx, cc)
	return err
}
