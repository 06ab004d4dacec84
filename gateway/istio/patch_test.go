package istio

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

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

// TestIstioStatus: istiod's status read with Istio's own type, whose
// observedGeneration is a number or (istiod writes int64s the protobuf
// JSON way) a string; a status that is not istiod's is no status.
func TestIstioStatus(t *testing.T) {
	cases := []struct {
		name   string
		status any
		want   int64
		wantOK bool
	}{
		{"number", map[string]any{"observedGeneration": int64(7)}, 7, true},
		{"float", map[string]any{"observedGeneration": float64(7)}, 7, true},
		{"string", map[string]any{"observedGeneration": "7"}, 7, true},
		{"conditions only", map[string]any{"conditions": []any{map[string]any{"type": "Reconciled", "status": "True"}}}, 0, true},
		{"someone else's", map[string]any{"phase": "Ready"}, 0, false},
		{"not a number", map[string]any{"observedGeneration": "seven"}, 0, false},
		{"none", nil, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{Object: map[string]any{}}
			if tc.status != nil {
				obj.Object["status"] = tc.status
			}
			st, ok := istioStatus(obj)
			if ok != tc.wantOK || ok && st.GetObservedGeneration() != tc.want {
				t.Errorf("istioStatus = %v, %v; want observedGeneration %d, %v", st, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// TestStateOfPinStable: stable users are pinned only while a step is in
// progress (both subsets have weight; a baseline's share counts as stable).
func TestStateOfPinStable(t *testing.T) {
	cases := []struct {
		name    string
		weights api.Weights
		want    bool
	}{
		{"canary 0", api.CanaryWeights(0), false},
		{"canary 30", api.CanaryWeights(30), true},
		{"canary 100", api.CanaryWeights(100), false},
		{"baseline takes all of stable's share", api.CanaryWeights(60).WithBaseline(), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := stateOf(api.Traffic{Rollout: api.Key{Namespace: "shop", Name: "checkout"}, Weights: tc.weights, SessionAffinity: pinnedStable})
			if err != nil {
				t.Fatal(err)
			}
			if got := s.pinStable != nil; got != tc.want {
				t.Errorf("pinStable = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestSetStableCookie: sluice's stable cookie is added, replaced and
// removed on the stable destination, and a Set-Cookie of the user's own
// there is kept (and refused to overwrite).
func TestSetStableCookie(t *testing.T) {
	const ours = "sluice-canary=stable; Max-Age=3600; Path=/; HttpOnly"
	withAdd := func(add map[string]any) map[string]any {
		return map[string]any{"destination": map[string]any{"host": "checkout"}, "headers": map[string]any{"response": map[string]any{"add": add}}}
	}
	bare := func() map[string]any { return map[string]any{"destination": map[string]any{"host": "checkout"}} }
	cases := []struct {
		name    string
		rd      map[string]any
		sa      *api.SessionAffinity
		want    map[string]any
		wantErr string
	}{
		{"added", bare(), pinnedStable, withAdd(map[string]any{"set-cookie": ours}), ""},
		{"removed, empty maps pruned", withAdd(map[string]any{"set-cookie": ours}), nil, bare(), ""},
		{"renamed cookie replaced", withAdd(map[string]any{"set-cookie": "old=stable; Path=/; HttpOnly"}), pinnedStable, withAdd(map[string]any{"set-cookie": ours}), ""},
		{"removed beside the user's other headers", withAdd(map[string]any{"set-cookie": ours, "x-served-by": "stable"}), nil, withAdd(map[string]any{"x-served-by": "stable"}), ""},
		{"the user's own kept at rest", withAdd(map[string]any{"set-cookie": "lang=en"}), nil, withAdd(map[string]any{"set-cookie": "lang=en"}), ""},
		{"the user's own not overwritten", withAdd(map[string]any{"set-cookie": "lang=en"}), pinnedStable, withAdd(map[string]any{"set-cookie": "lang=en"}), "set-cookie response header of its own"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := setStableCookie(tc.rd, tc.sa)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("setStableCookie = %v, want error containing %q", err, tc.wantErr)
			}
			if !reflect.DeepEqual(tc.rd, tc.want) {
				t.Errorf("destination = %v, want %v", tc.rd, tc.want)
			}
		})
	}
}
