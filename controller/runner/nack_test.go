package runner

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/sluice-dev/sluice/controller/alert"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/controller/store"
	"github.com/sluice-dev/sluice/gateway"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// TestNackDetailReachesStatusCapped NACKs a step's routes through the real
// gateway with a detail of almost 4 MiB (the most gRPC accepts): the
// rollout holds on the NACK, and its status and the xds-nack alert carry
// the detail cut to 1 KiB.
func TestNackDetailReachesStatusCapped(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	gw, err := gateway.New(gateway.Options{})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { defer close(served); _ = gw.Serve(ctx, lis) }()

	hook := newWebhook(t)
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sink, err := alert.NewSink(alert.SinkOptions{Kind: alert.KindWebhook, URL: hook.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	disp, err := alert.New(alert.Options{Outbox: st, Sinks: []alert.Sink{sink}, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	dispDone := make(chan struct{})
	go func() { defer close(dispDone); _ = disp.Run(ctx) }()
	r, err := New(Options{Store: st, Traffic: gw, Alerter: disp, AckTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = r.Close()
		cancel()
		<-served
		<-dispDone
		_ = st.Close()
	})
	if _, err := r.Do(ctx, checkout, rollout.Change{Commit: "1111111", Rollout: spec(checkout, "v1", setWeight(20), pause(0))}); err != nil {
		t.Fatal(err)
	}

	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	ads, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"checkout.internal"}
	if err := ads.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.RouteType, ResourceNames: names, Node: &corev3.Node{Id: "nacker"}}); err != nil {
		t.Fatal(err)
	}
	first, err := ads.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if err := ads.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.RouteType, ResourceNames: names, VersionInfo: first.GetVersionInfo(), ResponseNonce: first.GetNonce()}); err != nil {
		t.Fatal(err)
	}

	if _, err := r.Do(ctx, checkout, rollout.Change{Commit: "2222222", Rollout: spec(checkout, "v2", setWeight(20), pause(0))}); err != nil {
		t.Fatal(err)
	}
	step, err := ads.Recv() // the routes of setWeight 20
	if err != nil {
		t.Fatal(err)
	}
	huge := strings.Repeat("é", (4<<20-4096)/2)
	if err := ads.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.RouteType, ResourceNames: names, VersionInfo: first.GetVersionInfo(),
		ResponseNonce: step.GetNonce(), ErrorDetail: &statuspb.Status{Code: 3, Message: huge}}); err != nil {
		t.Fatal(err)
	}

	var s rollout.State
	eventually(t, "the hold on the NACK", func() bool {
		var ok bool
		s, ok = r.State(checkout)
		return ok && s.Hold != nil && s.Hold.Kind == rollout.HoldNack
	})
	capped := func(what, text string) {
		t.Helper()
		if len(text) > 1024+256 || !strings.Contains(text, "…(truncated)") || !utf8.ValidString(text) {
			t.Errorf("%s is %d bytes (valid UTF-8 %v), want the client's detail cut to 1 KiB", what, len(text), utf8.ValidString(text))
		}
	}
	capped("the hold reason", s.Hold.Reason)
	var nack alert.Alert
	eventually(t, "the xds-nack alert", func() bool {
		hook.mu.Lock()
		defer hook.mu.Unlock()
		for _, a := range hook.alerts {
			if a.Event == alert.EventXDSNack {
				nack = a
				return true
			}
		}
		return false
	})
	capped("the alert reason", nack.Reason)
}
