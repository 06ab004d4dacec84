package gateway

import (
	"slices"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
)

// TestSotwRoutesCarryOnlyWhatChanged: a state-of-the-world client
// subscribed to many RouteConfigurations by name (Envoy, one per route
// scope) is sent only the routes whose content it does not hold, and every
// route it may lack: one that changed back before it ACKed, and one it
// dropped from its subscription and asked for again.
func TestSotwRoutesCarryOnlyWhatChanged(t *testing.T) {
	srv := startServer(t, "127.0.0.1:0", nil)
	loadRollouts(t, srv.Server, 3)
	hosts := []string{scaleTraffic(0, 0).Host, scaleTraffic(1, 0).Host, scaleTraffic(2, 0).Host}
	c := newSotwClient(t, srv.addr)
	if got := resourceNames(c.subscribe(resourcev3.RouteType, hosts...)); !slices.Equal(got, hosts) {
		t.Fatalf("first response: routes %v, want %v", got, hosts)
	}
	waitAcked(t, srv.Server, resourcev3.RouteType)
	set := func(canary int32) {
		t.Helper()
		if _, err := srv.SetTraffic(scaleTraffic(0, canary)); err != nil {
			t.Fatal(err)
		}
	}
	var last *discoveryv3.DiscoveryResponse
	expect := func(what string, want ...string) {
		t.Helper()
		r := c.recv()
		last = r
		if got := resourceNames(r); r.GetTypeUrl() != resourcev3.RouteType || !slices.Equal(got, want) {
			t.Fatalf("%s: %s with routes %v, want routes %v", what, r.GetTypeUrl(), got, want)
		}
		c.ack(r)
		waitAcked(t, srv.Server, resourcev3.RouteType)
	}

	set(20)
	r := c.recv()
	if got := resourceNames(r); !slices.Equal(got, hosts[:1]) {
		t.Fatalf("one rollout's weight changed: routes %v, want only %v", got, hosts[:1])
	}
	// Not ACKed yet, and changed back to what the client ACKed before:
	// the client may hold the unACKed one, so it gets the route again.
	set(10)
	expect("weight changed back before the ACK", hosts[0])

	// Dropped, and asked for again in the NACK of the response to the
	// drop: the route is sent again although the client once ACKed this
	// very content.
	c.nm[resourcev3.RouteType] = hosts[1:]
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.RouteType, ResourceNames: hosts[1:], VersionInfo: last.GetVersionInfo(), ResponseNonce: last.GetNonce()})
	cut := c.recv()
	if got := resourceNames(cut); !slices.Equal(got, hosts[1:]) {
		t.Fatalf("subscription cut to two routes: routes %v, want %v", got, hosts[1:])
	}
	c.nm[resourcev3.RouteType] = hosts
	c.nack(cut, last.GetVersionInfo())
	expect("the dropped route asked for again", hosts[0])
}

// waitAcked waits until the server recorded the ACK of the last response of
// type typ on every state-of-the-world stream: a change published before
// that is sent whole, which is right but not what these tests look at.
func waitAcked(t *testing.T, s *Server, typ string) {
	t.Helper()
	ti, _ := typeOf(typ)
	deadline := time.Now().Add(10 * time.Second)
	for {
		acked := true
		s.mu.RLock()
		for st := range s.streams {
			st.mu.Lock()
			if w := &st.sotw[ti]; w.lastSent != nil && w.acked != w.lastSent {
				acked = false
			}
			st.mu.Unlock()
		}
		s.mu.RUnlock()
		if acked {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the last response was not ACKed within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}
