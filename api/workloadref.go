package api

import (
	"fmt"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WorkloadRef is a Kubernetes-mode rollout's spec.workloadRef: the
// Deployment in the rollout's namespace whose pod template the rollout
// runs, and what sluice does to the Deployment's own pods.
type WorkloadRef struct {
	// Name is the Deployment's name.
	Name string `json:"name"`
	// ScaleDown is Argo's workloadRef.scaleDown (default ScaleDownNever).
	ScaleDown ScaleDown `json:"scaleDown"`
	// Line is the line of spec.workloadRef in the strategy file, for the
	// errors of a Deployment that cannot be resolved.
	Line int `json:"-"`
}

// ScaleDown says what happens to the pods of a Deployment a rollout
// references: Argo's values.
type ScaleDown string

// ScaleDown values.
const (
	// ScaleDownNever leaves the Deployment as it is.
	ScaleDownNever = ScaleDown(v1alpha1.ScaleDownNever)
	// ScaleDownOnSuccess scales the Deployment to 0 once the rollout is Healthy.
	ScaleDownOnSuccess = ScaleDown(v1alpha1.ScaleDownOnSuccess)
	// ScaleDownProgressively scales the Deployment down as the rollout's
	// pods become Ready, and to 0 once the rollout is Healthy.
	ScaleDownProgressively = ScaleDown(v1alpha1.ScaleDownProgressively)
)

// workloadRef reads and checks spec.workloadRef in Kubernetes mode: only an
// apps/v1 Deployment can be referenced (Argo also takes ReplicaSets and
// PodTemplates; sluice runs the pods of Deployments it migrates from).
func (c *checker) workloadRef(ro *v1alpha1.Rollout) *WorkloadRef {
	ref := ro.Spec.WorkloadRef
	if ref == nil {
		return nil
	}
	const path = "spec.workloadRef"
	if ref.APIVersion != "apps/v1" {
		c.cannotRunf(path+".apiVersion", "must be apps/v1 (a Deployment), got %q", ref.APIVersion)
	}
	if ref.Kind != "Deployment" {
		c.cannotRunf(path+".kind", "must be Deployment, got %q: sluice runs the pod template of a Deployment", ref.Kind)
	}
	if !ro.Spec.EmptyTemplate() {
		c.errorf("spec.template", "must be empty for a workloadRef rollout: the pod template comes from the Deployment")
	}
	if ref.Name == "" {
		c.errorf(path+".name", "required: the Deployment whose pod template the rollout runs")
	}
	out := &WorkloadRef{Name: ref.Name, ScaleDown: ScaleDown(ref.ScaleDown), Line: c.doc.walk.line(path)}
	switch out.ScaleDown {
	case "":
		out.ScaleDown = ScaleDownNever // Argo's default
	case ScaleDownNever, ScaleDownOnSuccess, ScaleDownProgressively:
	default:
		c.errorf(path+".scaleDown", "unknown value %q: one of never, onsuccess, progressively", ref.ScaleDown)
	}
	return out
}

func emptySelector(s *metav1.LabelSelector) bool {
	return s == nil || len(s.MatchLabels)+len(s.MatchExpressions) == 0
}

// ResolveWorkloadRef returns a copy of a workloadRef rollout that runs
// template: spec.template (and spec.selector, when the rollout names
// none) taken from the Deployment, the version and pod-template hashes
// computed from it exactly as from a template in git.
func ResolveWorkloadRef(r *Rollout, template *corev1.PodTemplateSpec, selector *metav1.LabelSelector) (*Rollout, error) {
	if r.Workload == nil || r.Workload.Ref == nil {
		return r, nil
	}
	containers := template.Spec.Containers
	if len(containers) == 0 || containers[0].Image == "" {
		return nil, fmt.Errorf("the pod template of Deployment %s/%s has no first container image (the rollout's version)", r.Namespace, r.Workload.Ref.Name)
	}
	if emptySelector(r.Spec.Selector) && emptySelector(selector) {
		return nil, fmt.Errorf("neither the rollout nor Deployment %s/%s has a selector", r.Namespace, r.Workload.Ref.Name)
	}
	out := *r
	w := *r.Workload
	out.Workload = &w
	out.Spec.SetResolvedTemplate(*template.DeepCopy())
	if emptySelector(r.Spec.Selector) {
		out.Spec.SetResolvedSelector(selector.DeepCopy())
	}
	out.Version = containers[0].Image
	w.hashTemplate(&out.Spec.Template)
	return &out, nil
}

// DeploymentLookup finds the pod template and selector of the Deployment
// namespace/name; an error says why there is none.
type DeploymentLookup func(namespace, name string) (*corev1.PodTemplateSpec, *metav1.LabelSelector, error)

// ResolveWorkloadRefs returns a copy of s in which every workloadRef
// rollout runs its Deployment's template (ResolveWorkloadRef). A rollout
// whose Deployment cannot be found or used moves to Rejected with an error
// at spec.workloadRef: like a rollout whose file broke, it holds, and the
// version in force keeps running. s itself is not changed.
func (s *Set) ResolveWorkloadRefs(lookup DeploymentLookup) *Set {
	out := *s
	out.Rollouts = make([]*Rollout, 0, len(s.Rollouts))
	out.Rejected = append([]Rejected(nil), s.Rejected...)
	out.Diagnostics = append(Diagnostics(nil), s.Diagnostics...)
	rejected := false
	for _, r := range s.Rollouts {
		resolved, err := resolveOne(r, lookup)
		if err != nil {
			d := Diagnostic{File: r.File, Line: r.Workload.Ref.Line, Field: "spec.workloadRef", Severity: SeverityError,
				Message: err.Error() + ": the rollout holds until the Deployment can be used"}
			out.Diagnostics = append(out.Diagnostics, d)
			out.Rejected = append(out.Rejected, Rejected{Key: r.Key, File: r.File, Diagnostics: Diagnostics{d}})
			rejected = true
			continue
		}
		out.Rollouts = append(out.Rollouts, resolved)
	}
	if rejected {
		out.HostConflicts = out.conflictsAmongRollouts()
		sortSet(&out)
	}
	return &out
}

func resolveOne(r *Rollout, lookup DeploymentLookup) (*Rollout, error) {
	if r.Workload == nil || r.Workload.Ref == nil {
		return r, nil
	}
	template, selector, err := lookup(r.Namespace, r.Workload.Ref.Name)
	if err != nil {
		return nil, err
	}
	return ResolveWorkloadRef(r, template, selector)
}

// WorkloadRefs lists the Deployments ("namespace/name") the set's
// rollouts reference.
func (s *Set) WorkloadRefs() []string {
	var out []string
	for _, r := range s.Rollouts {
		if r.Workload != nil && r.Workload.Ref != nil {
			out = append(out, r.Namespace+"/"+r.Workload.Ref.Name)
		}
	}
	return out
}
