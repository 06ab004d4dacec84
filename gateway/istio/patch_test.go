package istio

import (
	"testing"

	"github.com/sluice-dev/sluice/api"
)

func TestStateOf(t *testing.T) {
	key := api.Key{Namespace: "shop", Name: "checkout"}
	cases := []struct {
		name       string
		weights    api.Weights
		sticky     bool
		wantStable int32
		wantSticky bool
		wantErr    bool
	}{
		{"canary", api.CanaryWeights(10), false, 90, false, false},
		// The baseline's pods carry their own hash, which neither subset
		// selects: its share goes to stable.
		{"baseline folded into stable", api.CanaryWeights(10).WithBaseline(), false, 90, false, false},
		{"sticky while the canary has traffic", api.CanaryWeights(10), true, 90, true, false},
		{"not sticky at weight 0", api.CanaryWeights(0), true, 100, false, false},
		{"weights not 100", api.Weights{Stable: 10, Canary: 10}, false, 0, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := api.Traffic{Rollout: key, Weights: tc.weights}
			if tc.sticky {
				tr.SessionAffinity = stickyCanary
			}
			s, err := stateOf(tr)
			if (err != nil) != tc.wantErr {
				t.Fatalf("stateOf = %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if s.weights.Stable != tc.wantStable || s.weights.Stable+s.weights.Canary != 100 || (s.sticky != nil) != tc.wantSticky {
				t.Errorf("stateOf = weights %+v sticky %v; want stable %d sticky %v", s.weights, s.sticky != nil, tc.wantStable, tc.wantSticky)
			}
		})
	}
}

func TestSideOf(t *testing.T) {
	bySvc := backends{stableService: "checkout-stable", canaryService: "checkout-canary"}
	bySubset := backends{stableService: "checkout-stable", canaryService: "checkout-canary", stableSubset: "stable", canarySubset: "canary"}
	cases := []struct {
		name string
		b    backends
		dest map[string]any
		want side
	}{
		{"short name", bySvc, map[string]any{"host": "checkout-canary"}, sideCanary},
		{"full name", bySvc, map[string]any{"host": "checkout-stable.shop.svc.cluster.local"}, sideStable},
		{"a longer service name is another service", bySvc, map[string]any{"host": "checkout-stable2"}, sideOther},
		{"subset", bySubset, map[string]any{"host": "checkout", "subset": "canary"}, sideCanary},
		{"other subset", bySubset, map[string]any{"host": "checkout", "subset": "debug"}, sideOther},
		{"no subset falls back to the service", bySubset, map[string]any{"host": "checkout-stable"}, sideStable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.b.sideOf(tc.dest); got != tc.want {
				t.Errorf("sideOf(%v) = %v, want %v", tc.dest, got, tc.want)
			}
		})
	}
}

func TestGenerationOf(t *testing.T) {
	cases := []struct {
		in     any
		want   int64
		wantOK bool
	}{
		{int64(7), 7, true},
		{float64(7), 7, true},
		{"7", 7, true}, // istiod's protobuf JSON
		{"seven", 0, false},
		{nil, 0, false},
	}
	for _, tc := range cases {
		if got, ok := generationOf(tc.in); got != tc.want || ok != tc.wantOK {
			t.Errorf("generationOf(%#v) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.wantOK)
		}
	}
}
