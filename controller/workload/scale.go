package workload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
)

var applyOptions = metav1.ApplyOptions{FieldManager: FieldManager, Force: true}

// cacheCatchUpWait is how long a Scale waits for the informer to deliver
// sluice's last writes of the rollout's sets before it plans from the API
// instead (writeLog.waitCaughtUp).
const cacheCatchUpWait = time.Second

// Scale makes the rollout's ReplicaSets match a: one per set, applied
// whole (server-side, field manager "sluice", forced), adopting an existing
// ReplicaSet of the same hash; then every other ReplicaSet of the rollout
// goes to 0 replicas, those past revisionHistoryLimit are deleted, and the
// named Services are pinned to their side's hash. Calling it again at once
// (after a crash, say) changes nothing. When a set cannot be applied
// nothing is scaled down.
//
// It plans from the informer cache when that is safe (planFromCache: the
// cache holds sluice's own last writes and nothing leaves; a wanted set
// not yet sluice's is looked for by its hash in the API), else from the
// API; and it applies only the sets whose configuration changed
// (writes.go).
func (m *Manager) Scale(ctx context.Context, a rollout.ScaleWorkloads) error {
	key := a.Rollout
	if err := checkPorts(a.Sets); err != nil {
		return fmt.Errorf("scale %s: %w", key, err)
	}
	// Before taking a slot: waiting talks to no apiserver.
	m.writes.waitCaughtUp(ctx, key, cacheCatchUpWait)
	select {
	case m.scaleSlots <- struct{}{}:
		defer func() { <-m.scaleSlots }()
	case <-ctx.Done():
		return fmt.Errorf("scale %s: waiting for one of %d Scales in flight: %w", key, cap(m.scaleSlots), context.Cause(ctx))
	}
	have, plan, source, err := m.planFromCache(ctx, key, a.Sets)
	if err == nil && source == "" {
		have, plan, err = m.planFromAPI(ctx, key, a.Sets)
		source = planFromAPISource
	}
	if err != nil {
		return fmt.Errorf("scale %s: %w", key, err)
	}
	m.metrics.plans.WithLabelValues(source).Inc()
	applied := 0
	for _, step := range stableFirst(plan.Apply) {
		did, err := m.applySet(ctx, key, step, baselineOf(a.Sets, step, have), named(have, step.Name))
		if err != nil {
			return fmt.Errorf("scale %s: %w", key, err)
		}
		if did {
			applied++
		}
	}
	err = errors.Join(m.retireUnwanted(ctx, key, plan, have), m.pinServices(ctx, key, wantedPins(a.Sets)))
	if err != nil {
		return fmt.Errorf("scale %s: %w", key, err)
	}
	m.log.Debug("workload scaled", "rollout", key.String(), "gen", a.Gen, "planned_from", source,
		"applied", applied, "unchanged", len(plan.Apply)-applied, "retired", len(plan.Retire), "deleted", len(plan.Delete))
	return nil
}

// planFromCache plans from the informer cache, and says where it read
// ("" when it could not). It cannot while the cache may not hold one of
// sluice's own writes to the rollout's sets (writes.go), or when a set
// leaves: retiring keeps what sluice applied to it, read from its managed
// fields, which the cache strips, and a deletion should act on the API's
// word. A wanted set that is not yet one of sluice's ReplicaSets may have
// to be adopted from one the cache does not hold (only sluice's are
// cached): the API is asked for the ReplicaSets of those hashes alone (a
// new version's first change: one list, not planFromAPI's two), and the
// rollout's own come from the cache. What is left is a plan that applies
// sets, whole: an apply made on a stale copy is the same apply, so at
// worst it is repeated.
func (m *Manager) planFromCache(ctx context.Context, key api.Key, sets []rollout.WorkloadSet) ([]*appsv1.ReplicaSet, scalePlan, string, error) {
	if !m.writes.caughtUp(key) {
		return nil, scalePlan{}, "", nil
	}
	var have []*appsv1.ReplicaSet
	for _, rs := range m.replicaSetsOf(key) {
		if rs.DeletionTimestamp == nil {
			have = append(have, rs)
		}
	}
	facts := factsOfAll(have, key.Name)
	plan, err := planScale(key.Name, sets, facts, historyLimit(sets))
	if err != nil || len(plan.Retire) > 0 || len(plan.Delete) > 0 {
		return nil, scalePlan{}, "", err
	}
	missing := notYetOurs(sets, facts)
	if len(missing) == 0 {
		return have, plan, planFromCacheSource, nil
	}
	found, err := m.listReplicaSets(ctx, key, LabelHash+" in ("+strings.Join(missing, ",")+")")
	if err != nil {
		return nil, scalePlan{}, "", err
	}
	have = withListed(have, found)
	// An adopted set takes another name than sluice's own, never one of
	// sluice's sets: nothing more leaves than from the cache alone.
	plan, err = planScale(key.Name, sets, factsOfAll(have, key.Name), historyLimit(sets))
	if err != nil || len(plan.Retire) > 0 || len(plan.Delete) > 0 {
		return nil, scalePlan{}, "", err
	}
	return have, plan, planFromCacheAndHashesSource, nil
}

// notYetOurs are the hashes (sorted) of the wanted sets that no ReplicaSet
// of sluice's for the rollout carries yet.
func notYetOurs(sets []rollout.WorkloadSet, facts []replicaSetFacts) []string {
	var missing []string
	for _, s := range sets {
		if !slices.ContainsFunc(facts, func(f replicaSetFacts) bool { return f.Ours && f.Hash == s.Hash }) {
			missing = append(missing, s.Hash)
		}
	}
	sort.Strings(missing)
	return missing
}

// withListed is have with the ReplicaSets the API listed: the API's copy
// of one the cache also holds replaces the cache's.
func withListed(have, listed []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	out := slices.DeleteFunc(slices.Clone(have), func(c *appsv1.ReplicaSet) bool {
		return slices.ContainsFunc(listed, func(l *appsv1.ReplicaSet) bool { return l.UID == c.UID })
	})
	return append(out, listed...)
}

// planFromAPI plans from the rollout's ReplicaSets as the API lists them.
func (m *Manager) planFromAPI(ctx context.Context, key api.Key, sets []rollout.WorkloadSet) ([]*appsv1.ReplicaSet, scalePlan, error) {
	have, err := m.listCandidates(ctx, key, sets)
	if err != nil {
		return nil, scalePlan{}, err
	}
	m.writes.readFromAPI(key)
	plan, err := planScale(key.Name, sets, factsOfAll(have, key.Name), historyLimit(sets))
	return have, plan, err
}

func factsOfAll(have []*appsv1.ReplicaSet, rolloutName string) []replicaSetFacts {
	facts := make([]replicaSetFacts, len(have))
	for i, rs := range have {
		facts[i] = factsOf(rs, rolloutName)
	}
	return facts
}

// named is the ReplicaSet of have with that name; nil if none.
func named(have []*appsv1.ReplicaSet, name string) *appsv1.ReplicaSet {
	for _, rs := range have {
		if rs.Name == name {
			return rs
		}
	}
	return nil
}

// retireUnwanted scales the plan's unwanted ReplicaSets to 0 and deletes
// those past the history, trying every one whatever fails.
func (m *Manager) retireUnwanted(ctx context.Context, key api.Key, plan scalePlan, have []*appsv1.ReplicaSet) error {
	var errs []error
	for _, name := range plan.Retire {
		errs = append(errs, m.retire(ctx, key, named(have, name)))
	}
	for _, name := range plan.Delete {
		errs = append(errs, m.deleteReplicaSet(ctx, key, named(have, name)))
	}
	return errors.Join(errs...)
}

// listCandidates lists, from the API, the rollout's ReplicaSets and any
// other of the namespace carrying one of the wanted hashes (to adopt).
func (m *Manager) listCandidates(ctx context.Context, key api.Key, sets []rollout.WorkloadSet) ([]*appsv1.ReplicaSet, error) {
	selectors := []string{LabelRollout + "=" + key.Name}
	if len(sets) > 0 {
		hashes := make([]string, len(sets))
		for i, s := range sets {
			hashes[i] = s.Hash
		}
		sort.Strings(hashes)
		selectors = append(selectors, LabelHash+" in ("+strings.Join(hashes, ",")+")")
	}
	var out []*appsv1.ReplicaSet
	for _, sel := range selectors {
		list, err := m.listReplicaSets(ctx, key, sel)
		if err != nil {
			return nil, err
		}
		out = withListed(out, list)
	}
	return out, nil
}

// listReplicaSets lists the ReplicaSets of key's namespace that match the
// selector and are not being deleted.
func (m *Manager) listReplicaSets(ctx context.Context, key api.Key, selector string) ([]*appsv1.ReplicaSet, error) {
	list, err := m.client.AppsV1().ReplicaSets(key.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("list replicasets %q: %w", selector, err)
	}
	var out []*appsv1.ReplicaSet
	for i := range list.Items {
		if rs := &list.Items[i]; rs.DeletionTimestamp == nil {
			out = append(out, rs)
		}
	}
	return out, nil
}

// baselineOf is the canary hash a baseline set runs beside: the canary of
// the same Scale for a baseline, what its ReplicaSet already says for a
// draining one (so that its template does not change), "" for any other
// set.
func baselineOf(sets []rollout.WorkloadSet, step applyStep, have []*appsv1.ReplicaSet) string {
	if step.Set.Spec == nil || !isBaseline(step.Set) {
		return ""
	}
	if step.Set.Role == rollout.RoleBaseline {
		for _, s := range sets {
			if s.Role == rollout.RoleCanary {
				return s.Hash
			}
		}
		return ""
	}
	for _, rs := range have {
		if rs.Name == step.Name {
			return rs.Spec.Template.Annotations[api.BaselineOfAnnotation]
		}
	}
	return ""
}

// applySet applies one wanted set, unless current (its ReplicaSet as
// planned on, nil if none) already is what sluice applied (writes.go),
// and says whether it applied.
func (m *Manager) applySet(ctx context.Context, key api.Key, step applyStep, baselineOf string, current *appsv1.ReplicaSet) (bool, error) {
	ac, err := replicaSetApplyBeside(key.Namespace, key.Name, step, m.schedulePods, baselineOf)
	if err != nil {
		return false, fmt.Errorf("replicaset %s: %w", step.Name, err)
	}
	digest, err := digestOf(ac)
	if err != nil {
		return false, fmt.Errorf("replicaset %s: %w", step.Name, err)
	}
	if m.writes.unchanged(current, ac, digest) {
		return false, nil
	}
	rs, err := m.client.AppsV1().ReplicaSets(key.Namespace).Apply(ctx, ac, applyOptions)
	if err != nil {
		m.metrics.applyErrors.WithLabelValues(objectReplicaSet).Inc()
		return false, fmt.Errorf("apply replicaset %s: %w", step.Name, err)
	}
	m.writes.wrote(key, rs.Namespace, rs.Name, rs.ResourceVersion)
	if !podsLabelled(rs) && !createdBySluice(rs) {
		if err := m.labelAdoptedPods(ctx, key, rs); err != nil {
			return true, err
		}
	}
	// Remembered only once its pods are labelled too: a Scale retried
	// after a failed labelling applies (and labels) again.
	m.writes.recordApply(rs, digest)
	return true, nil
}

// podsLabelled: the ReplicaSet controller has seen the set's current
// template and counts every pod of the set as carrying the template's
// labels, sluice's among them (status.fullyLabeledReplicas), so no pod
// needs labelling and the pod list can be spared: re-applying a set of
// sluice's costs one request, not two. After an apply that changed the
// template (an adoption) the generation is ahead of what the controller
// observed, and the pods are listed; a set sluice has just created has
// none to label (createdBySluice), and pods its controller adopts later
// are labelled when its status shows them (relabel.go).
func podsLabelled(rs *appsv1.ReplicaSet) bool {
	return rs.Generation > 0 && rs.Status.ObservedGeneration == rs.Generation &&
		rs.Status.FullyLabeledReplicas == rs.Status.Replicas
}

// labelAdoptedPods gives sluice's labels to the pods an adopted ReplicaSet
// created before sluice applied its template, so that the informers see
// them (readiness, endpoints, status). It lists only pods of the set still
// missing the rollout label, which is none after the first call.
func (m *Manager) labelAdoptedPods(ctx context.Context, key api.Key, rs *appsv1.ReplicaSet) error {
	sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
	if err != nil {
		return fmt.Errorf("replicaset %s selector: %w", rs.Name, err)
	}
	notOurs, err := labels.NewRequirement(LabelRollout, selection.NotEquals, []string{key.Name})
	if err != nil {
		return fmt.Errorf("replicaset %s selector: %w", rs.Name, err)
	}
	pods, err := m.client.CoreV1().Pods(key.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.Add(*notOurs).String()})
	if err != nil {
		return fmt.Errorf("list pods of %s: %w", rs.Name, err)
	}
	// A merge patch, not an apply: applying to a pod deleted meanwhile
	// would try to create it.
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": ourLabels(key.Name, rs.Labels[LabelHash])}})
	if err != nil {
		return fmt.Errorf("encode pod labels: %w", err)
	}
	for _, p := range pods.Items {
		_, err := m.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
		if err != nil && !apierrors.IsNotFound(err) {
			m.metrics.applyErrors.WithLabelValues(objectPod).Inc()
			return fmt.Errorf("label adopted pod %s: %w", p.Name, err)
		}
	}
	return nil
}

// retire scales an unwanted ReplicaSet to 0 and marks it inactive, keeping
// the rest of what sluice applied to it (extracted from its managed fields;
// sluice no longer has the old version's template).
func (m *Manager) retire(ctx context.Context, key api.Key, rs *appsv1.ReplicaSet) error {
	ac, err := appsv1ac.ExtractReplicaSet(rs, FieldManager)
	if err != nil {
		return fmt.Errorf("extract replicaset %s: %w", rs.Name, err)
	}
	if ac.Spec == nil {
		ac.Spec = appsv1ac.ReplicaSetSpec()
	}
	ac.Spec.WithReplicas(0)
	ac.WithAnnotations(map[string]string{AnnotationRole: RoleInactive})
	m.writes.forgetApply(rs.Namespace, rs.Name)
	out, err := m.client.AppsV1().ReplicaSets(rs.Namespace).Apply(ctx, ac, applyOptions)
	if err != nil {
		m.metrics.applyErrors.WithLabelValues(objectReplicaSet).Inc()
		return fmt.Errorf("scale replicaset %s to 0: %w", rs.Name, err)
	}
	m.writes.wrote(key, out.Namespace, out.Name, out.ResourceVersion)
	return nil
}

// deleteReplicaSet removes a ReplicaSet past the revision history; the
// garbage collector removes its pods. It is deleted only if it is still
// the object that was planned on (UID precondition).
func (m *Manager) deleteReplicaSet(ctx context.Context, key api.Key, rs *appsv1.ReplicaSet) error {
	bg := metav1.DeletePropagationBackground
	err := m.client.AppsV1().ReplicaSets(rs.Namespace).Delete(ctx, rs.Name, metav1.DeleteOptions{
		Preconditions:     &metav1.Preconditions{UID: &rs.UID},
		PropagationPolicy: &bg,
	})
	if err != nil && !apierrors.IsNotFound(err) {
		m.metrics.applyErrors.WithLabelValues(objectReplicaSet).Inc()
		return fmt.Errorf("delete replicaset %s: %w", rs.Name, err)
	}
	m.writes.deleted(key, rs.Namespace, rs.Name)
	m.log.Info("replicaset deleted past the revision history", "namespace", rs.Namespace, "replicaset", rs.Name)
	return nil
}

// checkPorts refuses a side that gets its endpoints from its pods (no
// Service named for it) when the pods declare no port to send traffic to.
func checkPorts(sets []rollout.WorkloadSet) error {
	for _, s := range sets {
		if s.Spec == nil || (s.Role != rollout.RoleStable && s.Role != rollout.RoleCanary && s.Role != rollout.RoleBaseline) {
			continue
		}
		if w := s.Spec.Workload; w != nil && (s.Role == rollout.RoleStable && w.StableService != "" ||
			s.Role == rollout.RoleCanary && w.CanaryService != "") {
			continue
		}
		cs := s.Spec.Spec.Template.Spec.Containers
		if len(cs) == 0 || len(cs[0].Ports) > 0 {
			continue
		}
		if s.Role == rollout.RoleBaseline {
			// No Service selects a baseline: its endpoints always come from its pods.
			return fmt.Errorf("baseline of version %s: the first container declares no port: sluice cannot tell where to send its traffic", s.Version)
		}
		return fmt.Errorf("%s version %s: the first container declares no port and no %sService is named: sluice cannot tell where to send its traffic",
			s.Role, s.Version, s.Role)
	}
	return nil
}

// stableFirst orders the applies so that the set taking the stable role is
// written before the one giving it up (a promotion): a crash between the
// two leaves two sets claiming stable, which Recall reads as the newer one
// stable and the other draining, never a rollout with no stable set, which
// recovery could only rebuild from git, from step 1, scaling the promoted
// canary's pods down under traffic.
func stableFirst(steps []applyStep) []applyStep {
	out := slices.Clone(steps)
	giving := func(s applyStep) int {
		if s.Set.Role == rollout.RoleOld {
			return 1
		}
		return 0
	}
	slices.SortStableFunc(out, func(a, b applyStep) int { return giving(a) - giving(b) })
	return out
}
