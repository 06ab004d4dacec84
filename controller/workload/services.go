package workload

import (
	"context"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// servicePins records which hash each named Service of a rollout selects,
// as the last Scale set it.
type servicePins struct {
	// service name → pod-template hash
	hashOf map[string]string
}

// servicesFor are the Services pinned to hash, sorted (none: the
// endpoints then come from the pods). With no canary running both Services
// select the stable hash.
func (p servicePins) servicesFor(hash string) []string {
	var out []string
	for svc, h := range p.hashOf {
		if h == hash {
			out = append(out, svc)
		}
	}
	slices.Sort(out)
	return out
}

// wantedPins pins stableService to the stable set's hash and canaryService
// to the canary's, or to stable's when no canary runs, as Argo does.
func wantedPins(sets []rollout.WorkloadSet) map[string]string {
	var stable, canary string
	var w *api.Workload
	for _, s := range sets {
		switch s.Role {
		case rollout.RoleStable:
			stable = s.Hash
		case rollout.RoleCanary:
			canary = s.Hash
		}
		if s.Spec != nil && s.Spec.Workload != nil && (w == nil || s.Role == rollout.RoleCanary) {
			w = s.Spec.Workload
		}
	}
	if canary == "" {
		canary = stable
	}
	pins := map[string]string{}
	if w == nil {
		return pins
	}
	// When one Service is named for both sides, the canary's pin wins: it
	// is the side whose endpoints must not lag.
	if w.StableService != "" && stable != "" {
		pins[w.StableService] = stable
	}
	if w.CanaryService != "" && canary != "" {
		pins[w.CanaryService] = canary
	}
	return pins
}

// pinServices sets each named Service's selector to include its side's
// hash, as Argo does. A Service's selector is an atomic map for
// server-side apply, so sluice applies the whole selector (the user's keys
// plus the hash) and nothing else of the Service; an unchanged selector is
// not written. A missing Service is an error.
func (m *Manager) pinServices(ctx context.Context, key api.Key, pins map[string]string) error {
	for svc, hash := range pins {
		cur, err := m.client.CoreV1().Services(key.Namespace).Get(ctx, svc, metav1.GetOptions{})
		if err != nil {
			m.metrics.applyErrors.WithLabelValues(objectService).Inc()
			return fmt.Errorf("service %s/%s: %w", key.Namespace, svc, err)
		}
		if cur.Spec.Selector[LabelHash] == hash {
			continue
		}
		selector := withLabels(cur.Spec.Selector, map[string]string{LabelHash: hash})
		ac := corev1ac.Service(svc, key.Namespace).
			WithSpec(corev1ac.ServiceSpec().WithSelector(selector))
		if _, err := m.client.CoreV1().Services(key.Namespace).Apply(ctx, ac, applyOptions); err != nil {
			m.metrics.applyErrors.WithLabelValues(objectService).Inc()
			return fmt.Errorf("pin service %s/%s to %s: %w", key.Namespace, svc, hash, err)
		}
	}
	m.setPins(key, pins)
	return nil
}

func (m *Manager) setPins(key api.Key, pins map[string]string) {
	m.pinsMu.Lock()
	for svc := range m.pins[key].hashOf {
		delete(m.pinnedBy, key.Namespace+"/"+svc)
	}
	if len(pins) == 0 {
		delete(m.pins, key)
	} else {
		m.pins[key] = servicePins{hashOf: pins}
	}
	for svc := range pins {
		m.pinnedBy[key.Namespace+"/"+svc] = key
	}
	m.pinsMu.Unlock()
	m.queue.Add(key)
}

func (m *Manager) pinsOf(key api.Key) servicePins {
	m.pinsMu.RLock()
	defer m.pinsMu.RUnlock()
	return m.pins[key]
}

// rolloutOfService finds the rollout that pinned a Service.
func (m *Manager) rolloutOfService(namespace, svc string) (api.Key, bool) {
	m.pinsMu.RLock()
	defer m.pinsMu.RUnlock()
	key, ok := m.pinnedBy[namespace+"/"+svc]
	return key, ok
}
