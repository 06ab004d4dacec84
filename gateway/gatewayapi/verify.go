package gatewayapi

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/gateway"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Verify waits until every parent of every route the token names
// reports the write taken: Accepted and ResolvedRefs True with an
// observedGeneration at least the generation written. A parent that
// reports either False at that generation rejected the write: the error
// wraps gateway.ErrNack with the condition's reason and message.
func (r *Router) Verify(ctx context.Context, key api.Key, token string) (gateway.Verification, error) {
	if token == "" {
		return gateway.Verification{Verified: true}, nil
	}
	var ws []written
	if err := json.Unmarshal([]byte(token), &ws); err != nil {
		return gateway.Verification{}, fmt.Errorf("token: %w", err)
	}
	for _, w := range ws {
		if err := r.waitTaken(ctx, w); err != nil {
			return gateway.Verification{}, fmt.Errorf("rollout %s: %s %s/%s: %w", key, w.Kind, w.Namespace, w.Name, err)
		}
	}
	return gateway.Verification{Verified: true}, nil
}

// waitTaken polls the route's status until every parent took generation
// w.Generation (nil), one rejected it (ErrNack), or ctx ends.
func (r *Router) waitTaken(ctx context.Context, w written) error {
	var pending string
	err := wait.PollUntilContextCancel(ctx, r.opts.PollInterval, true, func(ctx context.Context) (bool, error) {
		parents, status, err := r.routeParents(ctx, w)
		switch {
		case apierrors.IsNotFound(err):
			return false, err
		case err != nil:
			// A failed read (the apiserver is busy) is not the gateway's
			// answer: read again until ctx ends.
			if pending == "" {
				pending = "route not read: " + err.Error()
			}
			return false, nil
		}
		pending, err = parentsTook(w.Namespace, parents, status, w.Generation)
		return pending == "" && err == nil, err
	})
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("not verified (%s): %w", pending, ctx.Err())
	}
	return err
}

func (r *Router) routeParents(ctx context.Context, w written) ([]gwv1.ParentReference, []gwv1.RouteParentStatus, error) {
	switch w.Kind {
	case "HTTPRoute":
		route, err := r.opts.Client.GatewayV1().HTTPRoutes(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
		if err != nil {
			return nil, nil, err
		}
		return route.Spec.ParentRefs, route.Status.Parents, nil
	case "GRPCRoute":
		route, err := r.opts.Client.GatewayV1().GRPCRoutes(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
		if err != nil {
			return nil, nil, err
		}
		return route.Spec.ParentRefs, route.Status.Parents, nil
	}
	return nil, nil, fmt.Errorf("unknown route kind %q", w.Kind)
}

// ErrNoParents is the NACK of a route with no parentRefs: no gateway
// serves it, so no weight written into it reaches any traffic. Verifying
// it at once would let analysis judge traffic no proxy ever took.
var ErrNoParents = fmt.Errorf("no parentRefs: no gateway serves this route: %w", gateway.ErrNack)

// parentsTook checks every parentRef's status entries: it returns what
// is still pending ("" when all took gen), or an error wrapping ErrNack
// when a parent rejected gen or there is no parent. A parent without a
// status entry is pending.
func parentsTook(ns string, refs []gwv1.ParentReference, status []gwv1.RouteParentStatus, gen int64) (string, error) {
	if len(refs) == 0 {
		return "", ErrNoParents
	}
	var pending []string
	for _, ref := range refs {
		seen := false
		for _, st := range status {
			if !sameParent(ns, ref, st.ParentRef) {
				continue
			}
			seen = true
			for _, ct := range []string{string(gwv1.RouteConditionAccepted), string(gwv1.RouteConditionResolvedRefs)} {
				c := findCondition(st.Conditions, ct)
				switch {
				case c == nil || c.ObservedGeneration < gen:
					pending = append(pending, fmt.Sprintf("parent %s has no %s at generation %d", parentName(ns, ref), ct, gen))
				case c.Status == metav1.ConditionFalse:
					return "", fmt.Errorf("parent %s (%s): %s False: %s: %s: %w", parentName(ns, ref), st.ControllerName, ct, c.Reason, c.Message, gateway.ErrNack)
				case c.Status != metav1.ConditionTrue:
					pending = append(pending, fmt.Sprintf("parent %s %s is %s", parentName(ns, ref), ct, c.Status))
				}
			}
		}
		if !seen {
			pending = append(pending, "parent "+parentName(ns, ref)+" reports no status")
		}
	}
	return strings.Join(pending, "; "), nil
}

func findCondition(cs []metav1.Condition, t string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}

// sameParent compares parent references with Gateway API's defaults
// (group gateway.networking.k8s.io, kind Gateway, the route's namespace),
// section and port included: a controller's status entry repeats the
// parentRef it answers for.
func sameParent(ns string, a, b gwv1.ParentReference) bool {
	return parentName(ns, a) == parentName(ns, b)
}

// parentName names a parent for status messages and comparison:
// "Gateway.gateway.networking.k8s.io shop/edge section http", or for a
// GAMMA parent (a core Service, whose group is "") "Service shop/checkout
// port 8080".
func parentName(ns string, p gwv1.ParentReference) string {
	group, kind, pns := gwv1.GroupName, "Gateway", ns
	if p.Group != nil {
		group = string(*p.Group)
	}
	if p.Kind != nil {
		kind = string(*p.Kind)
	}
	if p.Namespace != nil {
		pns = string(*p.Namespace)
	}
	name := kind
	if group != "" {
		name += "." + group
	}
	name += " " + pns + "/" + string(p.Name)
	if p.SectionName != nil {
		name += " section " + string(*p.SectionName)
	}
	if p.Port != nil {
		name += fmt.Sprintf(" port %d", *p.Port)
	}
	return name
}
