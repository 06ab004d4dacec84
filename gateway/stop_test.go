package gateway

import (
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-dev/sluice/api"
)

// TestStopAnswersUnansweredStream: when the server stops, a stream that
// has had no response yet gets its first one before it ends (a gRPC xDS
// client whose stream ends unanswered fails its calls waiting for
// routes), while an answered stream ends at once.
func TestStopAnswersUnansweredStream(t *testing.T) {
	rs := startServer(t, "127.0.0.1:0", nil)
	if _, err := rs.SetTraffic(api.Traffic{Rollout: api.Key{Namespace: "shop", Name: "cart"}, Host: "cart.internal",
		StableEndpoints: []string{"127.0.0.1:9100"}, Weights: api.CanaryWeights(0)}); err != nil {
		t.Fatal(err)
	}
	answered := newSotwClient(t, rs.addr)
	answered.subscribe(typeURLs[lds], "cart.internal")
	fresh := newSotwClient(t, rs.addr)
	waitStreams(t, rs.Server, 2)

	stopped := make(chan struct{})
	go func() { defer close(stopped); rs.stop() }()
	<-rs.done // the stop began: every handler has seen it
	if _, err := answered.s.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("answered stream after the stop: %v, want Unavailable (ended at once)", err)
	}
	fresh.send(&discoveryv3.DiscoveryRequest{TypeUrl: typeURLs[lds], ResourceNames: []string{"cart.internal"}, Node: nodeProto("fresh")})
	r, err := fresh.s.Recv()
	if err != nil {
		t.Fatalf("stream opened before the stop and not answered yet: %v, want its first response", err)
	}
	if got := resourceNames(r); len(got) != 1 || got[0] != "cart.internal" {
		t.Fatalf("first response after the stop has %v, want the listener cart.internal", got)
	}
	if _, err := fresh.s.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("after its first response: %v, want Unavailable (the stream ends)", err)
	}
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not stop")
	}
}

// waitStreams waits until s has n open streams.
func waitStreams(t *testing.T, s *Server, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		got := len(s.streams)
		s.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d open streams, want %d", got, n)
		}
		time.Sleep(5 * time.Millisecond) // nothing to wait on: streams open on gRPC's goroutines
	}
}
