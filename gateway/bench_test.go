package gateway

import (
	"bytes"
	"fmt"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/sluice-dev/sluice/api"
	"google.golang.org/protobuf/proto"
)

// BenchmarkSetTraffic publishes one weight change while the server holds
// 1,000 rollouts: translation, validation, and the new generation
// (including the shared sluice-http route configuration). No client is
// connected, so no response is built or sent; fan-out to streams is what
// gateway/bench measures.
func BenchmarkSetTraffic(b *testing.B) {
	s, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	mk := func(i int, canary int32) api.Traffic {
		return api.Traffic{
			Rollout: api.Key{Namespace: "bench", Name: fmt.Sprintf("svc-%d", i)}, Host: fmt.Sprintf("svc-%d.internal", i),
			StableEndpoints: []string{"10.0.0.1:80", "10.0.0.2:80"}, CanaryEndpoints: []string{"10.0.1.1:80"},
			Weights:      api.CanaryWeights(canary),
			HeaderRoutes: []api.HeaderRoute{{Name: "testers", Match: []api.HeaderMatch{{HeaderName: "x-canary", HeaderValue: api.StringMatch{Exact: "always"}}}}},
		}
	}
	for i := range 1000 {
		if _, err := s.SetTraffic(mk(i, 10)); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := range b.N {
		if _, err := s.SetTraffic(mk(i%1000, int32(11+i%80))); err != nil {
			b.Fatal(err)
		}
	}
}

// TestEnvoyRouteBytes checks that the combined route assembled from encoded
// virtual hosts is byte for byte what a deterministic Marshal produces.
func TestEnvoyRouteBytes(t *testing.T) {
	var vhosts []*routev3.VirtualHost
	var encoded [][]byte
	for _, c := range []int32{0, 10, 100} {
		res, err := Translate(traffic(func(tr *api.Traffic) {
			tr.Rollout.Name = fmt.Sprintf("r%d", c)
			tr.Host = fmt.Sprintf("r%d.internal", c)
			tr.Weights = api.CanaryWeights(c)
			tr.SessionAffinity = &api.SessionAffinity{CookieName: "s", MaxAge: 60}
		}))
		if err != nil {
			t.Fatal(err)
		}
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(res.VirtualHost)
		if err != nil {
			t.Fatal(err)
		}
		vhosts, encoded = append(vhosts, res.VirtualHost), append(encoded, b)
	}
	for _, n := range []int{0, 1, 3} {
		_, rc := EnvoyResources(10000, vhosts[:n])
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(rc)
		if err != nil {
			t.Fatal(err)
		}
		if got := envoyRouteBytes(encoded[:n]); !bytes.Equal(got, want) {
			t.Errorf("%d virtual hosts: assembled bytes differ from Marshal", n)
		}
	}
}
