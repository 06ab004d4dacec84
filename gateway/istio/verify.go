package istio

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/gateway"
	istioanalysis "istio.io/api/analysis/v1alpha1"
	istiometa "istio.io/api/meta/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Verification is Verify's answer when the write was taken: Verified
// when istiod reported every object reconciled at the written generation
// or later, else the reason in Message.
type Verification = gateway.Verification

// UnverifiedMessage is Verify's message when Istio reports no status.
const UnverifiedMessage = "weight unverified: Istio reports no status (enable istiod's status reporting, PILOT_ENABLE_STATUS)"

// tokenObject is one object Apply wrote and the generation it wrote.
type tokenObject struct {
	Resource   string `json:"resource"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	Generation int64  `json:"generation"`
	// Hosts and Routes (VirtualServices only) are what a proxyless client
	// of istiod must receive for the write to count as applied, when
	// the router observes istiod (meshview.go).
	Hosts  []string    `json:"hosts,omitempty"`
	Routes []routeWant `json:"routes,omitempty"`
}

// token is what Apply hands to Verify: every object and its generation.
type token []tokenObject

func (t token) String() string {
	if len(t) == 0 {
		return ""
	}
	b, _ := json.Marshal(t)
	return string(b)
}

func parseToken(s string) (token, error) {
	var t token
	if s == "" {
		return nil, nil
	}
	if err := json.Unmarshal([]byte(s), &t); err != nil {
		return nil, fmt.Errorf("istio token %q: %w", s, err)
	}
	return t, nil
}

// verdict is one object's state with respect to a write.
type verdict int

const (
	pending    verdict = iota // not observed yet, or istiod not done
	noStatus                  // observed; Istio writes no status
	reconciled                // istiod reported it reconciled
)

// Verify waits until every object in tok is observed at the generation
// Apply wrote. With an observer of istiod (RouterOptions.IstiodXDS), a
// VirtualService's write counts as applied when the routes istiod sends a
// proxyless client carry the split Apply wrote (meshview.go): Verified
// true. A DestinationRule carries no weights: with the observer it counts
// once its generation reads back (the routes observed name its subsets).
// Without an observer, or for a VirtualService proxyless clients cannot
// see (bound to gateways only), it falls back to istiod's status: Istio
// writes none by default, and then the answer is Verified false with
// UnverifiedMessage once a re-read shows the write. With istiod's status
// reporting on (status.observedGeneration and the Reconciled condition),
// it waits for observedGeneration at or past the write and Reconciled True
// (Verified true). A validation message of level ERROR at that generation
// is a rejection: the error wraps gateway.ErrNack. Otherwise it waits
// until ctx ends.
func (r *Router) Verify(ctx context.Context, key api.Key, tok string) (Verification, error) {
	objs, err := parseToken(tok)
	if err != nil || len(objs) == 0 {
		return Verification{Verified: true}, err
	}
	if r.observer != nil {
		for _, o := range objs {
			r.observer.Watch(o.Hosts...)
		}
	}
	verdicts := make([]verdict, len(objs))
	var why string // what the observer still misses, for the error at the end
	round := func() (bool, error) {
		done := true
		for i, o := range objs {
			if verdicts[i] != pending {
				continue
			}
			v, err := r.check(ctx, key, o)
			if err != nil {
				return false, err
			}
			if v != pending && r.observer != nil && len(o.Hosts) > 0 {
				v, why = r.observed(o)
			}
			verdicts[i] = v
			done = done && v != pending
		}
		return done, nil
	}
	for {
		// Taken before the round: a change during it wakes the next one.
		changed := r.observerChanged()
		done, err := round()
		if err != nil {
			return Verification{}, err
		}
		if done {
			break
		}
		select {
		case <-ctx.Done():
			if r.observer != nil && why != "" {
				return Verification{}, fmt.Errorf("rollout %s: istio: %s: %w", key, why, ctx.Err())
			}
			return Verification{}, ctx.Err()
		case <-time.After(r.poll):
		case <-changed:
		}
	}
	for _, v := range verdicts {
		if v == noStatus {
			return Verification{Message: UnverifiedMessage}, nil
		}
	}
	return Verification{Verified: true}, nil
}

// observerChanged is closed at the observer's next change (nil, never
// ready, without an observer), so that Verify sees a push at once rather
// than at its next poll.
func (r *Router) observerChanged() <-chan struct{} {
	if r.observer == nil {
		return nil
	}
	return r.observer.Changed()
}

// observed compares what the observer holds for a VirtualService's hosts
// with what Apply wrote into it.
func (r *Router) observed(o tokenObject) (verdict, string) {
	var got []*routev3.Route
	for _, h := range o.Hosts {
		got = append(got, r.observer.Routes(h)...)
	}
	if ok, why := routesShow(got, o.Namespace, o.Name, o.Routes); !ok {
		return pending, fmt.Sprintf("%s/%s: %s", o.Namespace, o.Name, why)
	}
	return reconciled, ""
}

// check reads one object once. With an observer, an object at the written
// generation is reconciled as far as its status goes (the observer decides
// for a VirtualService it can see).
func (r *Router) check(ctx context.Context, key api.Key, o tokenObject) (verdict, error) {
	res := schema.GroupVersionResource{Group: VirtualServices.Group, Version: VirtualServices.Version, Resource: o.Resource}
	obj, err := r.client.Resource(res).Namespace(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
	if err != nil {
		// A read that fails (the API server restarting) is tried again
		// at the next poll; a deleted object never verifies.
		if ignoreNotFound(err) == nil {
			return pending, fmt.Errorf("rollout %s: %s %s/%s was deleted: %w", key, o.Resource, o.Namespace, o.Name, err)
		}
		r.log.Debug("istio: verify read failed", "rollout", key, "object", o.Name, "err", err)
		return pending, nil
	}
	if obj.GetGeneration() < o.Generation {
		return pending, nil
	}
	st, ok := istioStatus(obj)
	if !ok {
		if r.observer != nil && (o.Resource == DestinationRules.Resource || len(o.Hosts) > 0) {
			return reconciled, nil
		}
		return noStatus, nil
	}
	if st.GetObservedGeneration() < o.Generation {
		return pending, nil
	}
	if msg := validationErrors(st); msg != "" {
		return pending, fmt.Errorf("rollout %s: istiod rejected %s %s/%s at generation %d: %s: %w", key, o.Resource, o.Namespace, o.Name, st.GetObservedGeneration(), msg, gateway.ErrNack)
	}
	if reconciledAt(st, o.Generation) {
		return reconciled, nil
	}
	return pending, nil
}

// istioStatus reads the status istiod's status reporting writes, with
// Istio's own type (its JSON takes observedGeneration as a number or, the
// protobuf JSON way istiod writes int64s, as a string). false: no status,
// or one that is not istiod's (neither observedGeneration nor
// conditions).
func istioStatus(obj *unstructured.Unstructured) (*istiometa.IstioStatus, bool) {
	raw, ok := obj.Object["status"]
	if !ok {
		return nil, false
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, false
	}
	st := &istiometa.IstioStatus{}
	if err := st.UnmarshalJSON(b); err != nil {
		return nil, false
	}
	if st.GetObservedGeneration() == 0 && len(st.GetConditions()) == 0 {
		return nil, false
	}
	return st, true
}

// reconciledAt reports a Reconciled condition with status True that is not
// older than gen (a condition's own observedGeneration, when it has one).
func reconciledAt(st *istiometa.IstioStatus, gen int64) bool {
	for _, c := range st.GetConditions() {
		if c.GetType() != "Reconciled" || c.GetStatus() != "True" {
			continue
		}
		if g := c.GetObservedGeneration(); g != 0 && g < gen {
			continue
		}
		return true
	}
	return false
}

// validationErrors joins the ERROR-level validation messages of Istio's
// analysis ("IST0101 ReferencedResourceNotFound (url)").
func validationErrors(st *istiometa.IstioStatus) string {
	var out []string
	for _, m := range st.GetValidationMessages() {
		if m.GetLevel() != istioanalysis.AnalysisMessageBase_ERROR {
			continue
		}
		s := strings.TrimSpace(m.GetType().GetCode() + " " + m.GetType().GetName())
		if url := m.GetDocumentationUrl(); url != "" {
			s += " (" + url + ")"
		}
		out = append(out, s)
	}
	return strings.Join(out, "; ")
}
