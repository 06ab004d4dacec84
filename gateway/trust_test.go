package gateway

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/sluice-dev/sluice/api"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
)

var cart = api.Key{Namespace: "shop", Name: "cart"}

// cartTraffic is a second rollout beside traffic(nil).
func cartTraffic() api.Traffic {
	return api.Traffic{Rollout: cart, Host: "cart.internal", StableEndpoints: []string{"127.0.0.1:9100"}, Weights: api.CanaryWeights(0)}
}

func waitErr(s *Server, host, version string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.WaitForAck(ctx, host, version)
}

// TestNackBlamesOnlyWhatWasNew checks that a state-of-the-world NACK is
// blamed only on resources this stream was sent and had not accepted
// before: a client that rejects the cluster list after another rollout was
// added does not stop the rollout whose clusters it had already ACKed.
func TestNackBlamesOnlyWhatWasNew(t *testing.T) {
	srv := startServer(t, "127.0.0.1:0", nil)
	vCheckout, err := srv.SetTraffic(traffic(nil))
	if err != nil {
		t.Fatal(err)
	}
	c := newSotwClient(t, srv.addr)
	c.subscribe(typeURLs[cds])
	c.subscribe(typeURLs[rds], host, "cart.internal")
	waitAck(t, srv.Server, host, vCheckout)

	vCart, err := srv.SetTraffic(cartTraffic())
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the cluster list (checkout + cart), then the routes
		r := c.recv()
		if r.GetTypeUrl() == typeURLs[cds] {
			c.nack(r, "1")
		} else {
			c.ack(r)
		}
	}
	if err := waitErr(srv.Server, "cart.internal", vCart); !errors.Is(err, ErrNack) {
		t.Fatalf("cart, whose clusters were new in the NACKed response: %v, want ErrNack", err)
	}
	if err := waitErr(srv.Server, host, vCheckout); err != nil {
		t.Fatalf("checkout, whose clusters the client had ACKed before: %v, want nil", err)
	}
	if got := metricValue(t, srv.reg, "sluice_xds_nacks_total"); got != 1 {
		t.Errorf("sluice_xds_nacks_total = %v, want 1", got)
	}
}

// TestNackNotSentIgnored checks NACKs naming a response the stream was
// never sent (state of the world and delta): they reach no rollout and are
// counted as ignored.
func TestNackNotSentIgnored(t *testing.T) {
	var reported []Nack
	var mu sync.Mutex
	srv := startServer(t, "127.0.0.1:0", func(o *Options) {
		o.OnNack = func(n Nack) { mu.Lock(); reported = append(reported, n); mu.Unlock() }
	})
	v, err := srv.SetTraffic(traffic(nil))
	if err != nil {
		t.Fatal(err)
	}
	// A real client has the routes; another subscribes to something else
	// and NACKs the real client's response, which it never got.
	real := newSotwClient(t, srv.addr)
	theirs := real.subscribe(typeURLs[rds], host)
	other := newSotwClient(t, srv.addr)
	other.subscribe(typeURLs[rds], host, "nothing.internal")
	other.nack(theirs, "")
	d := newDeltaClient(t, srv.addr)
	d.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURLs[rds], ResourceNamesSubscribe: []string{host}, Node: nodeProto("delta")})
	d.ack(d.recv())
	d.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURLs[rds], ResponseNonce: "never-sent", ErrorDetail: &statuspb.Status{Message: "no"}})

	ignored := srv.m.nacksIgnored.WithLabelValues(nackUnknownNonce)
	eventually(t, 10*time.Second, "two ignored NACKs", func() bool { return counterValue(t, ignored) == 2 })
	if err := waitErr(srv.Server, host, v); err != nil {
		t.Fatalf("WaitForAck = %v, want nil", err)
	}
	if got := metricValue(t, srv.reg, "sluice_xds_nacks_total"); got != 0 {
		t.Errorf("sluice_xds_nacks_total = %v, want 0", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reported) != 0 {
		t.Errorf("OnNack got %+v, want nothing", reported)
	}
}

// TestNackDetailCapped checks that a NACK detail of almost 4 MiB (the
// largest request gRPC accepts) leaves the gateway as at most 1 KiB, cut on
// a UTF-8 boundary and marked, in both OnNack and WaitForAck's error (which
// the runner stores in the rollout's state and alerts).
func TestNackDetailCapped(t *testing.T) {
	// OnNack runs on the stream's goroutine after WaitForAck's waiters are
	// woken, so the test waits for it rather than reading it at once.
	reported := make(chan Nack, 4)
	srv := startServer(t, "127.0.0.1:0", func(o *Options) {
		o.OnNack = func(n Nack) { reported <- n }
	})
	if _, err := srv.SetTraffic(traffic(nil)); err != nil {
		t.Fatal(err)
	}
	c := newSotwClient(t, srv.addr)
	c.subscribe(typeURLs[rds], host)
	v, err := srv.SetTraffic(traffic(func(tr *api.Traffic) { tr.Weights = api.CanaryWeights(40) }))
	if err != nil {
		t.Fatal(err)
	}
	r := c.recv()
	huge := strings.Repeat("é", (4<<20-4096)/2) // two bytes each
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResourceNames: []string{host}, VersionInfo: "1", ResponseNonce: r.GetNonce(),
		ErrorDetail: &statuspb.Status{Code: 3, Message: huge}})
	err = waitErr(srv.Server, host, v)
	if !errors.Is(err, ErrNack) {
		t.Fatalf("WaitForAck = %v, want ErrNack", err)
	}
	msg := err.Error()
	if len(msg) > 1024+200 || !strings.Contains(msg, truncatedMarker) || !utf8.ValidString(msg) {
		t.Errorf("WaitForAck error is %d bytes (valid UTF-8: %v, marked: %v), want the detail capped at 1 KiB",
			len(msg), utf8.ValidString(msg), strings.Contains(msg, truncatedMarker))
	}
	select {
	case n := <-reported:
		if len(n.Detail) > maxDetail || !strings.HasSuffix(n.Detail, truncatedMarker) {
			t.Fatalf("OnNack got a detail of %d bytes, want at most %d ending in the marker", len(n.Detail), maxDetail)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("OnNack was not called")
	}
	select {
	case n := <-reported:
		t.Fatalf("OnNack called twice: %+v", n.Resources)
	default:
	}
}

// TestCapDetail checks the cut: untouched up to 1 KiB, else at most 1 KiB
// with the marker, never inside a UTF-8 sequence.
func TestCapDetail(t *testing.T) {
	cases := []struct {
		name, in string
		cut      bool
	}{
		{"short", "cluster x: bad weight", false},
		{"exactly 1 KiB", strings.Repeat("a", 1024), false},
		{"one byte over", strings.Repeat("a", 1025), true},
		{"two-byte runes", strings.Repeat("é", 600), true},
		{"three-byte runes", strings.Repeat("€", 400), true},
		{"four-byte runes", strings.Repeat("𝄞", 300), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := capDetail(tc.in)
			if !tc.cut {
				if got != tc.in {
					t.Fatalf("changed a detail within the cap")
				}
				return
			}
			if len(got) > maxDetail || !strings.HasSuffix(got, truncatedMarker) || !utf8.ValidString(got) ||
				!strings.HasPrefix(tc.in, strings.TrimSuffix(got, truncatedMarker)) || len(got) < maxDetail-3 {
				t.Fatalf("capDetail = %d bytes %q…", len(got), got[:min(len(got), 40)])
			}
		})
	}
}
