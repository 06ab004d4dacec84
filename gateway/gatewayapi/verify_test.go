package gatewayapi

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/gateway"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// istiodEntry is a status.parents entry as istiod writes it (seen in
// TestVerifyIstiod): the parentRef as the route spells it, controller
// istio.io/gateway-controller for Gateway and GAMMA (Service) parents
// alike, Accepted and ResolvedRefs at gen.
func istiodEntry(ref gwv1.ParentReference, gen int64, resolved metav1.ConditionStatus, reason string) gwv1.RouteParentStatus {
	return gwv1.RouteParentStatus{
		ParentRef:      ref,
		ControllerName: "istio.io/gateway-controller",
		Conditions: []metav1.Condition{
			{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", Message: "Route was valid", ObservedGeneration: gen},
			{Type: "ResolvedRefs", Status: resolved, Reason: reason, Message: "backend(checkout-canary.shop.svc.cluster.local) not found", ObservedGeneration: gen},
		},
	}
}

var (
	meshParent = gwv1.ParentReference{Group: ptr.To(gwv1.Group("")), Kind: ptr.To(gwv1.Kind("Service")),
		Name: "checkout", Port: ptr.To(gwv1.PortNumber(8080))}
	edgeParent = gwv1.ParentReference{Group: ptr.To(gwv1.Group(gwv1.GroupName)), Kind: ptr.To(gwv1.Kind("Gateway")), Name: "edge"}
)

func TestParentsTook(t *testing.T) {
	otherPort := meshParent
	otherPort.Port = ptr.To(gwv1.PortNumber(9090))
	explicitNS := edgeParent
	explicitNS.Namespace = ptr.To(gwv1.Namespace("shop"))
	stale := istiodEntry(meshParent, 6, metav1.ConditionTrue, "ResolvedRefs")
	stale.ControllerName = "example.net/other-mesh"
	for _, tc := range []struct {
		name    string
		refs    []gwv1.ParentReference
		status  []gwv1.RouteParentStatus
		pending string // a substring of what is pending; "" for taken
		nack    string // a substring of the NACK; "" for none
	}{
		{name: "GAMMA and Gateway parents taken",
			refs:   []gwv1.ParentReference{meshParent, edgeParent},
			status: []gwv1.RouteParentStatus{istiodEntry(meshParent, 7, "True", "ResolvedRefs"), istiodEntry(edgeParent, 7, "True", "ResolvedRefs")}},
		{name: "a later generation is taken too",
			refs:   []gwv1.ParentReference{meshParent},
			status: []gwv1.RouteParentStatus{istiodEntry(meshParent, 8, "True", "ResolvedRefs")}},
		{name: "the namespace spelled out is the route's",
			refs:   []gwv1.ParentReference{edgeParent},
			status: []gwv1.RouteParentStatus{istiodEntry(explicitNS, 7, "True", "ResolvedRefs")}},
		{name: "an earlier generation is pending",
			refs:    []gwv1.ParentReference{meshParent},
			status:  []gwv1.RouteParentStatus{istiodEntry(meshParent, 6, "True", "ResolvedRefs")},
			pending: "parent Service shop/checkout port 8080 has no Accepted at generation 7"},
		{name: "the same Service on another port is another parent",
			refs:    []gwv1.ParentReference{meshParent},
			status:  []gwv1.RouteParentStatus{istiodEntry(otherPort, 7, "True", "ResolvedRefs")},
			pending: "parent Service shop/checkout port 8080 reports no status"},
		{name: "every controller that answers for the parent must take it",
			refs:    []gwv1.ParentReference{meshParent},
			status:  []gwv1.RouteParentStatus{istiodEntry(meshParent, 7, "True", "ResolvedRefs"), stale},
			pending: "has no Accepted at generation 7"},
		{name: "a missing backend is a NACK with istiod's reason",
			refs:   []gwv1.ParentReference{meshParent, edgeParent},
			status: []gwv1.RouteParentStatus{istiodEntry(meshParent, 7, "False", "BackendNotFound"), istiodEntry(edgeParent, 7, "True", "ResolvedRefs")},
			nack:   "parent Service shop/checkout port 8080 (istio.io/gateway-controller): ResolvedRefs False: BackendNotFound: backend(checkout-canary.shop.svc.cluster.local) not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pending, err := parentsTook("shop", tc.refs, tc.status, 7)
			switch {
			case tc.nack != "":
				if !errors.Is(err, gateway.ErrNack) || !strings.Contains(err.Error(), tc.nack) {
					t.Fatalf("got %q, %v; want a NACK containing %q", pending, err, tc.nack)
				}
			case err != nil:
				t.Fatalf("unexpected error %v", err)
			case tc.pending == "" && pending != "":
				t.Fatalf("pending %q; want taken", pending)
			case !strings.Contains(pending, tc.pending):
				t.Fatalf("pending %q; want it to contain %q", pending, tc.pending)
			}
		})
	}
}
