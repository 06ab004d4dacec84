package istio

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/gateway"
	"github.com/sluice-dev/sluice/internal/kubetest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
)

// TestRunReappliesForeignEdit: mid-step, someone else sets the managed
// route's weights by hand; Run (not the next Apply) writes the step's
// weights back, records a SluiceReapplied Warning Event on the
// VirtualService, as the Gateway API router does on a route, and tells
// OnDrift.
func TestRunReappliesForeignEdit(t *testing.T) {
	r := newRig(t)
	r.create(t, "virtualservice-subsets.yaml")
	r.create(t, "destinationrule.yaml")
	kube, err := kubernetes.NewForConfig(r.config)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var reported []string
	rt := r.router(t, RouterOptions{Events: kube, DriftInterval: 50 * time.Millisecond, OnDrift: func(d Drift) {
		mu.Lock()
		defer mu.Unlock()
		reported = append(reported, d.Object)
	}})
	if _, err := rt.Apply(t.Context(), canaryTraffic(r.ns, subsetRouting(), 30, nil)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = rt.Run(ctx) }()
	defer func() { cancel(); <-done }()

	r.edit(t, VirtualServices, "checkout", func(u *unstructured.Unstructured) {
		http, _, _ := unstructured.NestedSlice(u.Object, "spec", "http")
		for _, h := range http {
			if routeName(h) == "primary" {
				for _, d := range h.(map[string]any)["route"].([]any) {
					d.(map[string]any)["weight"] = int64(50)
				}
			}
		}
		_ = unstructured.SetNestedSlice(u.Object, http, "spec", "http")
	})
	kubetest.Eventually(t, 30*time.Second, "primary weights back at [70 30]", func() (bool, string) {
		w := weightsOf(t, r.get(t, VirtualServices, "checkout"), "primary")
		return len(w) == 2 && w[0] == 70 && w[1] == 30, fmt.Sprint(w)
	})
	kubetest.Eventually(t, 30*time.Second, "a "+gateway.ReasonReapplied+" Warning Event on VirtualService checkout", func() (bool, string) {
		evs, err := kube.CoreV1().Events(r.ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range evs.Items {
			if e.Reason == gateway.ReasonReapplied && e.Type == "Warning" && e.InvolvedObject.Kind == "VirtualService" && e.InvolvedObject.Name == "checkout" {
				return true, ""
			}
			seen = append(seen, e.Reason+" "+e.InvolvedObject.Kind+"/"+e.InvolvedObject.Name)
		}
		return false, fmt.Sprint(seen)
	})
	// OnDrift runs after the re-apply that records the Event returns: wait
	// for it rather than read it at once.
	want := "VirtualService " + r.ns + "/checkout"
	kubetest.Eventually(t, 30*time.Second, "OnDrift told of "+want, func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(reported) > 0, fmt.Sprint(reported)
	})
	mu.Lock()
	defer mu.Unlock()
	if len(reported) != 1 || reported[0] != want {
		t.Errorf("OnDrift got %v, want [%s]", reported, want)
	}
}
