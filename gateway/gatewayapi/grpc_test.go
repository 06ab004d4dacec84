package gatewayapi

import (
	"errors"
	"slices"
	"testing"

	"github.com/sluice-dev/sluice/api"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// TestGRPCRules sets the weights of a GRPCRoute's managed rule, keeps the
// user's other rules, and refuses what a GRPCRoute cannot carry yet.
func TestGRPCRules(t *testing.T) {
	ref := func(name string) gwv1.GRPCBackendRef {
		return gwv1.GRPCBackendRef{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: gwv1.ObjectName(name), Port: ptr.To(gwv1.PortNumber(9000))}}}
	}
	user := gwv1.GRPCRouteRule{Name: ptr.To(gwv1.SectionName("health")), BackendRefs: []gwv1.GRPCBackendRef{ref("health")}}
	rules := []gwv1.GRPCRouteRule{user, {BackendRefs: []gwv1.GRPCBackendRef{ref("checkout-stable")}}}
	weights := func(rs []gwv1.GRPCRouteRule) map[string]int32 {
		out := map[string]int32{}
		for _, b := range rs[1].BackendRefs {
			out[string(b.Name)] = ptr.Deref(b.Weight, 1)
		}
		return out
	}
	header := baseTraffic(10)
	header.HeaderRoutes = []api.HeaderRoute{{Name: "beta", Match: []api.HeaderMatch{{HeaderName: "x-canary", HeaderValue: api.StringMatch{Prefix: "ye"}}}}}
	t.Run("header route", func(t *testing.T) {
		got, err := grpcRules(rules, header, true)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 || got[1].Name == nil || *got[1].Name != "sluice-header-beta" {
			t.Fatalf("want the header rule between the user's rule and the managed one, got %s", js(t, got))
		}
		want := `[{"headers":[{"type":"RegularExpression","name":"x-canary","value":"^ye.*"}]}]`
		if js(t, got[1].Matches) != want || len(got[1].BackendRefs) != 1 || got[1].BackendRefs[0].Name != "checkout-canary" {
			t.Errorf("header rule %s, want matches %s to checkout-canary alone", js(t, got[1]), want)
		}
		if without, _ := grpcRules(got, header, false); len(without) != 2 {
			t.Errorf("a route without useHeaderRoutes kept %d rules, want 2", len(without))
		}
	})
	tests := []struct {
		name    string
		t       api.Traffic
		want    map[string]int32
		wantErr error
	}{
		{"canary 30", baseTraffic(30), map[string]int32{"checkout-stable": 70, "checkout-canary": 30}, nil},
		{"all stable", baseTraffic(0), map[string]int32{"checkout-stable": 100}, nil},
		{"mirror refused", func() api.Traffic {
			t := baseTraffic(10)
			t.MirrorRoutes = []api.MirrorRoute{{Name: "m", Percentage: 10, Match: []api.RouteMatch{{Headers: map[string]api.StringMatch{"x": {Exact: "y"}}}}}}
			return t
		}(), nil, errGRPCRoutes},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := grpcRules(rules, tt.t, true)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			got = slices.DeleteFunc(got, func(r gwv1.GRPCRouteRule) bool { return isSluiceRule(r.Name) })
			if w := weights(got); len(w) != len(tt.want) || w["checkout-stable"] != tt.want["checkout-stable"] || w["checkout-canary"] != tt.want["checkout-canary"] {
				t.Errorf("weights %v, want %v", w, tt.want)
			}
			if js(t, got[0]) != js(t, user) {
				t.Errorf("user rule changed: %s", js(t, got[0]))
			}
		})
	}
}
