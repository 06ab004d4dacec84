package gateway

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
)

// BenchmarkAckFanout measures what ACKs cost the waiters of other hosts.
// n rollouts each have one gRPC-shaped client (a raw state-of-the-world
// stream subscribed to the host's routes). Per iteration every rollout's
// weight changes, every client receives its new routes and holds its ACK,
// a WaitForAck runs on every host (n waiters), and then the clients ACK one host after the
// other; the timed part ends when every WaitForAck returned.
//
// wake=host is the server as it is. wake=all adds what the server did
// before: every ACK woke every waiter (the benchmark wakes them all after
// each ACK it sends). It reports the process CPU per iteration and the
// wake-ups delivered per ACK.
func BenchmarkAckFanout(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		for _, wakeAll := range []bool{false, true} {
			b.Run(fmt.Sprintf("waiters=%d/wake=%s", n, map[bool]string{false: "host", true: "all"}[wakeAll]), func(b *testing.B) {
				benchAckFanout(b, n, wakeAll)
			})
		}
	}
}

func benchAckFanout(b *testing.B, n int, wakeAll bool) {
	srv := startServer(b, "127.0.0.1:0", nil)
	loadRollouts(b, srv.Server, n)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clients := make([]*routeHolder, n)
	var conn *grpc.ClientConn
	for i := range n {
		if i%100 == 0 { // the server's streams per connection
			conn = adsConn(b, srv.addr)
		}
		clients[i] = newRouteHolder(ctx, b, conn, scaleTraffic(i, 10).Host)
	}
	var cpu time.Duration
	var woken uint64
	b.ResetTimer()
	for it := range b.N {
		b.StopTimer()
		versions := make([]string, n)
		for i := range n {
			v, err := srv.SetTraffic(scaleTraffic(i, int32(11+it%80)))
			if err != nil {
				b.Fatal(err)
			}
			versions[i] = v
		}
		receiveAll(b, clients)
		errs := make(chan error, n)
		for i := range n {
			go func() {
				wctx, wcancel := context.WithTimeout(ctx, 10*time.Minute)
				defer wcancel()
				errs <- srv.WaitForAck(wctx, clients[i].host, versions[i])
			}()
		}
		deadline := time.Now().Add(time.Minute)
		for srv.waiterCount() < n {
			if time.Now().After(deadline) {
				b.Fatalf("%d of %d waiters registered after a minute", srv.waiterCount(), n)
			}
			time.Sleep(time.Millisecond)
		}
		woken0, cpu0 := srv.waiters.woken.Load(), processCPU(b)
		b.StartTimer()
		for _, c := range clients {
			c.ackHeld(b)
			if wakeAll {
				srv.waiters.wakeAll()
			}
		}
		for range n {
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		cpu += processCPU(b) - cpu0
		woken += srv.waiters.woken.Load() - woken0
		b.StartTimer()
	}
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
	b.ReportMetric(float64(woken)/float64(b.N*n), "wakeups/ack")
}

// waiterCount is the number of WaitForAck calls in progress.
func (s *Server) waiterCount() int {
	s.waiters.mu.Lock()
	defer s.waiters.mu.Unlock()
	return len(s.waiters.all)
}

// routeHolder is a raw state-of-the-world client of one host's routes that
// receives a response and ACKs it only when told.
type routeHolder struct {
	host string
	s    grpc.BidiStreamingClient[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse]
	held *discoveryv3.DiscoveryResponse
}

func newRouteHolder(ctx context.Context, tb testing.TB, conn *grpc.ClientConn, host string) *routeHolder {
	s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	c := &routeHolder{host: host, s: s}
	if err := s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: typeURLs[rds], ResourceNames: []string{host}, Node: nodeProto("holder-" + host)}); err != nil {
		tb.Fatal(err)
	}
	if c.held, err = s.Recv(); err != nil {
		tb.Fatal(err)
	}
	c.ackHeld(tb)
	return c
}

// ackHeld ACKs the response received last.
func (c *routeHolder) ackHeld(tb testing.TB) {
	r := c.held
	if err := c.s.Send(&discoveryv3.DiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResourceNames: []string{c.host}, VersionInfo: r.GetVersionInfo(), ResponseNonce: r.GetNonce()}); err != nil {
		tb.Fatal(err)
	}
}

// receiveAll has every client receive its next response, in parallel.
func receiveAll(tb testing.TB, clients []*routeHolder) {
	var wg sync.WaitGroup
	errs := make(chan error, len(clients))
	for _, c := range clients {
		wg.Go(func() {
			r, err := c.s.Recv()
			if err != nil {
				errs <- fmt.Errorf("%s: %w", c.host, err)
				return
			}
			c.held = r
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
}
