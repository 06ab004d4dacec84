package observer

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/kubetest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// The observer is tested against a real istiod (kubetest.SharedIstiod)
// beside a real kube-apiserver: what it holds is what istiod sends a
// proxyless client. gateway/istio's tests check the weights Verify reads
// from it.

func TestMain(m *testing.M) {
	kubetest.EnterNetns()
	kubetest.Lazy(1)
	code := m.Run()
	kubetest.StopLazy()
	os.Exit(code)
}

var virtualServices = schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "virtualservices"}

// TestFollowsIstiod: watching a host, the observer holds the routes istiod
// builds from a VirtualService, and keeps following it: an edit of the
// weights arrives on the same stream, after the first push was ACKed.
func TestFollowsIstiod(t *testing.T) {
	c := kubetest.Shared(t)
	d := kubetest.SharedIstiod(t, c)
	ns := c.Namespace(t)
	for _, name := range []string{"api", "api-v2"} {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name}, Ports: []corev1.ServicePort{{Name: "grpc", Port: 9090}}}}
		if _, err := c.Client.CoreV1().Services(ns).Create(t.Context(), svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	vs := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
		"metadata": map[string]any{"name": "api", "namespace": ns},
		"spec": map[string]any{"hosts": []any{"api"}, "http": []any{map[string]any{"name": "main", "route": []any{
			map[string]any{"destination": map[string]any{"host": "api"}, "weight": int64(90)},
			map[string]any{"destination": map[string]any{"host": "api-v2"}, "weight": int64(10)},
		}}}},
	}}
	if _, err := dyn.Resource(virtualServices).Namespace(ns).Create(t.Context(), vs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	o, err := New(Options{Addr: d.XDSAddr, Name: "observer-test"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "sidecar~127.0.0.1~observer-test.istio-system~istio-system.svc.cluster.local"; o.NodeID() != want {
		t.Errorf("node id %q, want %q", o.NodeID(), want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- o.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	host := "api." + ns + ".svc.cluster.local"
	o.Watch(host)
	waitWeights(t, o, host, "outbound|9090||api."+ns+".svc.cluster.local 90 outbound|9090||api-v2."+ns+".svc.cluster.local 10")

	cur, err := dyn.Resource(virtualServices).Namespace(ns).Get(t.Context(), "api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	http, _, _ := unstructured.NestedSlice(cur.Object, "spec", "http")
	dests := http[0].(map[string]any)["route"].([]any)
	dests[0].(map[string]any)["weight"], dests[1].(map[string]any)["weight"] = int64(40), int64(60)
	_ = unstructured.SetNestedSlice(cur.Object, http, "spec", "http")
	if _, err := dyn.Resource(virtualServices).Namespace(ns).Update(t.Context(), cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitWeights(t, o, host, "outbound|9090||api."+ns+".svc.cluster.local 40 outbound|9090||api-v2."+ns+".svc.cluster.local 60")
}

// TestRunEndsWithItsContext: with istiod unreachable the observer holds
// nothing, keeps trying, and returns when its context ends.
func TestRunEndsWithItsContext(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	o, err := New(Options{Addr: addr, Retry: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	o.Watch("api.default.svc.cluster.local")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := o.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if r := o.Routes("api.default.svc.cluster.local"); len(r) != 0 {
		t.Errorf("routes without istiod: %v", r)
	}
	if _, err := New(Options{}); err == nil {
		t.Error("New without an address: no error")
	}
}

// waitWeights waits until the route main for host has the weighted
// clusters want ("cluster weight ...", in istiod's order).
func waitWeights(t *testing.T, o *Observer, host, want string) {
	t.Helper()
	kubetest.Eventually(t, 30*time.Second, "route main of "+host+" = "+want, func() (bool, string) {
		var got []string
		for _, r := range o.Routes(host) {
			if r.GetName() != "main" {
				continue
			}
			var parts []string
			for _, c := range r.GetRoute().GetWeightedClusters().GetClusters() {
				parts = append(parts, fmt.Sprintf("%s %d", c.GetName(), c.GetWeight().GetValue()))
			}
			got = append(got, strings.Join(parts, " "))
		}
		return len(got) == 1 && got[0] == want, fmt.Sprint(got)
	})
}
