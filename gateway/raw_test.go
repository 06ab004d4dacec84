package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/sluice-dev/sluice/api"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// These tests speak raw ADS, the way Envoy does (wildcard listeners and
// clusters, the sluice-http route), to check what is sent when.

func adsClient(t testing.TB, addr string) discoveryv3.AggregatedDiscoveryServiceClient {
	t.Helper()
	return discoveryv3.NewAggregatedDiscoveryServiceClient(adsConn(t, addr))
}

// adsConn dials addr for raw ADS streams, closed when the test ends.
func adsConn(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	// Envoy takes responses of any size; the sluice-http route of 10,000
	// rollouts is more than gRPC's default 4 MiB.
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

type sotwClient struct {
	t  *testing.T
	s  grpc.BidiStreamingClient[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse]
	nm map[string][]string // names per type
}

func newSotwClient(t *testing.T, addr string) *sotwClient {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := adsClient(t, addr).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return &sotwClient{t: t, s: s, nm: map[string][]string{}}
}

func (c *sotwClient) send(req *discoveryv3.DiscoveryRequest) {
	c.t.Helper()
	// io.EOF means the server already ended the stream (a refused
	// stream ends before its first request is read); the status is
	// what the next Recv returns, as gRPC's SendMsg documents.
	if err := c.s.Send(req); err != nil && !errors.Is(err, io.EOF) {
		c.t.Fatal(err)
	}
}

// recv returns the next response, failing after a deadline.
func (c *sotwClient) recv() *discoveryv3.DiscoveryResponse {
	c.t.Helper()
	type result struct {
		r   *discoveryv3.DiscoveryResponse
		err error
	}
	ch := make(chan result, 1)
	go func() { r, err := c.s.Recv(); ch <- result{r, err} }()
	select {
	case res := <-ch:
		if res.err != nil {
			c.t.Fatalf("recv: %v", res.err)
		}
		return res.r
	case <-time.After(20 * time.Second):
		c.t.Fatal("no response within 20s")
	}
	return nil
}

// subscribe asks for names of typ and ACKs the answer.
func (c *sotwClient) subscribe(typ string, names ...string) *discoveryv3.DiscoveryResponse {
	c.t.Helper()
	c.nm[typ] = names
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: typ, ResourceNames: names, Node: nodeProto("raw")})
	r := c.recv()
	if r.GetTypeUrl() != typ {
		c.t.Fatalf("got %s, want %s", r.GetTypeUrl(), typ)
	}
	c.ack(r)
	return r
}

func (c *sotwClient) ack(r *discoveryv3.DiscoveryResponse) {
	c.t.Helper()
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResourceNames: c.nm[r.GetTypeUrl()], VersionInfo: r.GetVersionInfo(), ResponseNonce: r.GetNonce()})
}

func (c *sotwClient) nack(r *discoveryv3.DiscoveryResponse, prev string) {
	c.t.Helper()
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResourceNames: c.nm[r.GetTypeUrl()], VersionInfo: prev, ResponseNonce: r.GetNonce(),
		ErrorDetail: &statuspb.Status{Code: 3, Message: "raw client says no"}})
}

func resourceNames(r *discoveryv3.DiscoveryResponse) []string {
	var out []string
	for _, a := range r.GetResources() {
		switch {
		case a.MessageIs(&listenerProto{}):
			m := &listenerProto{}
			_ = a.UnmarshalTo(m)
			out = append(out, m.GetName())
		case a.MessageIs(&clusterProto{}):
			m := &clusterProto{}
			_ = a.UnmarshalTo(m)
			out = append(out, m.GetName())
		case a.MessageIs(&routeProto{}):
			m := &routeProto{}
			_ = a.UnmarshalTo(m)
			out = append(out, m.GetName())
		case a.MessageIs(&claProto{}):
			m := &claProto{}
			_ = a.UnmarshalTo(m)
			out = append(out, m.GetClusterName())
		}
	}
	slices.Sort(out)
	return out
}

// TestSotwPerTypeVersions checks that a weight change sends only routes, an
// endpoint change only endpoints, and that a NACKed response is not re-sent.
func TestSotwPerTypeVersions(t *testing.T) {
	srv := startServer(t, "127.0.0.1:0", func(o *Options) { o.EnvoyRoutes = EnvoyRoutesCombined }) // subscribes to the sluice-http route
	ver, err := srv.SetTraffic(traffic(nil))
	if err != nil {
		t.Fatal(err)
	}
	c := newSotwClient(t, srv.addr)
	if got := resourceNames(c.subscribe(typeURLs[cds])); !slices.Equal(got, []string{"default/checkout/canary", "default/checkout/stable"}) {
		t.Fatalf("clusters %v", got)
	}
	c.subscribe(typeURLs[eds], "default/checkout/canary", "default/checkout/stable")
	if got := resourceNames(c.subscribe(typeURLs[lds])); !slices.Equal(got, []string{"checkout.internal", EnvoyName}) {
		t.Fatalf("listeners %v", got)
	}
	lastRDS := c.subscribe(typeURLs[rds], EnvoyName)
	waitAck(t, srv.Server, host, ver)

	steps := []struct {
		name string
		mod  func(*api.Traffic)
		want string // the only type sent
	}{
		{"weight change sends routes only", func(tr *api.Traffic) { tr.Weights = api.CanaryWeights(50) }, typeURLs[rds]},
		{"endpoint change sends endpoints only", func(tr *api.Traffic) {
			tr.Weights = api.CanaryWeights(50)
			tr.CanaryEndpoints = append(tr.CanaryEndpoints, "127.0.0.1:9004")
		}, typeURLs[eds]},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			v, err := srv.SetTraffic(traffic(st.mod))
			if err != nil {
				t.Fatal(err)
			}
			r := c.recv()
			if r.GetTypeUrl() != st.want {
				t.Fatalf("first response after change is %s, want %s", r.GetTypeUrl(), st.want)
			}
			if r.GetTypeUrl() == typeURLs[rds] {
				lastRDS = r
			}
			c.ack(r)
			waitAck(t, srv.Server, host, v)
		})
	}

	t.Run("nack is not answered with the same version", func(t *testing.T) {
		v, err := srv.SetTraffic(traffic(func(tr *api.Traffic) {
			tr.Weights = api.CanaryWeights(20)
			tr.CanaryEndpoints = append(tr.CanaryEndpoints, "127.0.0.1:9004")
		}))
		if err != nil {
			t.Fatal(err)
		}
		r := c.recv()
		if r.GetTypeUrl() != typeURLs[rds] {
			t.Fatalf("got %s, want routes", r.GetTypeUrl())
		}
		c.nack(r, lastRDS.GetVersionInfo())
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.WaitForAck(ctx, host, v); !errors.Is(err, ErrNack) {
			t.Fatalf("WaitForAck after nack = %v, want ErrNack", err)
		}
		// The next thing on the stream must be the next change (endpoints),
		// not the rejected routes again.
		v2, err := srv.SetTraffic(traffic(func(tr *api.Traffic) {
			tr.Weights = api.CanaryWeights(20)
		}))
		if err != nil {
			t.Fatal(err)
		}
		r = c.recv()
		if r.GetTypeUrl() != typeURLs[eds] {
			t.Fatalf("after nack got %s, want only the endpoint change", r.GetTypeUrl())
		}
		c.ack(r)
		// The routes the client rejected are still what v2 needs: still NACKed.
		ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel2()
		if err := srv.WaitForAck(ctx2, host, v2); !errors.Is(err, ErrNack) {
			t.Fatalf("WaitForAck(v2) = %v, want ErrNack (routes unchanged since the nack)", err)
		}
		if n := metricValue(t, srv.reg, "sluice_xds_nacks_total"); n != 1 {
			t.Errorf("nacks_total = %v, want 1", n)
		}
	})

	t.Run("wait times out while a client has not acked", func(t *testing.T) {
		v, err := srv.SetTraffic(traffic(func(tr *api.Traffic) { tr.Weights = api.CanaryWeights(30) }))
		if err != nil {
			t.Fatal(err)
		}
		r := c.recv()
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		if err := srv.WaitForAck(ctx, host, v); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("WaitForAck without ack = %v, want deadline exceeded", err)
		}
		c.ack(r)
		waitAck(t, srv.Server, host, v)
	})
}

// TestSlowClientDoesNotBlockPublish publishes many large changes while one
// client has stopped reading: SetTraffic keeps returning, and a healthy
// client still converges on the newest version.
func TestSlowClientDoesNotBlockPublish(t *testing.T) {
	srv := startServer(t, "127.0.0.1:0", nil)
	big := func(i int) api.Traffic {
		return traffic(func(tr *api.Traffic) {
			tr.Weights = api.CanaryWeights(int32(i % 100))
			for j := range 300 {
				tr.HeaderRoutes = append(tr.HeaderRoutes, api.HeaderRoute{
					Name:  fmt.Sprintf("r%d-%d", i, j),
					Match: []api.HeaderMatch{{HeaderName: "x-user", HeaderValue: api.StringMatch{Exact: strings.Repeat("u", 200) + fmt.Sprint(j)}}},
				})
			}
		})
	}
	if _, err := srv.SetTraffic(big(0)); err != nil {
		t.Fatal(err)
	}
	stuck := newSotwClient(t, srv.addr)
	stuck.subscribe(typeURLs[rds], host) // then never reads again
	healthy := newSotwClient(t, srv.addr)
	healthy.subscribe(typeURLs[rds], host)

	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; i <= 60; i++ {
			if _, err := srv.SetTraffic(big(i)); err != nil {
				t.Error(err)
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("SetTraffic blocked behind a client that stopped reading")
	}
	// The healthy client ends on the newest routes; intermediate versions
	// may be skipped (coalesced).
	for {
		r := healthy.recv()
		healthy.ack(r)
		if r.GetVersionInfo() == srv.snap.Load().types[rds].version() {
			break
		}
	}
}

// TestEveryClusterAnswered checks that a client asking for just one
// cluster of a rollout gets it, whatever the step: both clusters exist for
// as long as the rollout does.
func TestEveryClusterAnswered(t *testing.T) {
	srv := startServer(t, "127.0.0.1:0", nil)
	cases := []struct {
		name string
		mod  func(*api.Traffic)
	}{
		{"stable only", func(tr *api.Traffic) { tr.CanaryEndpoints, tr.Weights = nil, api.CanaryWeights(0) }},
		{"full canary", func(tr *api.Traffic) { tr.Weights = api.CanaryWeights(100) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := srv.SetTraffic(traffic(tc.mod)); err != nil {
				t.Fatal(err)
			}
			for _, side := range []Side{Stable, Canary} {
				c := newSotwClient(t, srv.addr)
				name := ClusterName(checkout, side)
				if got := resourceNames(c.subscribe(typeURLs[cds], name)); !slices.Equal(got, []string{name}) {
					t.Errorf("asked for %s, got %v", name, got)
				}
				if got := resourceNames(c.subscribe(typeURLs[eds], name)); !slices.Equal(got, []string{name}) {
					t.Errorf("asked for endpoints of %s, got %v", name, got)
				}
			}
		})
	}
}
