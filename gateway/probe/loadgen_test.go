package probe

import (
	"context"
	"math"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/gateway"
)

const testHost = "demo.local"

// startGateway serves sluice's real xDS server on a loopback port.
func startGateway(t *testing.T) (*gateway.Server, string) {
	t.Helper()
	srv, err := gateway.New(gateway.Options{})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("gateway Serve: %v", err)
		}
	})
	return srv, lis.Addr().String()
}

func startLoad(t *testing.T, opts LoadOptions) *LoadGen {
	t.Helper()
	lg, err := NewLoadGen(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- lg.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return lg
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLoadGenThroughGateway runs the load generator's real gRPC xDS
// clients against sluice's xDS server and two real backends, and checks
// that what the clients observe is what was declared: the weighted split
// within statistical tolerance, the header share entirely on the canary,
// and the moment the canary first answered.
func TestLoadGenThroughGateway(t *testing.T) {
	v1 := startBackend(t, BackendOptions{Version: "demo/app:v1"})
	v2 := startBackend(t, BackendOptions{Version: "demo/app:v2"})
	srv, xdsAddr := startGateway(t)
	key := api.Key{Namespace: "default", Name: "demo"}
	testers := api.HeaderRoute{Name: "testers", Match: []api.HeaderMatch{{HeaderName: "x-canary", HeaderValue: api.StringMatch{Exact: "always"}}}}
	publish := func(t *testing.T, canary string, eps []string, w int32, routes ...api.HeaderRoute) time.Time {
		t.Helper()
		ver, err := srv.SetTraffic(api.Traffic{
			Rollout: key, Host: testHost,
			StableVersion: "demo/app:v1", CanaryVersion: canary,
			StableEndpoints: []string{v1.grpcAddr}, CanaryEndpoints: eps,
			Weights: api.CanaryWeights(w), HeaderRoutes: routes,
		})
		if err != nil {
			t.Fatalf("SetTraffic: %v", err)
		}
		pushed := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.WaitForAck(ctx, testHost, ver); err != nil {
			t.Fatalf("WaitForAck: %v", err)
		}
		return pushed
	}
	publish(t, "demo/app:v1", []string{v1.grpcAddr}, 0)
	lg := startLoad(t, LoadOptions{
		XDSServer: xdsAddr, Host: testHost, Clients: 3, Rate: 300, Window: time.Minute,
		Classes: []Class{{Name: "testers", Share: 0.1, Metadata: []string{"x-canary", "always"}}},
	})
	waitFor(t, 30*time.Second, "three xds clients", func() bool { return srv.Clients() == 3 })
	if _, err := lg.WaitFirst(ctxT(t, 30*time.Second), "demo/app:v1"); err != nil {
		t.Fatal(err)
	}

	var pushed time.Time
	tests := []struct {
		name         string
		canaryWeight int32
		routes       []api.HeaderRoute
		n            int     // default-class answers to collect
		tol          float64 // allowed |observed - declared| share
		testersOn    string  // where every testers request must land
	}{
		{"stable only", 0, nil, 300, 0, "demo/app:v1"},
		{"90/10 with header route", 10, []api.HeaderRoute{testers}, 1500, 0.04, "demo/app:v2"},
		{"50/50", 50, []api.HeaderRoute{testers}, 1000, 0.06, "demo/app:v2"},
		{"promoted", 100, nil, 300, 0, "demo/app:v2"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at := publish(t, "demo/app:v2", []string{v2.grpcAddr}, tt.canaryWeight, tt.routes...)
			if i == 1 {
				pushed = at
			}
			// Calls already in flight were routed by the previous config.
			time.Sleep(50 * time.Millisecond)
			lg.ResetWindow()
			waitFor(t, 60*time.Second, "enough answers", func() bool {
				o := lg.Observe()
				return o.Class[DefaultClass].Answered() >= tt.n && o.Class["testers"].Answered() >= tt.n/10
			})
			o := lg.Observe()
			def, tst := o.Class[DefaultClass], o.Class["testers"]
			if f := def[""].Failed + def["demo/app:v1"].Failed + def["demo/app:v2"].Failed; f > 0 {
				t.Fatalf("%d failed calls: %+v", f, def)
			}
			want := float64(tt.canaryWeight) / 100
			if got := def.Share("demo/app:v2"); math.Abs(got-want) > tt.tol {
				t.Fatalf("observed canary share %.3f of %d, declared %.2f (tolerance %.2f)", got, def.Answered(), want, tt.tol)
			}
			if got := tst.Share(tt.testersOn); got != 1 {
				t.Fatalf("testers on %s: share %.3f (%+v)", tt.testersOn, got, tst)
			}
		})
	}

	first, ok := lg.FirstSeen("demo/app:v2")
	if !ok {
		t.Fatal("canary never seen")
	}
	if d := first.Sub(pushed); d < 0 || d > 5*time.Second {
		t.Fatalf("push to first canary answer = %v", d)
	}
	t.Logf("push to first canary answer: %v", first.Sub(pushed))
	if o := lg.Observe(); o.Missed > 0 {
		t.Errorf("%d calls missed (too many in flight)", o.Missed)
	}
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestLoadOptions(t *testing.T) {
	tests := []struct {
		name string
		opts LoadOptions
	}{
		{"no server", LoadOptions{Host: "h"}},
		{"no host", LoadOptions{XDSServer: "127.0.0.1:1"}},
		{"shares above one", LoadOptions{XDSServer: "a:1", Host: "h", Classes: []Class{{Name: "a", Share: 0.7}, {Name: "b", Share: 0.4}}}},
		{"reserved name", LoadOptions{XDSServer: "a:1", Host: "h", Classes: []Class{{Name: DefaultClass, Share: 0.1}}}},
		{"odd metadata", LoadOptions{XDSServer: "a:1", Host: "h", Classes: []Class{{Name: "a", Share: 0.1, Metadata: []string{"x"}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewLoadGen(tt.opts); err == nil {
				t.Fatal("NewLoadGen accepted invalid options")
			}
		})
	}
}

func TestPickSpreadsClasses(t *testing.T) {
	lg, err := NewLoadGen(LoadOptions{XDSServer: "a:1", Host: "h", Classes: []Class{{Name: "a", Share: 0.1}, {Name: "b", Share: 0.25}}})
	if err != nil {
		t.Fatal(err)
	}
	acc := make([]float64, 2)
	got := map[string]int{}
	for range 1000 {
		name := DefaultClass
		if c := lg.pick(acc); c != nil {
			name = c.Name
		}
		got[name]++
	}
	// A class that crosses on the same request as another waits one turn,
	// so each count may lag by one.
	near := func(n, want int) bool { return n >= want-1 && n <= want+1 }
	if !near(got["a"], 100) || !near(got["b"], 250) || !near(got[DefaultClass], 650) {
		t.Fatalf("classes over 1000 picks: %v", got)
	}
}

// TestLoadGenOnCall: OnCall sees every finished call, each with the
// version that answered and its error, and as many as the window counts.
func TestLoadGenOnCall(t *testing.T) {
	good := startBackend(t, BackendOptions{Version: "demo/app:v1"})
	bad := startBackend(t, BackendOptions{Version: "demo/app:v2", FailureRate: 1})
	srv, xdsAddr := startGateway(t)
	ver, err := srv.SetTraffic(api.Traffic{
		Rollout: api.Key{Namespace: "default", Name: "demo"}, Host: testHost,
		StableVersion: "demo/app:v1", CanaryVersion: "demo/app:v2",
		StableEndpoints: []string{good.grpcAddr}, CanaryEndpoints: []string{bad.grpcAddr},
		Weights: api.CanaryWeights(50),
	})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var calls []Answer
	lg, err := NewLoadGen(LoadOptions{XDSServer: xdsAddr, Host: testHost, Clients: 2, Rate: 200, Window: time.Minute,
		OnCall: func(a Answer) { mu.Lock(); calls = append(calls, a); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- lg.Run(ctx) }()
	if err := srv.WaitForAck(ctxT(t, 30*time.Second), testHost, ver); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "200 calls", func() bool { mu.Lock(); defer mu.Unlock(); return len(calls) >= 200 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	byVersion := map[string]int{}
	for _, a := range calls {
		byVersion[a.Version]++
		switch {
		case a.Class != DefaultClass || a.Ended.Before(a.Started):
			t.Fatalf("call %+v: want the default class and Ended after Started", a)
		case a.Version == "demo/app:v1" && a.Err != nil, a.Version == "demo/app:v2" && a.Err == nil:
			t.Fatalf("call answered by %s with error %v; v1 never fails, v2 always does", a.Version, a.Err)
		case a.Version != "demo/app:v1" && a.Version != "demo/app:v2":
			t.Fatalf("call answered by %q (%v)", a.Version, a.Err)
		}
	}
	if byVersion["demo/app:v1"] == 0 || byVersion["demo/app:v2"] == 0 {
		t.Errorf("versions %v: want both sides of the 50/50 split", byVersion)
	}
	if total := lg.Observe().Class[DefaultClass].Total(); total != len(calls) {
		t.Errorf("OnCall saw %d calls, the window counted %d", len(calls), total)
	}
}
