package gatewayapi_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/gateway"
	"github.com/sluice-dev/sluice/gateway/gatewayapi"
	"github.com/sluice-dev/sluice/gateway/gatewayapi/gatewayapitest"
	"github.com/sluice-dev/sluice/internal/testkit"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"
)

var key = api.Key{Namespace: "shop", Name: "checkout"}

// traffic is the rollout's traffic at canary weight w, in namespace ns.
func traffic(ns string, w int32) api.Traffic {
	return api.Traffic{
		Rollout: key, StableVersion: "v1", CanaryVersion: "v2", Weights: api.CanaryWeights(w),
		Routing: &api.ClusterRouting{StableService: "checkout-stable", CanaryService: "checkout-canary", GatewayAPI: &api.GatewayAPIRouting{
			Namespace: ns, HTTPRoutes: []api.GatewayRouteRef{{Name: "checkout", UseHeaderRoutes: true}},
		}},
	}
}

var (
	headerRoute = api.HeaderRoute{Name: "beta-testers", Match: []api.HeaderMatch{{HeaderName: "X-Canary", HeaderValue: api.StringMatch{Exact: "yes"}}}}
	cookieRoute = api.HeaderRoute{Name: "beta-cookie", Match: []api.HeaderMatch{{HeaderName: "cookie", HeaderValue: api.StringMatch{Exact: "beta=1"}}}}
	mirrorRoute = api.MirrorRoute{Name: "shadow", Percentage: 50, Match: []api.RouteMatch{{
		Method: &api.StringMatch{Exact: "GET"}, Path: &api.StringMatch{Prefix: "/api/v2"},
		Headers: map[string]api.StringMatch{"X-Shadow": {Regex: "on|yes"}},
	}}}
)

// steps are the goldens' traffic, one per step type, in the order of a
// canary that ends promoted; "abort" starts again from a step with routes.
func steps(ns string) []struct {
	name string
	t    api.Traffic
} {
	weight := traffic(ns, 20)
	header := weight
	header.HeaderRoutes = []api.HeaderRoute{headerRoute}
	cookie := header
	cookie.HeaderRoutes = []api.HeaderRoute{headerRoute, cookieRoute}
	mirror := cookie
	mirror.MirrorRoutes = []api.MirrorRoute{mirrorRoute}
	sticky := traffic(ns, 40)
	sticky.SessionAffinity = &api.SessionAffinity{CookieName: "sluice-canary", MaxAge: 600}
	promoted := traffic(ns, 0)
	promoted.StableVersion, promoted.CanaryVersion = "v2", "v2"
	aborted := traffic(ns, 0)
	aborted.CanaryVersion = "v1"
	pinned := traffic(ns, 40)
	pinned.SessionAffinity = &api.SessionAffinity{CookieName: "sluice-canary", MaxAge: 600, PinStable: true}
	pinnedFull := pinned
	pinnedFull.Weights = api.CanaryWeights(100)
	return []struct {
		name string
		t    api.Traffic
	}{
		{"1-set-weight", weight}, {"2-header-route", header}, {"3-cookie-route", cookie}, {"4-mirror", mirror},
		{"5-sticky", sticky}, {"6-promotion", promoted}, {"7-mirror-again", mirror}, {"8-abort", aborted},
		{"9-pin-stable", pinned}, {"10-pin-stable-at-100", pinnedFull}, {"11-promotion-after-pin", promoted},
	}
}

// TestGoldenRoutes writes each step type into a real HTTPRoute and
// compares the route's spec with testdata/golden (-update rewrites them).
func TestGoldenRoutes(t *testing.T) {
	r := newRig(t)
	for _, s := range steps(r.ns) {
		t.Run(s.name, func(t *testing.T) {
			if _, err := r.router.Apply(t.Context(), s.t); err != nil {
				t.Fatal(err)
			}
			// Applying the same traffic again writes nothing: what sluice
			// computes survives the apiserver's defaulting, so the drift
			// check never mistakes its own write for someone else's.
			gen := r.route(t).Generation
			if _, err := r.router.Apply(t.Context(), s.t); err != nil {
				t.Fatal(err)
			}
			if again := r.route(t).Generation; again != gen {
				t.Errorf("applying the same traffic again wrote the route (generation %d → %d)", gen, again)
			}
			got, err := yaml.Marshal(r.route(t).Spec)
			if err != nil {
				t.Fatal(err)
			}
			testkit.Golden(t, filepath.Join("testdata", "golden", s.name+".yaml"), got)
		})
	}
}

// TestVerify waits for every parent's status at the written generation:
// a held status keeps Verify waiting, an accepted one verifies, a
// rejected one is a NACK with the condition's reason.
func TestVerify(t *testing.T) {
	r := newRig(t)
	fake := gatewayapitest.NewController(r.client)
	fake.Set(r.ns, "checkout", gatewayapitest.Hold)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go fake.Run(ctx, 20*time.Millisecond)

	tok, err := r.router.Apply(t.Context(), traffic(r.ns, 20))
	if err != nil {
		t.Fatal(err)
	}
	short, stop := context.WithTimeout(t.Context(), 300*time.Millisecond)
	_, err = r.router.Verify(short, key, tok)
	stop()
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "reports no status") {
		t.Fatalf("Verify with the status held: got %v, want a deadline error naming the parent without status", err)
	}

	fake.Set(r.ns, "checkout", gatewayapitest.Accept)
	if v, err := r.router.Verify(t.Context(), key, tok); err != nil || !v.Verified {
		t.Fatalf("Verify after the gateway accepted: %+v, %v", v, err)
	}

	fake.Set(r.ns, "checkout", gatewayapitest.Reject)
	tok, err = r.router.Apply(t.Context(), traffic(r.ns, 50))
	if err != nil {
		t.Fatal(err)
	}
	bounded, stop2 := context.WithTimeout(t.Context(), 15*time.Second)
	defer stop2()
	_, err = r.router.Verify(bounded, key, tok)
	if !errors.Is(err, gateway.ErrNack) || !strings.Contains(err.Error(), gatewayapitest.RejectReason) {
		t.Fatalf("Verify of a rejected route: got %v, want ErrNack with reason %s", err, gatewayapitest.RejectReason)
	}
}

// TestVerifyNoParents: a route with no parentRefs is served by no
// gateway, so a weight written into it is never taken: Verify answers a
// NACK naming the route and why, at once, instead of "verified".
func TestVerifyNoParents(t *testing.T) {
	r := newRig(t)
	r.edit(t, "", func(orphan *gwv1.HTTPRoute) { orphan.Spec.ParentRefs = nil })
	tok, err := r.router.Apply(t.Context(), traffic(r.ns, 20))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	v, err := r.router.Verify(ctx, key, tok)
	want := "HTTPRoute " + r.ns + "/checkout: no parentRefs: no gateway serves this route"
	if !errors.Is(err, gateway.ErrNack) || !errors.Is(err, gatewayapi.ErrNoParents) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Verify of a route without parentRefs: %+v, %v; want a NACK containing %q", v, err, want)
	}
}

// TestReapplyAfterForeignEdit: someone else sets the managed weights
// mid-step; Run writes the rollout's traffic back and records an Event.
func TestReapplyAfterForeignEdit(t *testing.T) {
	r := newRig(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if _, err := r.router.Apply(ctx, traffic(r.ns, 30)); err != nil {
		t.Fatal(err)
	}
	want := r.route(t).Spec.Rules
	go func() { _ = r.router.Run(ctx) }()

	r.edit(t, "argocd-controller", func(edited *gwv1.HTTPRoute) {
		edited.Spec.Rules[1].BackendRefs = edited.Spec.Rules[1].BackendRefs[:1]
		edited.Spec.Rules[1].BackendRefs[0].Weight = ptr.To[int32](1)
	})
	eventually(t, "the managed rules re-applied", func(ctx context.Context) bool {
		return rulesYAML(t, r.route(t).Spec.Rules) == rulesYAML(t, want)
	})
	eventually(t, "a "+gatewayapi.ReasonReapplied+" event on the route", func(ctx context.Context) bool {
		evs, err := r.kube.Client.CoreV1().Events(r.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, e := range evs.Items {
			if e.Reason == gatewayapi.ReasonReapplied && e.InvolvedObject.Name == "checkout" {
				return true
			}
		}
		return false
	})
}

// TestRelease restores a single 100% stable backend and removes sluice's
// rules: the route is the user's original again.
func TestRelease(t *testing.T) {
	r := newRig(t)
	original := r.route(t).Spec.Rules
	s := steps(r.ns)
	mid := s[3].t // weights, header, cookie and mirror routes
	mid.SessionAffinity = &api.SessionAffinity{CookieName: "sluice-canary"}
	if _, err := r.router.Apply(t.Context(), mid); err != nil {
		t.Fatal(err)
	}
	if err := r.router.Release(t.Context(), key, mid.Routing); err != nil {
		t.Fatal(err)
	}
	got := r.route(t).Spec.Rules
	want := original
	want[1].BackendRefs[0].Weight = ptr.To[int32](100)
	if rulesYAML(t, got) != rulesYAML(t, want) {
		t.Errorf("after Release:\n%s\nwant:\n%s", rulesYAML(t, got), rulesYAML(t, want))
	}
}

func rulesYAML(t *testing.T, v any) string {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestGRPCRouteApply writes weights and a header route into a real
// GRPCRoute (the apiserver validates the rules against the CRD) and
// releases it back to the user's single rule.
func TestGRPCRouteApply(t *testing.T) {
	r := newRig(t)
	route := &gwv1.GRPCRoute{
		ObjectMeta: metav1.ObjectMeta{Name: "rpc", Namespace: r.ns},
		Spec: gwv1.GRPCRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "edge"}}},
			Rules:           []gwv1.GRPCRouteRule{{BackendRefs: []gwv1.GRPCBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: "checkout-stable", Port: ptr.To(gwv1.PortNumber(9000))}}}}}},
		},
	}
	if _, err := r.client.GatewayV1().GRPCRoutes(r.ns).Create(t.Context(), route, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr := traffic(r.ns, 25)
	tr.Routing.GatewayAPI = &api.GatewayAPIRouting{Namespace: r.ns, GRPCRoutes: []api.GatewayRouteRef{{Name: "rpc", UseHeaderRoutes: true}}}
	tr.HeaderRoutes = []api.HeaderRoute{headerRoute, cookieRoute}
	if _, err := r.router.Apply(t.Context(), tr); err != nil {
		t.Fatal(err)
	}
	got, err := r.client.GatewayV1().GRPCRoutes(r.ns).Get(t.Context(), "rpc", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(got.Spec.Rules); n != 3 {
		t.Fatalf("%d rules, want 2 header rules and the managed one: %s", n, rulesYAML(t, got.Spec.Rules))
	}
	if w := got.Spec.Rules[2].BackendRefs; len(w) != 2 || *w[0].Weight != 75 || *w[1].Weight != 25 {
		t.Errorf("managed rule backends %s, want stable 75 and canary 25", rulesYAML(t, w))
	}
	if err := r.router.Release(t.Context(), key, tr.Routing); err != nil {
		t.Fatal(err)
	}
	got, err = r.client.GatewayV1().GRPCRoutes(r.ns).Get(t.Context(), "rpc", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(got.Spec.Rules); n != 1 || len(got.Spec.Rules[0].BackendRefs) != 1 || *got.Spec.Rules[0].BackendRefs[0].Weight != 100 {
		t.Errorf("after Release: %s, want the single stable backend at 100", rulesYAML(t, got.Spec.Rules))
	}
}
