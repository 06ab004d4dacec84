package gatewayapi_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/gateway"
	"github.com/sluice-dev/sluice/gateway/gatewayapi"
	"github.com/sluice-dev/sluice/internal/kubetest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
)

// istiodController is the controllerName istiod writes into the status of
// every route parent it serves: a Gateway of class istio and, for GAMMA
// routes, a Service alike (istio.io/mesh-controller names only the
// waypoint GatewayClass, not route status).
const istiodController = "istio.io/gateway-controller"

// TestVerifyIstiod verifies against a real Gateway API implementation,
// istiod: a route with a GAMMA parent (the Service whose callers it
// steers) and a Gateway parent of class istio is verified once istiod
// reports both parents Accepted and ResolvedRefs at the written
// generation, and a write whose canary Service does not exist is a NACK
// with istiod's reason, BackendNotFound, not a wait.
func TestVerifyIstiod(t *testing.T) {
	c := kubetest.Shared(t)
	ist := kubetest.SharedIstiod(t, c)
	ctx := t.Context()
	client, err := gwclient.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	waitIstioClass(t, client, ist)
	ns := c.Namespace(t)
	for _, name := range []string{"checkout", "checkout-stable", "checkout-canary"} {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "checkout"}, Ports: []corev1.ServicePort{{
				Name: "http", Port: 8080, TargetPort: intstr.FromInt32(8080),
			}}},
		}
		if _, err := c.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	edge := &gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: ns},
		Spec: gwv1.GatewaySpec{GatewayClassName: "istio", Listeners: []gwv1.Listener{{
			Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType,
		}}},
	}
	if _, err := client.GatewayV1().Gateways(ns).Create(ctx, edge, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mesh := gwv1.ParentReference{Group: ptr.To(gwv1.Group("")), Kind: ptr.To(gwv1.Kind("Service")),
		Name: "checkout", Port: ptr.To(gwv1.PortNumber(8080))}
	route := &gwv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Name: "checkout", Namespace: ns},
		Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{mesh, {Name: "edge"}}},
			Rules: []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{
				BackendObjectReference: gwv1.BackendObjectReference{Name: "checkout-stable", Port: ptr.To(gwv1.PortNumber(8080))},
			}}}}},
		},
	}
	if _, err := client.GatewayV1().HTTPRoutes(ns).Create(ctx, route, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The route is served before sluice writes it, as in a cluster where
	// a rollout starts on an existing route: a write right after the
	// creation can race istiod's first status write, which istiod drops
	// on a conflict without retrying (pilot/pkg/status/manager.go), so
	// that no status comes until the route changes again.
	eventually(t, "istiod's first status of the route", func(ctx context.Context) bool {
		got, err := client.GatewayV1().HTTPRoutes(ns).Get(ctx, "checkout", metav1.GetOptions{})
		return err == nil && len(got.Status.Parents) == 2
	})
	router, err := gatewayapi.New(gatewayapi.Options{Client: client, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}

	tok, err := router.Apply(ctx, traffic(ns, 20))
	if err != nil {
		t.Fatal(err)
	}
	bounded, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	start := time.Now()
	if v, err := router.Verify(bounded, key, tok); err != nil || !v.Verified {
		t.Fatalf("Verify of a route istiod serves: %+v, %v\nistiod's log:\n%s", v, err, ist.TailLog(6000))
	}
	t.Logf("istiod took the write (both parents) within %v", time.Since(start).Round(time.Millisecond))
	got, err := client.GatewayV1().HTTPRoutes(ns).Get(ctx, "checkout", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Parents) != 2 {
		t.Fatalf("istiod wrote %d parent entries, want one per parentRef: %+v", len(got.Status.Parents), got.Status.Parents)
	}
	for _, st := range got.Status.Parents {
		if st.ControllerName != istiodController {
			t.Errorf("parent %s: controllerName %q, want %q", st.ParentRef.Name, st.ControllerName, istiodController)
		}
	}

	// The canary Service goes: istiod answers the next write with
	// ResolvedRefs False BackendNotFound, which Verify reads as a NACK.
	if err := c.Client.CoreV1().Services(ns).Delete(ctx, "checkout-canary", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	tok, err = router.Apply(ctx, traffic(ns, 50))
	if err != nil {
		t.Fatal(err)
	}
	bounded2, cancel2 := context.WithTimeout(ctx, time.Minute)
	defer cancel2()
	_, err = router.Verify(bounded2, key, tok)
	if !errors.Is(err, gateway.ErrNack) || !strings.Contains(err.Error(), string(gwv1.RouteReasonBackendNotFound)) {
		t.Fatalf("Verify of a route whose canary Service is missing: %v; want a NACK with %s\nistiod's log:\n%s", err, gwv1.RouteReasonBackendNotFound, ist.TailLog(6000))
	}
	t.Logf("NACK: %v", err)
}

// waitIstioClass waits until istiod has created and accepted the
// GatewayClass istio: its Gateway API controller is running. istiod
// answers /ready before that, and on a loaded machine a route written
// in between waits for its first status as long as istiod's caches take
// to sync.
func waitIstioClass(t *testing.T, client gwclient.Interface, ist *kubetest.Istiod) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for {
		gc, err := client.GatewayV1().GatewayClasses().Get(ctx, "istio", metav1.GetOptions{})
		if err == nil && meta.IsStatusConditionTrue(gc.Status.Conditions, string(gwv1.GatewayClassConditionStatusAccepted)) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("GatewayClass istio not Accepted (%v)\nistiod's log:\n%s", err, ist.TailLog(6000))
		case <-time.After(50 * time.Millisecond):
		}
	}
}
