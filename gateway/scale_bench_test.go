package gateway

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api"
	"google.golang.org/protobuf/proto"
)

// scaleTraffic is rollout i of a large fleet: one header route, two
// stable endpoints and one canary endpoint, as in BenchmarkSetTraffic.
func scaleTraffic(i int, canary int32) api.Traffic {
	return api.Traffic{
		Rollout: api.Key{Namespace: fmt.Sprintf("ns-%d", i%100), Name: fmt.Sprintf("svc-%d", i)}, Host: fmt.Sprintf("svc-%d.internal", i),
		StableEndpoints: []string{"10.0.0.1:80", "10.0.0.2:80"}, CanaryEndpoints: []string{"10.0.1.1:80"},
		Weights:      api.CanaryWeights(canary),
		HeaderRoutes: []api.HeaderRoute{{Name: "testers", Match: []api.HeaderMatch{{HeaderName: "x-canary", HeaderValue: api.StringMatch{Exact: "always"}}}}},
	}
}

// loadRollouts publishes n rollouts in one generation: publishing them one
// by one costs O(n²) with the combined sluice-http route, minutes at
// 10,000, and the benchmarks measure a change, not the load.
func loadRollouts(tb testing.TB, s *Server, n int) {
	tb.Helper()
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	cur := s.snap.Load()
	changes := make([]rolloutChange, 0, n)
	for i := range n {
		t := scaleTraffic(i, 10)
		res, err := Translate(t)
		if err != nil {
			tb.Fatal(err)
		}
		var vhost []byte
		if s.env.layout == EnvoyRoutesCombined {
			if vhost, err = (proto.MarshalOptions{Deterministic: true}).Marshal(res.VirtualHost); err != nil {
				tb.Fatal(err)
			}
		}
		h := trafficHash(t)
		ro := &rolloutState{traffic: t, hash: h, stamp: &stamp{gen: cur.gen + 1, version: fmt.Sprintf("%d-%s", cur.gen+1, h)}, vhost: vhost}
		changes = append(changes, rolloutChange{key: t.Rollout, ro: ro, res: res})
	}
	next, _, err := cur.next(changes, s.env)
	if err != nil {
		tb.Fatal(err)
	}
	s.snap.Store(next)
	s.notify()
}

// BenchmarkOneRolloutChangeBytes serves n rollouts to four subscribers — a
// gRPC-shaped one of one host (its Listener, RouteConfiguration, clusters
// and endpoints) and an Envoy-shaped one of the sluice-http listener (every
// listener and cluster by wildcard, and the routes the listener points
// at), each over delta and over state of the world — then changes one
// rollout's weight per iteration and waits until every subscriber ACKed
// it. It reports the bytes each subscriber received per change
// (proto.Size of the responses).
func BenchmarkOneRolloutChangeBytes(b *testing.B) {
	for _, layout := range []EnvoyRouteLayout{EnvoyRoutesCombined, EnvoyRoutesScoped} {
		for _, n := range []int{1000, 10000} {
			b.Run(fmt.Sprintf("layout=%s/rollouts=%d", layout, n), func(b *testing.B) {
				benchOneChange(b, layout, n)
			})
		}
	}
}

func benchOneChange(b *testing.B, layout EnvoyRouteLayout, n int) {
	srv := startServer(b, "127.0.0.1:0", func(o *Options) { o.EnvoyRoutes = layout })
	loadRollouts(b, srv.Server, n)
	changed := scaleTraffic(0, 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	subs := []*follower{
		startFollower(ctx, b, srv.addr, "grpc-delta", true, false, changed.Host),
		startFollower(ctx, b, srv.addr, "grpc-sotw", false, false, changed.Host),
		startFollower(ctx, b, srv.addr, "envoy-delta", true, true, ""),
		startFollower(ctx, b, srv.addr, "envoy-sotw", false, true, ""),
	}
	waitComplete(b, subs)
	before := make([]int64, len(subs))
	for i, f := range subs {
		before[i] = f.Received()
	}
	b.ResetTimer()
	for i := range b.N {
		v, err := srv.SetTraffic(scaleTraffic(0, int32(11+i%80)))
		if err != nil {
			b.Fatal(err)
		}
		wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
		err = srv.WaitForAck(wctx, changed.Host, v)
		wcancel()
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	for i, f := range subs {
		b.ReportMetric(float64(f.Received()-before[i])/float64(b.N), "B/change-"+f.name)
	}
}

// waitComplete waits until every follower holds everything it subscribed
// to.
func waitComplete(tb testing.TB, subs []*follower) {
	tb.Helper()
	deadline := time.Now().Add(120 * time.Second)
	for _, f := range subs {
		for {
			ok, err := f.Complete()
			if err != nil {
				tb.Fatalf("%s: %v", f.name, err)
			}
			if ok {
				break
			}
			if time.Now().After(deadline) {
				tb.Fatalf("%s did not receive everything it subscribed to within 120s", f.name)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
