package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/xds"
)

// backend is a real gRPC server that says which version answered, in the
// "version" response header of a health Check.
type backend struct {
	healthpb.UnimplementedHealthServer
	version string
}

func (b *backend) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if err := grpc.SetHeader(ctx, metadata.Pairs("version", b.version)); err != nil {
		return nil, err
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func startBackend(t *testing.T, version string) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, &backend{version: version})
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	return lis.Addr().String()
}

// runningServer is a Server serving on a loopback port until stop.
type runningServer struct {
	*Server
	addr string
	reg  *prometheus.Registry
	stop func()
}

// startServer serves on addr ("127.0.0.1:0" for any port).
func startServer(t testing.TB, addr string, mod func(*Options)) *runningServer {
	t.Helper()
	reg := prometheus.NewRegistry()
	opts := Options{Registry: reg}
	if mod != nil {
		mod(&opts)
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	var lis net.Listener
	deadline := time.Now().Add(10 * time.Second)
	for {
		// Re-listening on the address of a just-stopped server can race
		// with the kernel releasing it.
		if lis, err = net.Listen("tcp", addr); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, lis) }()
	rs := &runningServer{Server: s, addr: lis.Addr().String(), reg: reg}
	stopped := false
	rs.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}
	t.Cleanup(rs.stop)
	return rs
}

// bootstrap is a gRPC xDS bootstrap pointing at server.
func bootstrap(server, node, creds string) []byte {
	return fmt.Appendf(nil, `{
  "xds_servers": [{"server_uri": %q, "channel_creds": [%s], "server_features": ["xds_v3"]}],
  "node": {"id": %q, "locality": {"zone": "test"}}
}`, server, creds, node)
}

// dialXDS opens a gRPC channel to xds:///host with its own xDS client.
func dialXDS(t *testing.T, bootstrapJSON []byte, host string) *grpc.ClientConn {
	t.Helper()
	rb, err := xds.NewXDSResolverWithConfigForTesting(bootstrapJSON)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient("xds:///"+host, grpc.WithResolvers(rb), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// call makes one RPC with the given request headers and returns the
// version that answered.
func call(ctx context.Context, cc *grpc.ClientConn, kv ...string) (string, error) {
	if len(kv) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, kv...)
	}
	var hdr metadata.MD
	if _, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&hdr), grpc.WaitForReady(true)); err != nil {
		return "", err
	}
	if v := hdr.Get("version"); len(v) == 1 {
		return v[0], nil
	}
	return "", errors.New("no version header")
}

// callPolled is call with a deadline, for conditions eventually polls. An
// RPC waits for a ready channel (WaitForReady): one that the client routed
// to a cluster just as the server took that cluster away waits forever
// (grpc-go keeps the cluster for the RPC, and its CDS watch says it is
// gone), and without a deadline it hung eventually, and the test binary
// until go test's timeout (CI, TestViewsPerCluster after Remove).
func callPolled(cc *grpc.ClientConn, kv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return call(ctx, cc, kv...)
}

// count makes n RPCs and counts answers per version.
func count(t *testing.T, cc *grpc.ClientConn, n int, kv ...string) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got := map[string]int{}
	for range n {
		v, err := call(ctx, cc, kv...)
		if err != nil {
			t.Fatalf("rpc: %v", err)
		}
		got[v]++
	}
	return got
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitAck(t *testing.T, s *Server, host, version string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.WaitForAck(ctx, host, version); err != nil {
		t.Fatalf("WaitForAck %s: %v", version, err)
	}
}

// metricValue reads a counter or gauge from reg (0 when absent).
func metricValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return 0
}

// subscribers counts streams subscribed to one resource by name.
func (s *Server) subscribers(t typeIdx, name string) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := 0
	for st := range s.streams {
		st.mu.Lock()
		if st.subscribesNamed(t, name) {
			n++
		}
		st.mu.Unlock()
	}
	return n
}
