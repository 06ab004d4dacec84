package kubeservice

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/gateway"
)

// hashLabel is the pods' pod-template-hash label (Argo's).
const hashLabel = v1alpha1.DefaultRolloutUniqueLabelKey

// fieldManager owns the selectors sluice writes (the workload actuator's).
const fieldManager = "sluice"

// pollInterval is how often Verify reads the EndpointSlices back.
const pollInterval = 100 * time.Millisecond

// Router pins blue-green Services to versions.
type Router struct {
	client kubernetes.Interface
	log    *slog.Logger
}

var _ gateway.ClusterRouter = (*Router)(nil)

// New returns a router writing through client.
func New(client kubernetes.Interface, log *slog.Logger) *Router {
	return &Router{client: client, log: log}
}

// Name is the router's name in logs and status.
func (r *Router) Name() string { return "services" }

// pin is one Service selecting one pod-template hash.
type pin struct {
	Namespace string `json:"namespace"`
	Service   string `json:"service"`
	Hash      string `json:"hash"`
}

// pins are the Services t's rollout names and the hash each must select:
// the active Service the side with all the traffic, the preview Service
// the canary side (which carries the stable version when no canary runs).
func pins(t api.Traffic) []pin {
	rt := t.Routing
	if rt == nil || rt.ActiveService == "" {
		return nil
	}
	active := t.StableWorkload
	if t.Weights.Canary >= 100 {
		active = t.CanaryWorkload
	}
	out := []pin{{t.Rollout.Namespace, rt.ActiveService, active}}
	if rt.PreviewService != "" {
		out = append(out, pin{t.Rollout.Namespace, rt.PreviewService, t.CanaryWorkload})
	}
	return out
}

// Apply sets each Service's selector; the token lists the pins for Verify.
func (r *Router) Apply(ctx context.Context, t api.Traffic) (string, error) {
	ps := pins(t)
	if len(ps) == 0 {
		return "", nil
	}
	for _, p := range ps {
		if p.Hash == "" {
			return "", fmt.Errorf("service %s/%s: no pod-template hash to select", p.Namespace, p.Service)
		}
		if err := r.pin(ctx, p); err != nil {
			return "", err
		}
	}
	b, err := json.Marshal(ps)
	if err != nil {
		return "", fmt.Errorf("services token: %w", err)
	}
	return string(b), nil
}

// pin applies the whole selector (the user's keys plus the hash): a
// Service's selector is an atomic map for server-side apply. An unchanged
// selector is not written; a missing Service is an error that holds the
// step, as for any router.
func (r *Router) pin(ctx context.Context, p pin) error {
	svcs := r.client.CoreV1().Services(p.Namespace)
	cur, err := svcs.Get(ctx, p.Service, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("service %s/%s: %w", p.Namespace, p.Service, err)
	}
	if cur.Spec.Selector[hashLabel] == p.Hash {
		return nil
	}
	selector := maps.Clone(cur.Spec.Selector)
	if selector == nil {
		selector = map[string]string{}
	}
	selector[hashLabel] = p.Hash
	ac := corev1ac.Service(p.Service, p.Namespace).WithSpec(corev1ac.ServiceSpec().WithSelector(selector))
	if _, err := svcs.Apply(ctx, ac, metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
		return fmt.Errorf("select %s in service %s/%s: %w", p.Hash, p.Namespace, p.Service, err)
	}
	r.log.Info("service switched", "service", p.Namespace+"/"+p.Service, "hash", p.Hash)
	return nil
}

// Verify waits until every pinned Service's EndpointSlices hold Ready
// endpoints of its hash's pods and no others.
func (r *Router) Verify(ctx context.Context, _ api.Key, token string) (gateway.Verification, error) {
	if token == "" {
		return gateway.Verification{Verified: true}, nil
	}
	var ps []pin
	if err := json.Unmarshal([]byte(token), &ps); err != nil {
		return gateway.Verification{}, fmt.Errorf("services token %q: %w", token, err)
	}
	for _, p := range ps {
		if err := r.waitServed(ctx, p); err != nil {
			return gateway.Verification{}, err
		}
	}
	return gateway.Verification{Verified: true}, nil
}

// waitServed polls until p's Service serves only p's pods.
func (r *Router) waitServed(ctx context.Context, p pin) error {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		ok, err := r.served(ctx, p)
		if err != nil {
			return fmt.Errorf("service %s/%s: %w", p.Namespace, p.Service, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("service %s/%s does not serve only %s yet: %w", p.Namespace, p.Service, p.Hash, ctx.Err())
		case <-t.C:
		}
	}
}

// served reports whether the Service's ready endpoints are exactly within
// the Ready pods of p.Hash, and there is at least one.
func (r *Router) served(ctx context.Context, p pin) (bool, error) {
	pods, err := r.client.CoreV1().Pods(p.Namespace).List(ctx, metav1.ListOptions{LabelSelector: labels.Set{hashLabel: p.Hash}.String()})
	if err != nil {
		return false, err
	}
	ips := map[string]bool{}
	for _, pod := range pods.Items {
		for _, ip := range pod.Status.PodIPs {
			ips[ip.IP] = true
		}
	}
	slices, err := r.client.DiscoveryV1().EndpointSlices(p.Namespace).List(ctx, metav1.ListOptions{LabelSelector: labels.Set{discoveryv1.LabelServiceName: p.Service}.String()})
	if err != nil {
		return false, err
	}
	ready := 0
	for _, s := range slices.Items {
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			for _, a := range ep.Addresses {
				if !ips[a] {
					return false, nil
				}
				ready++
			}
		}
	}
	return ready > 0, nil
}

// Release leaves the Services as they are: they select the last stable
// version, which keeps running when sluice stops managing the rollout.
func (r *Router) Release(context.Context, api.Key, *api.ClusterRouting) error { return nil }
