package gateway

import (
	"context"
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// recvCode waits for a stream's next message or end and returns the status
// code: OK when a message arrived.
func recvCode[T any](t *testing.T, recv func() (T, error)) codes.Code {
	t.Helper()
	ch := make(chan error, 1)
	go func() { _, err := recv(); ch <- err }()
	select {
	case err := <-ch:
		return status.Code(err)
	case <-time.After(20 * time.Second):
		t.Fatal("no response or end within 20s")
	}
	return codes.Unknown
}

// counterValue reads one counter.
func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func refusedCount(t *testing.T, s *Server, reason string) float64 {
	t.Helper()
	return counterValue(t, s.m.refused.WithLabelValues(reason))
}

// names returns n distinct names of size bytes each.
func names(n, size int) []string {
	out := make([]string, n)
	for i := range out {
		p := strings.Repeat("x", size)
		b := []byte(p)
		for j, k := 0, i; j < 8 && j < size; j, k = j+1, k/26 {
			b[j] = byte('a' + k%26)
		}
		out[i] = string(b)
	}
	return out
}

// TestRequestLimits checks that a request breaking a name limit ends its
// stream with the documented code and is counted under its reason, while
// the same request within the limit is answered.
func TestRequestLimits(t *testing.T) {
	stableCluster := ClusterName(checkout, Stable) // exists, so a delta subscription is answered
	limits := Limits{NamesPerRequest: 10, NamesPerSubscription: 15, NameLength: 64, SubscribedBytes: 4096}
	sotw := func(names ...string) *discoveryv3.DiscoveryRequest {
		return &discoveryv3.DiscoveryRequest{TypeUrl: typeURLs[rds], ResourceNames: names, Node: nodeProto("n")}
	}
	delta := func(names ...string) *discoveryv3.DeltaDiscoveryRequest {
		return &discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURLs[eds], ResourceNamesSubscribe: names, Node: nodeProto("n")}
	}
	cases := []struct {
		name   string
		sotw   []*discoveryv3.DiscoveryRequest
		delta  []*discoveryv3.DeltaDiscoveryRequest
		code   codes.Code
		reason string
	}{
		{"sotw within limits", []*discoveryv3.DiscoveryRequest{sotw(names(10, 64)...)}, nil, codes.OK, ""},
		{"sotw names per request", []*discoveryv3.DiscoveryRequest{sotw(names(11, 8)...)}, nil, codes.InvalidArgument, refusedNamesPerRequest},
		{"sotw name length", []*discoveryv3.DiscoveryRequest{sotw("ok", strings.Repeat("n", 65))}, nil, codes.InvalidArgument, refusedNameLength},
		{"node id length", []*discoveryv3.DiscoveryRequest{{TypeUrl: typeURLs[cds], Node: nodeProto(strings.Repeat("n", 65))}}, nil, codes.InvalidArgument, refusedNodeIDLength},
		{"delta within limits", nil, []*discoveryv3.DeltaDiscoveryRequest{delta(append(names(9, 8), stableCluster)...)}, codes.OK, ""},
		{"delta names per request", nil, []*discoveryv3.DeltaDiscoveryRequest{delta(names(11, 8)...)}, codes.InvalidArgument, refusedNamesPerRequest},
		{"delta initial versions count as names", nil, []*discoveryv3.DeltaDiscoveryRequest{{TypeUrl: typeURLs[cds], Node: nodeProto("n"),
			InitialResourceVersions: map[string]string{"a": "1", "b": "1", "c": "1", "d": "1", "e": "1", "f": "1", "g": "1", "h": "1", "i": "1", "j": "1", "k": "1"}}},
			codes.InvalidArgument, refusedNamesPerRequest},
		{"delta names per subscription accumulate", nil, []*discoveryv3.DeltaDiscoveryRequest{delta(append(names(7, 8), stableCluster)...), delta(names(16, 8)[8:]...)}, codes.InvalidArgument, refusedNamesPerSub},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := startServer(t, "127.0.0.1:0", func(o *Options) { o.Limits = limits })
			if _, err := srv.SetTraffic(traffic(nil)); err != nil {
				t.Fatal(err)
			}
			var code codes.Code
			if tc.sotw != nil {
				c := newSotwClient(t, srv.addr)
				for _, r := range tc.sotw {
					c.send(r)
				}
				code = recvCode(t, c.s.Recv)
				if code == codes.OK && len(tc.sotw) > 1 {
					code = recvCode(t, c.s.Recv)
				}
			} else {
				c := newDeltaClient(t, srv.addr)
				for i, r := range tc.delta {
					c.send(r)
					if i < len(tc.delta)-1 {
						c.recv() // the first subscription's answer
					}
				}
				code = recvCode(t, c.s.Recv)
			}
			if code != tc.code {
				t.Fatalf("got %v, want %v", code, tc.code)
			}
			if tc.reason != "" && refusedCount(t, srv.Server, tc.reason) != 1 {
				t.Errorf("sluice_xds_refused_total{reason=%q} = %v, want 1", tc.reason, refusedCount(t, srv.Server, tc.reason))
			}
		})
	}
}

// TestSubscribedBytesLimit checks the server-wide budget: streams each
// within the per-stream limits are refused once their names add up past
// it, and a closed stream gives its share back.
func TestSubscribedBytesLimit(t *testing.T) {
	srv := startServer(t, "127.0.0.1:0", func(o *Options) { o.Limits = Limits{SubscribedBytes: 1000, NameLength: 100} })
	subscribe := func(c *sotwClient, suffix string) codes.Code {
		ns := names(4, 100) // 400 bytes
		for i := range ns {
			ns[i] = ns[i][:len(ns[i])-len(suffix)] + suffix
		}
		c.send(&discoveryv3.DiscoveryRequest{TypeUrl: typeURLs[rds], ResourceNames: ns, Node: nodeProto("n")})
		return recvCode(t, c.s.Recv)
	}
	ctx, cancel := context.WithCancel(context.Background())
	first, err := adsClient(t, srv.addr).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c1 := &sotwClient{t: t, s: first, nm: map[string][]string{}}
	if code := subscribe(c1, "a"); code != codes.OK {
		t.Fatalf("first 400 bytes: %v", code)
	}
	if code := subscribe(newSotwClient(t, srv.addr), "b"); code != codes.OK {
		t.Fatalf("second 400 bytes: %v", code)
	}
	if code := subscribe(newSotwClient(t, srv.addr), "c"); code != codes.ResourceExhausted {
		t.Fatalf("third 400 bytes (1,200 > 1,000): %v, want ResourceExhausted", code)
	}
	if got := refusedCount(t, srv.Server, refusedSubscribedBytes); got != 1 {
		t.Errorf("refused{subscribed_bytes} = %v, want 1", got)
	}
	cancel()
	eventually(t, 10*time.Second, "the first stream's names to be released", func() bool { return srv.subscribedBytes.Load() == 400 })
	if code := subscribe(newSotwClient(t, srv.addr), "d"); code != codes.OK {
		t.Fatalf("after a stream closed: %v", code)
	}
}

// TestStreamLimit checks that streams beyond Limits.Streams are refused
// with ResourceExhausted and counted, and that a closed stream frees its
// place.
func TestStreamLimit(t *testing.T) {
	srv := startServer(t, "127.0.0.1:0", func(o *Options) { o.Limits = Limits{Streams: 2} })
	if _, err := srv.SetTraffic(traffic(nil)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s1, err := adsClient(t, srv.addr).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c1 := &sotwClient{t: t, s: s1, nm: map[string][]string{}}
	c1.subscribe(typeURLs[cds])
	newSotwClient(t, srv.addr).subscribe(typeURLs[cds])
	d := newDeltaClient(t, srv.addr)
	d.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURLs[cds], Node: nodeProto("n")})
	if code := recvCode(t, d.s.Recv); code != codes.ResourceExhausted {
		t.Fatalf("third stream: %v, want ResourceExhausted", code)
	}
	if got := refusedCount(t, srv.Server, refusedStreams); got != 1 {
		t.Errorf("refused{streams} = %v, want 1", got)
	}
	cancel()
	eventually(t, 10*time.Second, "the first stream to close", func() bool { return srv.Clients() == 1 })
	newSotwClient(t, srv.addr).subscribe(typeURLs[cds])
}

// TestAllowedNodes checks the node allow-list on both protocols.
func TestAllowedNodes(t *testing.T) {
	cases := []struct {
		node  string
		delta bool
		code  codes.Code
	}{
		{"envoy-edge-1", false, codes.OK},
		{"grpc/checkout", true, codes.OK},
		{"attacker", false, codes.PermissionDenied},
		{"attacker", true, codes.PermissionDenied},
		{"", false, codes.PermissionDenied},
		{"envoy-edge-1/../x", false, codes.PermissionDenied},
	}
	srv := startServer(t, "127.0.0.1:0", func(o *Options) { o.AllowedNodes = []string{"envoy-*", "grpc/*"} })
	if _, err := srv.SetTraffic(traffic(nil)); err != nil {
		t.Fatal(err)
	}
	refused := 0
	for _, tc := range cases {
		t.Run(tc.node, func(t *testing.T) {
			var code codes.Code
			if tc.delta {
				c := newDeltaClient(t, srv.addr)
				c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURLs[cds], Node: nodeProto(tc.node)})
				code = recvCode(t, c.s.Recv)
			} else {
				c := newSotwClient(t, srv.addr)
				c.send(&discoveryv3.DiscoveryRequest{TypeUrl: typeURLs[cds], Node: nodeProto(tc.node)})
				code = recvCode(t, c.s.Recv)
			}
			if code != tc.code {
				t.Fatalf("node %q: %v, want %v", tc.node, code, tc.code)
			}
			if code != codes.OK {
				refused++
			}
			if got := refusedCount(t, srv.Server, refusedNodeNotAllowed); got != float64(refused) {
				t.Errorf("refused{node_not_allowed} = %v, want %d", got, refused)
			}
		})
	}
}

// TestAllowedNodesBadPattern checks that New rejects a malformed pattern.
func TestAllowedNodesBadPattern(t *testing.T) {
	if _, err := New(Options{AllowedNodes: []string{"envoy-["}}); err == nil {
		t.Fatal("New accepted the pattern \"envoy-[\"")
	}
}
