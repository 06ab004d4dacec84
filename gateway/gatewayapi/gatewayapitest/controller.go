package gatewayapitest

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
)

// ControllerName is the fake gateway controller's name in route status.
const ControllerName gwv1.GatewayController = "example.net/fake-gateway"

// Verdict is what the fake controller says about a route's generation.
type Verdict int

const (
	// Accept: Accepted and ResolvedRefs True (the default).
	Accept Verdict = iota
	// Hold: no status written for the new generation (a slow gateway).
	Hold
	// Reject: Accepted False, reason NotAllowedByListeners.
	Reject
)

// RejectReason is the reason a rejected route's Accepted condition has.
const RejectReason = "NotAllowedByListeners"

// Controller plays the gateway controller of every route in the cluster:
// Run writes each route's status for its latest generation, per the
// route's Verdict. Kinds other than HTTPRoute and GRPCRoute (an Istio
// VirtualService, say) can be added as another status writer beside it.
type Controller struct {
	Client gwclient.Interface

	mu       sync.Mutex
	verdicts map[string]Verdict // "namespace/name" -> verdict; Accept when absent
}

// NewController returns a controller that accepts every route.
func NewController(c gwclient.Interface) *Controller {
	return &Controller{Client: c, verdicts: map[string]Verdict{}}
}

// Set makes the controller answer v for the route ns/name from now on.
func (c *Controller) Set(ns, name string, v Verdict) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.verdicts[ns+"/"+name] = v
}

func (c *Controller) verdict(ns, name string) Verdict {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.verdicts[ns+"/"+name]
}

// Run writes status every interval until ctx ends.
func (c *Controller) Run(ctx context.Context, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		c.Sync(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Sync writes the status of every route once.
func (c *Controller) Sync(ctx context.Context) {
	if hs, err := c.Client.GatewayV1().HTTPRoutes("").List(ctx, metav1.ListOptions{}); err == nil {
		for i := range hs.Items {
			r := &hs.Items[i]
			if st, ok := c.status(r.ObjectMeta, r.Spec.ParentRefs, r.Status.Parents); ok {
				r.Status.Parents = st
				_, _ = c.Client.GatewayV1().HTTPRoutes(r.Namespace).UpdateStatus(ctx, r, metav1.UpdateOptions{})
			}
		}
	}
	if gs, err := c.Client.GatewayV1().GRPCRoutes("").List(ctx, metav1.ListOptions{}); err == nil {
		for i := range gs.Items {
			r := &gs.Items[i]
			if st, ok := c.status(r.ObjectMeta, r.Spec.ParentRefs, r.Status.Parents); ok {
				r.Status.Parents = st
				_, _ = c.Client.GatewayV1().GRPCRoutes(r.Namespace).UpdateStatus(ctx, r, metav1.UpdateOptions{})
			}
		}
	}
}

// status is the route's new status.parents, and whether it changed.
func (c *Controller) status(m metav1.ObjectMeta, refs []gwv1.ParentReference, old []gwv1.RouteParentStatus) ([]gwv1.RouteParentStatus, bool) {
	v := c.verdict(m.Namespace, m.Name)
	if v == Hold {
		return nil, false
	}
	accepted := metav1.Condition{Type: string(gwv1.RouteConditionAccepted), Status: metav1.ConditionTrue, Reason: string(gwv1.RouteReasonAccepted), Message: "accepted by the fake gateway"}
	if v == Reject {
		accepted = metav1.Condition{Type: string(gwv1.RouteConditionAccepted), Status: metav1.ConditionFalse, Reason: RejectReason, Message: "no listener of the fake gateway allows this route"}
	}
	resolved := metav1.Condition{Type: string(gwv1.RouteConditionResolvedRefs), Status: metav1.ConditionTrue, Reason: string(gwv1.RouteReasonResolvedRefs), Message: "all references resolved"}
	var out []gwv1.RouteParentStatus
	for _, ref := range refs {
		conds := []metav1.Condition{accepted, resolved}
		for i := range conds {
			conds[i].ObservedGeneration = m.Generation
			conds[i].LastTransitionTime = metav1.NewTime(time.Now().Truncate(time.Second))
		}
		out = append(out, gwv1.RouteParentStatus{ParentRef: ref, ControllerName: ControllerName, Conditions: conds})
	}
	if sameVerdict(old, out) {
		return nil, false
	}
	return out, true
}

// sameVerdict reports whether old already says what out says, so that
// Sync does not rewrite status (and bump resourceVersion) needlessly.
func sameVerdict(old, out []gwv1.RouteParentStatus) bool {
	if len(old) != len(out) {
		return false
	}
	for i := range old {
		if len(old[i].Conditions) != len(out[i].Conditions) {
			return false
		}
		for j, c := range old[i].Conditions {
			n := out[i].Conditions[j]
			if c.Type != n.Type || c.Status != n.Status || c.ObservedGeneration != n.ObservedGeneration {
				return false
			}
		}
	}
	return true
}
