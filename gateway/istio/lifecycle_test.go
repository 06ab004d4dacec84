package istio

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/gateway"
	"github.com/sluice-dev/sluice/gateway/istio/istiotest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// weightsOf reads the managed route's destination weights.
func weightsOf(t *testing.T, u *unstructured.Unstructured, route string) []int64 {
	t.Helper()
	http, _, _ := unstructured.NestedSlice(u.Object, "spec", "http")
	for _, h := range http {
		if routeName(h) != route {
			continue
		}
		var ws []int64
		dests, _ := h.(map[string]any)["route"].([]any)
		for _, d := range dests {
			w, _ := d.(map[string]any)["weight"].(int64)
			ws = append(ws, w)
		}
		return ws
	}
	t.Fatalf("no http route %q in %s", route, u.GetName())
	return nil
}

// subsetHash is one subset's hash label.
func subsetHash(dr *unstructured.Unstructured, subset string) string {
	return stableHashOf(dr, &api.IstioDestinationRule{StableSubsetName: subset})
}

func httpRouteNames(u *unstructured.Unstructured) []string {
	http, _, _ := unstructured.NestedSlice(u.Object, "spec", "http")
	var names []string
	for _, h := range http {
		names = append(names, routeName(h))
	}
	return names
}

// TestApplyConflict: someone else writes the VirtualService between
// sluice's read and its write. The API server refuses sluice's write
// (resourceVersion), sluice reads again and re-applies, and both edits
// are in the object.
func TestApplyConflict(t *testing.T) {
	r := newRig(t)
	r.create(t, "virtualservice-subsets.yaml")
	r.create(t, "destinationrule.yaml")
	var puts, conflicts atomic.Int32
	cfg := rest.CopyConfig(r.config)
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodPut && strings.HasSuffix(req.URL.Path, "/virtualservices/checkout") && puts.Add(1) == 1 {
				r.edit(t, VirtualServices, "checkout", func(u *unstructured.Unstructured) {
					u.SetAnnotations(map[string]string{"team": "payments", "edited-by": "kubectl"})
				})
			}
			resp, err := next.RoundTrip(req)
			if err == nil && resp.StatusCode == http.StatusConflict {
				conflicts.Add(1)
			}
			return resp, err
		})
	})
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rt := r.router(t, RouterOptions{Client: dyn})
	tr := canaryTraffic(r.ns, subsetRouting(), 30, func(t *api.Traffic) { t.HeaderRoutes = []api.HeaderRoute{testersRoute} })
	if _, err := rt.Apply(context.Background(), tr); err != nil {
		t.Fatalf("Apply = %v, want the conflict re-read and re-applied", err)
	}
	if puts.Load() != 2 || conflicts.Load() != 1 {
		t.Errorf("PUTs %d, conflicts %d; want 2 and 1 (the first write refused, the second on a fresh read)", puts.Load(), conflicts.Load())
	}
	got := r.get(t, VirtualServices, "checkout")
	if got.GetAnnotations()["edited-by"] != "kubectl" {
		t.Errorf("the other writer's edit was overwritten: annotations %v", got.GetAnnotations())
	}
	if w := weightsOf(t, got, "primary"); w[0] != 70 || w[1] != 30 {
		t.Errorf("primary weights %v, want [70 30]", w)
	}
	if names := httpRouteNames(got); strings.Join(names, ",") != "internal,testers,primary,fallback" {
		t.Errorf("http routes %v, want internal,testers,primary,fallback", names)
	}
}

// TestDrift: an edit of fields sluice manages, made by someone else
// between steps, is found by Resync (or the next Apply, which reports it
// to OnDrift), reported once per object, and undone; an edit of fields
// sluice does not manage is not drift and is kept.
func TestDrift(t *testing.T) {
	r := newRig(t)
	r.create(t, "virtualservice-subsets.yaml")
	r.create(t, "destinationrule.yaml")
	var reported []Drift
	rt := r.router(t, RouterOptions{OnDrift: func(d Drift) { reported = append(reported, d) }})
	ctx := context.Background()
	tr := canaryTraffic(r.ns, subsetRouting(), 30, func(t *api.Traffic) { t.HeaderRoutes = []api.HeaderRoute{testersRoute} })
	if _, err := rt.Apply(ctx, tr); err != nil {
		t.Fatal(err)
	}
	key := tr.Rollout

	t.Run("unmanaged edit is not drift", func(t *testing.T) {
		r.edit(t, VirtualServices, "checkout", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedStringSlice(u.Object, []string{"edge/public"}, "spec", "gateways")
		})
		gen := r.get(t, VirtualServices, "checkout").GetGeneration()
		drifts, _, err := rt.Resync(ctx, key)
		if err != nil || len(drifts) != 0 {
			t.Fatalf("Resync = %v, %v; want no drift", drifts, err)
		}
		got := r.get(t, VirtualServices, "checkout")
		if got.GetGeneration() != gen {
			t.Errorf("Resync wrote the object (generation %d → %d) with nothing to change", gen, got.GetGeneration())
		}
		if g, _, _ := unstructured.NestedStringSlice(got.Object, "spec", "gateways"); len(g) != 1 {
			t.Errorf("the user's gateways edit was undone: %v", g)
		}
	})

	t.Run("managed edit is drift, undone by Resync", func(t *testing.T) {
		r.edit(t, VirtualServices, "checkout", func(u *unstructured.Unstructured) {
			http, _, _ := unstructured.NestedSlice(u.Object, "spec", "http")
			var kept []any
			for _, h := range http {
				switch routeName(h) {
				case "testers":
					continue // someone removes sluice's header route
				case "primary":
					for _, d := range h.(map[string]any)["route"].([]any) {
						d.(map[string]any)["weight"] = int64(50)
					}
				}
				kept = append(kept, h)
			}
			_ = unstructured.SetNestedSlice(u.Object, kept, "spec", "http")
		})
		r.edit(t, DestinationRules, "checkout", func(u *unstructured.Unstructured) {
			subsets, _, _ := unstructured.NestedSlice(u.Object, "spec", "subsets")
			_ = unstructured.SetNestedField(subsets[1].(map[string]any), "other", "labels", PodTemplateHashLabel)
			_ = unstructured.SetNestedSlice(u.Object, subsets, "spec", "subsets")
		})
		drifts, _, err := rt.Resync(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		var objs []string
		for _, d := range drifts {
			objs = append(objs, d.Object)
		}
		want := []string{"DestinationRule " + r.ns + "/checkout", "VirtualService " + r.ns + "/checkout"}
		if strings.Join(objs, "|") != strings.Join(want, "|") {
			t.Fatalf("drifts on %v, want %v", objs, want)
		}
		if s := drifts[1].String(); !strings.Contains(s, `"primary"`) || !strings.Contains(s, "weight 50") {
			t.Errorf("drift %q does not say what was found", s)
		}
		got := r.get(t, VirtualServices, "checkout")
		if w := weightsOf(t, got, "primary"); w[0] != 70 || w[1] != 30 {
			t.Errorf("primary weights %v after Resync, want [70 30]", w)
		}
		if names := strings.Join(httpRouteNames(got), ","); names != "internal,testers,primary,fallback" {
			t.Errorf("http routes %s after Resync, want the header route back", names)
		}
		if h := subsetHash(r.get(t, DestinationRules, "checkout"), "canary"); h != hashV2 {
			t.Errorf("canary subset hash %q after Resync, want %q", h, hashV2)
		}
		if again, _, err := rt.Resync(ctx, key); err != nil || len(again) != 0 {
			t.Errorf("a second Resync = %v, %v; want no drift", again, err)
		}
	})

	t.Run("next Apply reports drift to OnDrift", func(t *testing.T) {
		r.edit(t, VirtualServices, "checkout", func(u *unstructured.Unstructured) {
			http, _, _ := unstructured.NestedSlice(u.Object, "spec", "http")
			for _, h := range http {
				if routeName(h) == "primary" {
					h.(map[string]any)["route"].([]any)[1].(map[string]any)["weight"] = int64(0)
					h.(map[string]any)["route"].([]any)[0].(map[string]any)["weight"] = int64(100)
				}
			}
			_ = unstructured.SetNestedSlice(u.Object, http, "spec", "http")
		})
		reported = nil
		tr.Weights = api.CanaryWeights(50)
		if _, err := rt.Apply(ctx, tr); err != nil {
			t.Fatal(err)
		}
		if len(reported) != 1 || reported[0].Object != "VirtualService "+r.ns+"/checkout" {
			t.Fatalf("OnDrift got %v, want one drift of the VirtualService", reported)
		}
		if w := weightsOf(t, r.get(t, VirtualServices, "checkout"), "primary"); w[1] != 50 {
			t.Errorf("primary weights %v, want the new step's 50 on canary", w)
		}
	})
}

// TestRelease: Release after a step with every kind of route leaves the
// VirtualServices exactly as the user wrote them (spec and annotations),
// the canary subset on the stable pods, and no trace of sluice; it can
// be repeated, and objects already deleted are skipped.
func TestRelease(t *testing.T) {
	r := newRig(t)
	r.create(t, "virtualservice-subsets.yaml")
	r.create(t, "virtualservice-services.yaml")
	r.create(t, "destinationrule.yaml")
	routing := subsetRouting()
	routing.Istio.VirtualServices = append(routing.Istio.VirtualServices, api.IstioVirtualService{Name: "checkout-edge"})
	before := map[string][]byte{}
	for _, name := range []string{"checkout", "checkout-edge"} {
		raw := r.rawJSON(t, VirtualServices, name)
		before[name] = slices.Concat(jsonPath(t, raw, "spec"), jsonPath(t, raw, "metadata", "annotations"))
	}
	rt := r.router(t, RouterOptions{})
	ctx := context.Background()
	tr := canaryTraffic(r.ns, routing, 40, func(t *api.Traffic) {
		t.HeaderRoutes = []api.HeaderRoute{testersRoute, cookieRoute}
		t.MirrorRoutes = []api.MirrorRoute{shadowMirror}
		t.SessionAffinity = stickyCanary
	})
	if _, err := rt.Apply(ctx, tr); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := rt.Release(ctx, tr.Rollout, routing); err != nil {
			t.Fatalf("Release #%d: %v", i+1, err)
		}
		for _, name := range []string{"checkout", "checkout-edge"} {
			raw := r.rawJSON(t, VirtualServices, name)
			if got := slices.Concat(jsonPath(t, raw, "spec"), jsonPath(t, raw, "metadata", "annotations")); !bytes.Equal(got, before[name]) {
				t.Errorf("Release #%d: VirtualService %s is not as the user wrote it:\n got %s\nwant %s", i+1, name, got, before[name])
			}
		}
		dr := r.get(t, DestinationRules, "checkout")
		if canary := subsetHash(dr, "canary"); canary != hashV1 {
			t.Errorf("Release #%d: canary subset hash %q, want the stable's %q", i+1, canary, hashV1)
		}
		if _, ok := dr.GetAnnotations()[LedgerAnnotation]; ok {
			t.Errorf("Release #%d: DestinationRule keeps sluice's annotation", i+1)
		}
	}
	if err := r.dyn.Resource(VirtualServices).Namespace(r.ns).Delete(ctx, "checkout-edge", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Release(ctx, tr.Rollout, routing); err != nil {
		t.Errorf("Release with a VirtualService already deleted = %v, want nil", err)
	}
}

// TestVerify plays istiod's status reporting (PILOT_ENABLE_STATUS) where
// it needs it: no istiod runs here.
func TestVerify(t *testing.T) {
	r := newRig(t)
	r.create(t, "virtualservice-services.yaml")
	rt := r.router(t, RouterOptions{})
	ctx := context.Background()
	apply := func(t *testing.T, w int32) (string, int64) {
		t.Helper()
		tok, err := rt.Apply(ctx, canaryTraffic(r.ns, serviceRouting(), w, nil))
		if err != nil || tok == "" {
			t.Fatalf("Apply = %q, %v", tok, err)
		}
		return tok, r.get(t, VirtualServices, "checkout-edge").GetGeneration()
	}
	reconciled := istiotest.Reconciled
	key := api.Key{Namespace: r.ns, Name: "checkout"}

	t.Run("no status: observed, unverified", func(t *testing.T) {
		tok, _ := apply(t, 10)
		v, err := rt.Verify(ctx, key, tok)
		if err != nil || v.Verified || v.Message != UnverifiedMessage {
			t.Fatalf("Verify = %+v, %v; want unverified with %q", v, err, UnverifiedMessage)
		}
	})

	t.Run("status reporting: waits for istiod, then verified", func(t *testing.T) {
		tok, gen := apply(t, 20)
		// istiod has reconciled only the previous generation so far.
		r.setStatus(t, VirtualServices, "checkout-edge", reconciled(gen-1))
		short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		if v, err := rt.Verify(short, key, tok); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Verify with istiod behind = %+v, %v; want it still waiting", v, err)
		}
		r.setStatus(t, VirtualServices, "checkout-edge", reconciled(gen))
		v, err := rt.Verify(ctx, key, tok)
		if err != nil || !v.Verified {
			t.Fatalf("Verify after istiod reconciled generation %d = %+v, %v; want verified", gen, v, err)
		}
	})

	t.Run("validation error: nack", func(t *testing.T) {
		tok, gen := apply(t, 30)
		st := reconciled(gen)
		st["validationMessages"] = []any{
			map[string]any{"level": "WARNING", "type": map[string]any{"code": "IST0173", "name": "DestinationRuleSubsetNotSelectPods"}},
			map[string]any{"level": "ERROR", "type": map[string]any{"code": "IST0101", "name": "ReferencedResourceNotFound"}, "documentationUrl": "https://istio.io/latest/docs/reference/config/analysis/ist0101/"},
		}
		r.setStatus(t, VirtualServices, "checkout-edge", st)
		_, err := rt.Verify(ctx, key, tok)
		if !errors.Is(err, gateway.ErrNack) || !strings.Contains(err.Error(), "IST0101 ReferencedResourceNotFound") || strings.Contains(err.Error(), "IST0173") {
			t.Fatalf("Verify = %v; want ErrNack naming the ERROR message only", err)
		}
	})

	t.Run("deleted: error, not a nack", func(t *testing.T) {
		tok, _ := apply(t, 40)
		if err := r.dyn.Resource(VirtualServices).Namespace(r.ns).Delete(ctx, "checkout-edge", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		_, err := rt.Verify(ctx, key, tok)
		if err == nil || errors.Is(err, gateway.ErrNack) || !strings.Contains(err.Error(), "was deleted") {
			t.Fatalf("Verify = %v; want an error saying it was deleted", err)
		}
	})
}

// TestSharedVirtualService: two rollouts manage one route each in the same
// VirtualService; each one's routes and ledger entry are its own, and
// releasing one leaves the other's in place.
func TestSharedVirtualService(t *testing.T) {
	r := newRig(t)
	r.create(t, "virtualservice-shared.yaml")
	rt := r.router(t, RouterOptions{})
	ctx := context.Background()
	routing := func(app string) *api.ClusterRouting {
		return &api.ClusterRouting{StableService: app + "-stable", CanaryService: app + "-canary",
			Istio: &api.IstioRouting{VirtualServices: []api.IstioVirtualService{{Name: "shop", Routes: []string{app}}}}}
	}
	traffic := func(app string, w int32) api.Traffic {
		tr := canaryTraffic(r.ns, routing(app), w, func(t *api.Traffic) {
			t.HeaderRoutes = []api.HeaderRoute{{Name: app + "-testers", Match: testersRoute.Match}}
		})
		tr.Rollout.Name = app
		return tr
	}
	for _, tr := range []api.Traffic{traffic("cart", 20), traffic("checkout", 40)} {
		if _, err := rt.Apply(ctx, tr); err != nil {
			t.Fatal(err)
		}
	}
	vs := r.get(t, VirtualServices, "shop")
	if names := strings.Join(httpRouteNames(vs), ","); names != "cart-testers,cart,checkout-testers,checkout" {
		t.Fatalf("http routes %s, want each rollout's header route ahead of its own route", names)
	}
	if w := weightsOf(t, vs, "cart"); w[1] != 20 {
		t.Errorf("cart weights %v, want canary 20", w)
	}
	if w := weightsOf(t, vs, "checkout"); w[1] != 40 {
		t.Errorf("checkout weights %v, want canary 40", w)
	}
	if err := rt.Release(ctx, traffic("cart", 0).Rollout, routing("cart")); err != nil {
		t.Fatal(err)
	}
	vs = r.get(t, VirtualServices, "shop")
	if names := strings.Join(httpRouteNames(vs), ","); names != "cart,checkout-testers,checkout" {
		t.Errorf("http routes after releasing cart: %s, want checkout's header route kept", names)
	}
	led, err := readLedger(vs)
	if err != nil || len(led) != 1 || len(led[r.ns+"/checkout"].Routes) != 1 {
		t.Errorf("ledger after releasing cart: %v, %v; want checkout's entry only", led, err)
	}
	// checkout's next step still finds its own route and no drift.
	var drifts []Drift
	rt2 := r.router(t, RouterOptions{OnDrift: func(d Drift) { drifts = append(drifts, d) }})
	if _, err := rt2.Apply(ctx, traffic("checkout", 60)); err != nil || len(drifts) != 0 {
		t.Errorf("checkout's next step = %v, drifts %v; want none", err, drifts)
	}
}
