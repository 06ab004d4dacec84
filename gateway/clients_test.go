package gateway

import (
	"context"
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/sluice-dev/sluice/api"
)

// clientsByNode is ClientsOf(host) by node id.
func clientsByNode(s *Server, host string) map[string]ClientAck {
	list, _ := s.ClientsOf(host, 0)
	out := map[string]ClientAck{}
	for _, c := range list {
		out[c.Node] = c
	}
	return out
}

// TestClientsOf connects a real gRPC xDS client, a raw state-of-the-world
// client of the host's routes, a raw delta one and an Envoy-shaped one
// (route scopes by wildcard), and checks what ClientsOf says of each as
// the routes change: the ACKed version, current while the ACK is held
// (false) and after it (true), a NACK with its message, and a client that
// disconnects going away.
func TestClientsOf(t *testing.T) {
	v1, v2 := startBackend(t, "v1"), startBackend(t, "v2")
	srv := startServer(t, "127.0.0.1:0", nil)
	tr := func(canary int32) api.Traffic {
		return api.Traffic{Rollout: checkout, Host: host, StableVersion: "v1", CanaryVersion: "v2",
			StableEndpoints: []string{v1}, CanaryEndpoints: []string{v2}, Weights: api.CanaryWeights(canary)}
	}
	ver, err := srv.SetTraffic(tr(0))
	if err != nil {
		t.Fatal(err)
	}
	other := api.Traffic{Rollout: api.Key{Namespace: "default", Name: "other"}, Host: "other.internal",
		StableEndpoints: []string{v1}, CanaryEndpoints: []string{v2}, Weights: api.CanaryWeights(0)}
	if _, err := srv.SetTraffic(other); err != nil {
		t.Fatal(err)
	}
	if list, total := srv.ClientsOf(host, 0); len(list) != 0 || total != 0 {
		t.Fatalf("ClientsOf with no client = %v, %d", list, total)
	}

	// A real gRPC client, its node with a locality (bootstrap).
	cc := dialXDS(t, bootstrap(srv.addr, "grpc-a", `{"type":"insecure"}`), host)
	if got := count(t, cc, 5); got["v1"] != 5 {
		t.Fatalf("gRPC client before the canary: %v", got)
	}
	// A raw state-of-the-world client of the host's routes (node "raw"),
	// on a stream this test can end.
	ctx, hangUp := context.WithCancel(context.Background())
	defer hangUp()
	stream, err := adsClient(t, srv.addr).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	raw := &sotwClient{t: t, s: stream, nm: map[string][]string{}}
	raw.subscribe(typeURLs[rds], host)
	// A raw delta client of the host's routes.
	dc := newDeltaClient(t, srv.addr)
	dc.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURLs[rds], ResourceNamesSubscribe: []string{host}, Node: nodeProto("delta-1")})
	dc.ack(dc.recv())
	// An Envoy-shaped client: every route scope, then the host's routes.
	envoy := newSotwClient(t, srv.addr)
	envoy.nm[typeURLs[srds]] = nil
	envoy.send(&discoveryv3.DiscoveryRequest{TypeUrl: typeURLs[srds], Node: nodeProto("envoy-1")})
	envoy.ack(envoy.recv())
	eventually(t, 10*time.Second, "envoy-1 listed, not current before it has the host's routes", func() bool {
		c, ok := clientsByNode(srv.Server, host)["envoy-1"]
		return ok && !c.Current && c.Version == ""
	})
	envoy.subscribe(typeURLs[rds], host)
	waitAck(t, srv.Server, host, ver)

	gen := func(v string) string { return strings.SplitN(v, "-", 2)[0] }
	got := clientsByNode(srv.Server, host)
	if len(got) != 4 {
		t.Fatalf("ClientsOf(%s) = %+v, want grpc-a, raw, delta-1 and envoy-1", host, got)
	}
	for node, c := range got {
		if !c.Current || c.Version != gen(ver) || c.Nonce == "" || c.Nack != "" {
			t.Errorf("%s after everyone ACKed %s: %+v, want current at version %s with a nonce", node, ver, c, gen(ver))
		}
	}
	if c := got["grpc-a"]; c.Locality != "/test/" || c.Delta {
		t.Errorf("grpc-a: locality %q delta %v, want /test/ and state of the world (its bootstrap)", c.Locality, c.Delta)
	}
	if c := got["delta-1"]; !c.Delta || c.Transport() != "delta" {
		t.Errorf("delta-1: %+v, want a delta stream", c)
	}
	if list, total := srv.ClientsOf("other.internal", 0); total != 1 || list[0].Node != "envoy-1" {
		t.Errorf("ClientsOf(other.internal) = %+v (%d), want only envoy-1, which holds every host's scope", list, total)
	}

	// New weights: the raw client holds its ACK.
	ver2, err := srv.SetTraffic(tr(30))
	if err != nil {
		t.Fatal(err)
	}
	held := raw.recv()
	envoy.ack(envoy.recv())
	dc.ack(dc.recv())
	eventually(t, 10*time.Second, "everyone but raw current at "+ver2, func() bool {
		got := clientsByNode(srv.Server, host)
		return got["grpc-a"].Current && got["delta-1"].Current && got["envoy-1"].Current && got["envoy-1"].Version == gen(ver2)
	})
	if c := clientsByNode(srv.Server, host)["raw"]; c.Current || c.Version != gen(ver) {
		t.Errorf("raw holding its ACK: %+v, want not current, still at version %s", c, gen(ver))
	}
	list, total := srv.ClientsOf(host, 1)
	if total != 4 || len(list) != 1 || list[0].Node != "raw" {
		t.Errorf("ClientsOf(host, 1) = %+v, %d; want raw (not current comes first) of 4", list, total)
	}

	// The raw client NACKs: the message shows, it stays not current.
	raw.nack(held, held.GetVersionInfo())
	eventually(t, 10*time.Second, "raw's NACK listed", func() bool {
		c := clientsByNode(srv.Server, host)["raw"]
		return c.Nack == "raw client says no" && !c.Current
	})

	// The next weights, ACKed: current again and the NACK is gone.
	ver3, err := srv.SetTraffic(tr(60))
	if err != nil {
		t.Fatal(err)
	}
	raw.ack(raw.recv())
	envoy.ack(envoy.recv())
	dc.ack(dc.recv())
	eventually(t, 10*time.Second, "raw current at "+ver3, func() bool {
		c := clientsByNode(srv.Server, host)["raw"]
		return c.Current && c.Nack == "" && c.Version == gen(ver3)
	})

	// A client that goes away is no longer listed.
	hangUp()
	eventually(t, 10*time.Second, "raw gone", func() bool {
		_, ok := clientsByNode(srv.Server, host)["raw"]
		return !ok
	})
	if _, total := srv.ClientsOf(host, 0); total != 3 {
		t.Errorf("%d clients after raw left, want 3", total)
	}
	if _, ok := srv.Host(checkout); !ok {
		t.Error("Host(checkout) not found")
	}
	if list, total := srv.ClientsOf("nobody.internal", 10); list != nil || total != 0 {
		t.Errorf("ClientsOf an unserved host = %v, %d", list, total)
	}
}
