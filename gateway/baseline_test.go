package gateway

import (
	"math"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api"
)

// TestGRPCClientsBaseline drives a real gRPC xDS client against a rollout
// with a baseline: three backends (stable, canary, baseline), three
// clusters that every client keeps subscribed whatever the weights, and
// RPCs split three ways in the published proportions (within splitSigmas).
func TestGRPCClientsBaseline(t *testing.T) {
	stable, canary, baseline := startBackend(t, "stable"), startBackend(t, "canary"), startBackend(t, "baseline")
	srv := startServer(t, "127.0.0.1:0", nil)
	traffic := func(w api.Weights) api.Traffic {
		return api.Traffic{
			Rollout: checkout, Host: host, StableVersion: "v1", CanaryVersion: "v2", BaselineVersion: "v1",
			StableEndpoints: []string{stable}, CanaryEndpoints: []string{canary}, BaselineEndpoints: []string{baseline},
			StableWorkload: "h1", CanaryWorkload: "h2", BaselineWorkload: "b1", Weights: w,
		}
	}
	publish := func(t *testing.T, tr api.Traffic) {
		t.Helper()
		ver, err := srv.SetTraffic(tr)
		if err != nil {
			t.Fatalf("SetTraffic: %v", err)
		}
		waitAck(t, srv.Server, host, ver)
	}
	publish(t, traffic(api.CanaryWeights(0).WithBaseline()))
	cc := dialXDS(t, bootstrap(srv.addr, "client-a", `{"type":"insecure"}`), host)

	steps := []struct {
		name    string
		weights api.Weights
		n       int
	}{
		{"stable only", api.CanaryWeights(0).WithBaseline(), 100},
		{"50/25/25", api.CanaryWeights(25).WithBaseline(), 2000},
		{"0/60/40", api.CanaryWeights(60).WithBaseline(), 2000},
		{"promoted", api.Weights{Stable: 100}, 100},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			publish(t, traffic(st.weights))
			want := map[string]float64{"stable": float64(st.weights.Stable) / 100, "canary": float64(st.weights.Canary) / 100, "baseline": float64(st.weights.Baseline) / 100}
			// An ACK means the client accepted the routes; its channel
			// switches to them a moment later: wait until a side without
			// weight gets no more RPCs.
			eventually(t, 10*time.Second, "RPCs on the new weights", func() bool {
				got := count(t, cc, 50)
				for side, p := range want {
					if p == 0 && got[side] > 0 {
						return false
					}
				}
				return true
			})
			got := count(t, cc, st.n)
			for side, p := range want {
				mean := float64(st.n) * p
				sigma := math.Sqrt(float64(st.n) * p * (1 - p))
				if d := math.Abs(float64(got[side]) - mean); d > splitSigmas*sigma+0.5 {
					t.Errorf("%s got %d of %d, want %.0f ± %.1f (%dσ); all: %v", side, got[side], st.n, mean, splitSigmas*sigma, splitSigmas, got)
				}
			}
			eventually(t, 10*time.Second, "all three clusters subscribed", func() bool {
				return srv.subscribers(cds, ClusterName(checkout, Stable)) == 1 && srv.subscribers(cds, ClusterName(checkout, Canary)) == 1 &&
					srv.subscribers(cds, ClusterName(checkout, Baseline)) == 1
			})
		})
	}
	t.Run("no baseline any more", func(t *testing.T) {
		// The judge left the strategy: the rollout goes back to two
		// clusters, and the client lets the third go.
		tr := traffic(api.Weights{Stable: 100})
		tr.BaselineVersion, tr.BaselineWorkload, tr.BaselineEndpoints = "", "", nil
		publish(t, tr)
		if got := count(t, cc, 50); got["stable"] != 50 {
			t.Errorf("calls %v, want all on stable", got)
		}
		eventually(t, 10*time.Second, "the baseline cluster unsubscribed", func() bool {
			return srv.subscribers(cds, ClusterName(checkout, Baseline)) == 0 && srv.subscribers(cds, ClusterName(checkout, Canary)) == 1
		})
	})
}
