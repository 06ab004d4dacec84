package gateway

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/sluice-dev/sluice/api"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
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

// TestStreamsPerConnection opens more streams on one HTTP/2 connection
// than the limit allows, ignoring the server's SETTINGS as a hostile peer
// would: the stream past the limit is refused (RST_STREAM REFUSED_STREAM),
// the others are not. A PING after the HEADERS frames marks the point by
// which the server has answered them all.
func TestStreamsPerConnection(t *testing.T) {
	srv := startServer(t, "127.0.0.1:0", func(o *Options) { o.Limits = Limits{StreamsPerConnection: 3} })
	conn, err := net.Dial("tcp", srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second)) // a hang fails instead of blocking the suite
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	var hdr bytes.Buffer
	enc := hpack.NewEncoder(&hdr)
	const opened = 4
	for i := range opened {
		hdr.Reset()
		for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", srv.addr},
			{":path", "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources"},
			{"content-type", "application/grpc"}, {"te", "trailers"}} {
			_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: hdr.Bytes(), EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
	}
	if err := fr.WritePing(false, [8]byte{'s', 'l', 'u', 'i', 'c', 'e'}); err != nil {
		t.Fatal(err)
	}
	advertised := uint32(0)
	refused := map[uint32]http2.ErrCode{}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("read frame: %v", err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if v, ok := f.Value(http2.SettingMaxConcurrentStreams); ok {
				advertised = v
			}
		case *http2.RSTStreamFrame:
			refused[f.StreamID] = f.ErrCode
		case *http2.PingFrame:
			if !f.IsAck() {
				continue
			}
			if advertised != 3 {
				t.Errorf("advertised MAX_CONCURRENT_STREAMS %d, want 3", advertised)
			}
			want := map[uint32]http2.ErrCode{2*opened - 1: http2.ErrCodeRefusedStream}
			if len(refused) != 1 || refused[2*opened-1] != http2.ErrCodeRefusedStream {
				t.Fatalf("reset streams %v, want %v", refused, want)
			}
			return
		}
	}
}

// TestResponseCache checks what the shared response cache holds: nothing
// for subscriptions to names that do not exist, one response per distinct
// subscription while a stream holds it, and nothing once its last stream
// moved on or closed.
func TestResponseCache(t *testing.T) {
	srv := startServer(t, "127.0.0.1:0", nil)
	if _, err := srv.SetTraffic(traffic(nil)); err != nil {
		t.Fatal(err)
	}
	for i, n := range names(20, 1024) {
		c := newSotwClient(t, srv.addr)
		c.subscribe(typeURLs[rds], n)
		c.subscribe(typeURLs[eds], n, names(40, 1000)[20+i])
	}
	if got := srv.cachedResponses(); got != 0 {
		t.Fatalf("%d cached responses for 20 streams subscribed to made-up names, want 0", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var closing []*sotwClient
	for range 3 {
		s, err := adsClient(t, srv.addr).StreamAggregatedResources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c := &sotwClient{t: t, s: s, nm: map[string][]string{}}
		c.subscribe(typeURLs[rds], host)
		closing = append(closing, c)
	}
	if got := srv.cachedResponses(); got != 1 {
		t.Fatalf("%d cached responses for 3 streams with one subscription, want 1", got)
	}
	closing[0].subscribe(typeURLs[rds], host, "nothing.internal") // same content, another key
	if got := srv.cachedResponses(); got != 2 {
		t.Fatalf("%d cached responses for two subscriptions, want 2", got)
	}
	cancel()
	eventually(t, 10*time.Second, "the cache to empty after the streams closed", func() bool { return srv.cachedResponses() == 0 })
}

// TestPublishOfOtherHostsBuildsNoResponse checks that a publish changing
// none of a stream's resources sends it nothing and builds no response for
// its subscription, that a change of one of them is sent (both while the
// type set's change log reaches back to the last response and past it),
// and that a new subscription to the same resources is answered. The
// stream is driven as the handler drives it (sotwRequest, then sotwSend on
// each publish) into a sink, so what was built can be counted between
// publishes.
func TestPublishOfOtherHostsBuildsNoResponse(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	other := func(w int32) api.Traffic {
		return traffic(func(tr *api.Traffic) {
			tr.Rollout, tr.Host, tr.Weights = api.Key{Namespace: "default", Name: "pay"}, "pay.internal", api.CanaryWeights(w)
		})
	}
	for _, tr := range []api.Traffic{traffic(nil), other(10)} {
		if _, err := s.SetTraffic(tr); err != nil {
			t.Fatal(err)
		}
	}
	st, err := s.addStream(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.dropStream(st)
	sink := &sinkStream{ctx: context.Background()}
	subscribe := func(names ...string) {
		t.Helper()
		req := &discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "client"}, TypeUrl: typeURLs[rds], ResourceNames: names}
		if _, err := s.sotwRequest(st, rds, req); err != nil {
			t.Fatal(err)
		}
	}
	send := func() *discoveryv3.DiscoveryResponse {
		t.Helper()
		sink.sotw[rds] = nil
		if err := s.sotwSend(sink, st, rds); err != nil {
			t.Fatal(err)
		}
		return sink.sotw[rds]
	}
	publish := func(tr api.Traffic) {
		t.Helper()
		if _, err := s.SetTraffic(tr); err != nil {
			t.Fatal(err)
		}
	}
	ownChange := func(canary int32) {
		publish(traffic(func(tr *api.Traffic) { tr.Weights = api.CanaryWeights(canary) }))
	}
	// longRun publishes only another host, more often than the type sets'
	// change log reaches back.
	longRun := func() {
		for i := range changeLogGenerations + 2 {
			publish(other(int32(i%2*40 + 20)))
		}
		if _, ok := s.snap.Load().types[rds].log.since(st.sotw[rds].current); ok {
			t.Fatal("the change log still reaches back to the last response: the comparison one by one is not tested")
		}
	}
	wantRoute := func(when string) {
		t.Helper()
		if r := send(); len(r.GetResources()) != 1 {
			t.Errorf("response %s: %v, want the host's route configuration", when, r)
		}
	}
	// nothingBuilt checks that publishes of another host sent nothing and
	// built no response.
	nothingBuilt := func(when string) {
		t.Helper()
		if r := send(); r != nil {
			t.Errorf("sent %v %s", r, when)
		}
		if got := s.cachedResponses(); got != 0 {
			t.Errorf("%d responses built %s, want 0", got, when)
		}
	}
	subscribe(host)
	wantRoute("to the subscription")
	publish(other(50))
	nothingBuilt("after a publish that changed only another host")
	ownChange(20)
	wantRoute("to the host's own change, read in the change log")
	// Past what the log holds, the subscription's resources are compared
	// one by one.
	longRun()
	nothingBuilt(fmt.Sprintf("after %d publishes that changed only another host", changeLogGenerations+2))
	ownChange(30)
	longRun()
	wantRoute("to the host's own change, further back than the change log")
	subscribe(host, "nothing.internal") // the same resources under a new subscription
	if r := send(); len(r.GetResources()) != 1 {
		t.Errorf("response to a new subscription of the same resources %v, want the route configuration", r)
	}
}
