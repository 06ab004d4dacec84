package workload

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// errNoTemplate: a workloadRef rollout has no pod template of its own.
var errNoTemplate = errors.New("rollout has no pod template (spec.template.spec.containers is empty)")

// replicaSetApply is the whole desired ReplicaSet of one set: everything
// sluice owns of it, so that re-applying it is a no-op and a field sluice
// stops setting is removed.
func replicaSetApply(namespace, rolloutName string, step applyStep, schedulePods bool) (*appsv1ac.ReplicaSetApplyConfiguration, error) {
	return replicaSetApplyBeside(namespace, rolloutName, step, schedulePods, "")
}

// replicaSetApplyBeside is replicaSetApply for a set that runs beside the
// canary of hash canary (a baseline): its pods carry
// api.BaselineOfAnnotation so that the scheduler places them in the
// canary's zones.
func replicaSetApplyBeside(namespace, rolloutName string, step applyStep, schedulePods bool, canary string) (*appsv1ac.ReplicaSetApplyConfiguration, error) {
	s := step.Set
	if s.Spec == nil {
		return nil, fmt.Errorf("set %s (%s): no rollout spec", s.Role, s.Version)
	}
	spec := s.Spec.Spec
	if len(spec.Template.Spec.Containers) == 0 {
		return nil, errNoTemplate
	}
	ours := ourLabels(rolloutName, s.Hash)
	tmpl := spec.Template.DeepCopy()
	selector := spec.Selector
	if isExperiment(s) {
		tmpl, selector = experimentPodTemplate(s), experimentSelector(s)
	} else if isBaseline(s) {
		tmpl = api.BaselineTemplate(&spec.Template)
		if canary != "" {
			if tmpl.Annotations == nil {
				tmpl.Annotations = map[string]string{}
			}
			tmpl.Annotations[api.BaselineOfAnnotation] = canary
		}
	}
	tmpl.Labels = withLabels(tmpl.Labels, ours)
	if schedulePods {
		tmpl.Spec.SchedulerName = SchedulerName
	}
	template, err := templateApply(tmpl)
	if err != nil {
		return nil, err
	}
	return appsv1ac.ReplicaSet(step.Name, namespace).
		WithLabels(ours).
		WithAnnotations(setAnnotations(s, step.Revision)).
		WithSpec(appsv1ac.ReplicaSetSpec().
			WithReplicas(s.Replicas).
			WithMinReadySeconds(spec.MinReadySeconds).
			WithSelector(selectorApply(selector, s.Hash)).
			WithTemplate(template)), nil
}

// setAnnotations are the ReplicaSet's annotations: version, revision,
// role and, on the canary's, its position and whether it was aborted.
func setAnnotations(s rollout.WorkloadSet, revision int64) map[string]string {
	a := map[string]string{
		AnnotationVersion:  s.Version,
		AnnotationRevision: strconv.FormatInt(revision, 10),
		AnnotationRole:     string(s.Role),
	}
	if s.At != nil {
		a[AnnotationStep] = strconv.Itoa(int(s.At.Step))
		a[AnnotationWeight] = strconv.Itoa(int(s.At.Weight))
	}
	if s.Aborted {
		a[AnnotationAborted] = "true"
	}
	return a
}

// isBaseline reports whether s runs the baseline of its spec's version:
// by hash rather than role, so that a draining baseline (role old) keeps
// its template and its pods.
func isBaseline(s rollout.WorkloadSet) bool {
	w := s.Spec.Workload
	return w != nil && w.BaselineHash != "" && s.Hash == w.BaselineHash
}

// ourLabels are the labels of a set's ReplicaSet and of its pods.
func ourLabels(rolloutName, hash string) map[string]string {
	return map[string]string{
		LabelHash:      hash,
		LabelManagedBy: ManagedByValue,
		LabelRollout:   rolloutName,
	}
}

func withLabels(base, extra map[string]string) map[string]string {
	out := maps.Clone(base)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, extra)
	return out
}

// selectorApply is the rollout's selector narrowed to one hash, as Argo
// builds its ReplicaSets' selectors.
func selectorApply(sel *metav1.LabelSelector, hash string) *metav1ac.LabelSelectorApplyConfiguration {
	out := metav1ac.LabelSelector()
	var match map[string]string
	if sel != nil {
		match = maps.Clone(sel.MatchLabels)
		for _, e := range sel.MatchExpressions {
			out.WithMatchExpressions(metav1ac.LabelSelectorRequirement().
				WithKey(e.Key).WithOperator(e.Operator).WithValues(e.Values...))
		}
	}
	return out.WithMatchLabels(withLabels(match, map[string]string{LabelHash: hash}))
}

// templateApply converts the typed pod template into its apply
// configuration. Both share the JSON form, and the template has hundreds
// of optional fields: a JSON round trip carries them all.
func templateApply(t *corev1.PodTemplateSpec) (*corev1ac.PodTemplateSpecApplyConfiguration, error) {
	b, err := json.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("encode pod template: %w", err)
	}
	var out corev1ac.PodTemplateSpecApplyConfiguration
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("decode pod template: %w", err)
	}
	return &out, nil
}

// historyLimit is the rollout's revisionHistoryLimit, read from any set.
func historyLimit(sets []rollout.WorkloadSet) int {
	for _, s := range sets {
		if s.Spec != nil && s.Spec.Workload != nil {
			return int(s.Spec.Workload.RevisionHistoryLimit)
		}
	}
	return api.DefaultRevisionHistoryLimit
}
