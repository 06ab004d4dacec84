package istio

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/internal/kubetest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The observer's tests run a real istiod (kubetest.SharedIstiod) against
// the test control plane: the routes Verify compares are the ones istiod
// itself builds for a proxyless gRPC client. Nothing is faked; the only
// thing missing is pods behind the Service, which the routes do not need
// (istiod builds a Service's listener and routes without endpoints).

// observerRig is a rig with istiod, the Service checkout (port 8080) that
// the VirtualService checkout routes, the user's objects, and a Router
// observing istiod, running until the test ends.
func observerRig(t *testing.T) (*rig, *Router) {
	t.Helper()
	r := newRig(t)
	c := kubetest.Shared(t)
	d := kubetest.SharedIstiod(t, c)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("istiod log (tail):\n%s", d.TailLog(3000))
		}
	})
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "checkout", Namespace: r.ns},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "checkout"},
			Ports:    []corev1.ServicePort{{Name: "grpc", Port: 8080}},
		},
	}
	if _, err := c.Client.CoreV1().Services(r.ns).Create(t.Context(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r.create(t, "virtualservice-subsets.yaml")
	r.create(t, "destinationrule.yaml")
	// The default poll: Verify wakes on the observer's changes, not on the poll.
	rt := r.router(t, RouterOptions{IstiodXDS: d.XDSAddr, PollInterval: 250 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = rt.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return r, rt
}

// TestObserverVerifiesWeightsFromIstiod: with an istiod address, every
// step's weights (0 and 100, where istiod leaves the side of weight 0
// out, then 30, and 20 with a header route, which istiod sends as a
// single cluster) are Verified once the routes istiod sends a proxyless
// client carry them; the time from the write to that is logged (about
// 110 ms here: istiod debounces changes for 100 ms).
func TestObserverVerifiesWeightsFromIstiod(t *testing.T) {
	r, rt := observerRig(t)
	steps := []struct {
		weight int32
		mod    func(*api.Traffic)
	}{
		{0, nil},
		{30, nil},
		{100, nil},
		{20, func(tr *api.Traffic) { tr.HeaderRoutes = []api.HeaderRoute{testersRoute} }},
		{20, func(tr *api.Traffic) { tr.MirrorRoutes = []api.MirrorRoute{shadowMirror} }},
		{0, nil},
	}
	for _, s := range steps {
		tr := canaryTraffic(r.ns, subsetRouting(), s.weight, s.mod)
		start := time.Now()
		tok, err := rt.Apply(t.Context(), tr)
		if err != nil {
			t.Fatal(err)
		}
		applied := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		v, err := rt.Verify(ctx, tr.Rollout, tok)
		cancel()
		if err != nil {
			t.Fatalf("weight %d: %v", s.weight, err)
		}
		if !v.Verified {
			t.Fatalf("weight %d: not verified: %s", s.weight, v.Message)
		}
		t.Logf("weight %d (header routes %d, mirror routes %d): write %v, then seen by the observer %v later", s.weight, len(tr.HeaderRoutes), len(tr.MirrorRoutes),
			applied.Sub(start).Round(time.Millisecond), time.Since(applied).Round(time.Millisecond))
		// What istiod sent, read here without the router's own reading
		// (splitOf): the clusters and their weights, a side of weight 0
		// left out.
		host := "checkout." + r.ns + ".svc.cluster.local"
		stable, canary := "outbound|8080|stable|"+host, "outbound|8080|canary|"+host
		want := map[string]uint32{stable: uint32(100 - s.weight), canary: uint32(s.weight)}
		maps.DeleteFunc(want, func(_ string, w uint32) bool { return w == 0 })
		got, form := sentClusters(t, rt, host, r.ns, "primary")
		t.Logf("weight %d: istiod sent primary as %s %v", s.weight, form, got)
		if !maps.Equal(got, want) {
			t.Errorf("weight %d: istiod sent primary as %v, want %v", s.weight, got, want)
		}
		if len(tr.HeaderRoutes) > 0 {
			if got, _ := sentClusters(t, rt, host, r.ns, testersRoute.Name); !maps.Equal(got, map[string]uint32{canary: 100}) {
				t.Errorf("header route: istiod sent %v, want the canary cluster alone", got)
			}
		}
		if len(tr.MirrorRoutes) > 0 {
			got := sentMirrors(t, rt, host, r.ns, shadowMirror.Name)
			if want := []string{canary + " 350000/MILLION"}; !slices.Equal(got, want) {
				t.Errorf("mirror route: istiod sent mirrors %v, want %v", got, want)
			}
		}
	}
}

// TestObserverHoldsAStaleWrite: a token for weights istiod no longer has
// (Apply 30, then 50, then Verify the first token) never verifies: Verify
// waits until its context ends and names what differs. Without this the
// observer could be answering yes to anything.
func TestObserverHoldsAStaleWrite(t *testing.T) {
	r, rt := observerRig(t)
	old, err := rt.Apply(t.Context(), canaryTraffic(r.ns, subsetRouting(), 30, nil))
	if err != nil {
		t.Fatal(err)
	}
	tr := canaryTraffic(r.ns, subsetRouting(), 50, nil)
	cur, err := rt.Apply(t.Context(), tr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if v, err := rt.Verify(ctx, tr.Rollout, cur); err != nil || !v.Verified {
		t.Fatalf("weight 50: %+v %v", v, err)
	}
	ctx, cancel = context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	v, err := rt.Verify(ctx, tr.Rollout, old)
	if err == nil {
		t.Fatalf("a token for 70/30 verified while istiod sends 50/50: %+v", v)
	}
	if !strings.Contains(err.Error(), `route "primary"`) {
		t.Errorf("error does not name the route that differs: %v", err)
	}
}

// sentMirrors is the mirror policies of the Envoy routes named route
// (one per match) that came from VirtualService checkout, as istiod sent
// them: "cluster numerator/denominator".
func sentMirrors(t *testing.T, rt *Router, host, ns, route string) []string {
	t.Helper()
	var out []string
	for _, r := range rt.observer.Routes(host) {
		if r.GetName() != route || !strings.HasSuffix(configOf(r), "/namespaces/"+ns+"/virtual-service/checkout") {
			continue
		}
		for _, m := range r.GetRoute().GetRequestMirrorPolicies() {
			f := m.GetRuntimeFraction().GetDefaultValue()
			out = append(out, fmt.Sprintf("%s %d/%s", m.GetCluster(), f.GetNumerator(), f.GetDenominator()))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// sentClusters is the clusters of the Envoy route named route that came
// from VirtualService checkout, as istiod sent it: weighted clusters with
// their weights, or a single cluster (weight 100); form says which.
func sentClusters(t *testing.T, rt *Router, host, ns, route string) (clusters map[string]uint32, form string) {
	t.Helper()
	for _, r := range rt.observer.Routes(host) {
		if r.GetName() != route || !strings.HasSuffix(configOf(r), "/namespaces/"+ns+"/virtual-service/checkout") {
			continue
		}
		if c := r.GetRoute().GetCluster(); c != "" {
			return map[string]uint32{c: 100}, "route.cluster"
		}
		out := map[string]uint32{}
		for _, c := range r.GetRoute().GetWeightedClusters().GetClusters() {
			out[c.GetName()] = c.GetWeight().GetValue()
		}
		return out, "weighted_clusters"
	}
	t.Fatalf("istiod sent no route %q for %s", route, host)
	return nil, ""
}
