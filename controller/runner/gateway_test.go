package runner

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/controller/store"
	"github.com/sluice-dev/sluice/gateway"
	"github.com/sluice-dev/sluice/gateway/probe"
)

// TestRealGateway runs a canary through the real xDS gateway to real
// proxyless gRPC xDS clients calling two real backends: v1 takes all
// traffic, v2 gets about 20 % once its step is ACKed by the clients (not
// by the ACK timeout), and an abort sends everything back to v1.
func TestRealGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("starts gRPC xDS clients")
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	listen := func() net.Listener {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return lis
	}
	endpoints := map[string][]string{}
	for _, v := range []string{"v1", "v2"} {
		b, err := probe.NewBackend(probe.BackendOptions{Version: v})
		if err != nil {
			t.Fatal(err)
		}
		grpcLis, httpLis := listen(), listen()
		endpoints[v] = []string{grpcLis.Addr().String()}
		go func() { _ = b.Serve(ctx, grpcLis, httpLis) }()
	}
	gw, err := gateway.New(gateway.Options{})
	if err != nil {
		t.Fatal(err)
	}
	xdsLis := listen()
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = gw.Serve(ctx, xdsLis)
	}()

	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(Options{Store: st, Traffic: gw, AckTimeout: 20 * time.Second})
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
		_ = st.Close()
	})
	mk := func(v string) *api.Rollout {
		ro := spec(checkout, v, setWeight(20), pause(0))
		ro.XDS.Endpoints = endpoints
		return ro
	}
	if _, err := r.Do(ctx, checkout, rollout.Change{Commit: "1111111", Rollout: mk("v1")}); err != nil {
		t.Fatal(err)
	}

	load, err := probe.NewLoadGen(probe.LoadOptions{XDSServer: xdsLis.Addr().String(), Host: "checkout.internal", Clients: 2, Rate: 200, Window: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = load.Run(ctx) }()
	share := func(v string) (float64, int) {
		split := load.Observe().Class[probe.DefaultClass]
		return split.Share(v), split.Answered()
	}
	eventually30s(t, "v1 answering", func() bool { s, n := share("v1"); return n > 50 && s == 1 })

	if _, err := r.Do(ctx, checkout, rollout.Change{Commit: "2222222", Rollout: mk("v2")}); err != nil {
		t.Fatal(err)
	}
	var s rollout.State
	eventually30s(t, "the pause after setWeight 20", func() bool {
		var ok bool
		s, ok = r.State(checkout)
		return ok && s.StepIndex == 1
	})
	if s.AckTimedOut {
		t.Fatal("the step went on by ACK timeout, not by the clients' ACK")
	}
	load.ResetWindow()
	eventually30s(t, "about 20% on v2", func() bool {
		s, n := share("v2")
		return n > 150 && s > 0.1 && s < 0.3
	})

	if _, err := r.Command(ctx, checkout, rollout.CmdAbort); err != nil {
		t.Fatal(err)
	}
	load.ResetWindow()
	eventually30s(t, "all traffic back on v1", func() bool { s, n := share("v1"); return n > 100 && s == 1 })
}

// eventually30s is eventually with room for gRPC xDS clients on a loaded
// machine.
func eventually30s(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
