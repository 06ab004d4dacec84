package api

import (
	"maps"
	"regexp"
	"strings"

	"github.com/argoproj/argo-rollouts/utils/hash"
	corev1 "k8s.io/api/core/v1"
)

// ExperimentLabel, on the pods of an experiment template, is the
// template's name. Like BaselineLabel it gives the pods a pod-template
// hash of their own, so that neither the stable nor the canary Service
// selects them and metrics can tell them apart (as Argo's experiment pods
// have hashes of their own); the name in it keeps two templates of the
// same version apart.
const ExperimentLabel = "sluice.io/experiment"

func (e *Experiment) String() string {
	names := make([]string, len(e.Templates))
	for i, t := range e.Templates {
		names[i] = t.Name
	}
	s := "experiment " + strings.Join(names, "+")
	if e.Duration > 0 {
		s += " " + e.Duration.String()
	}
	return s
}

// Required reports whether any analysis is required for completion.
func (e *Experiment) Required() bool {
	for _, a := range e.Analyses {
		if a.RequiredForCompletion {
			return true
		}
	}
	return false
}

// ExperimentPodTemplate is the pod template of experiment template t built
// from base, the stable or canary version's spec.template: t's labels and
// annotations added, and ExperimentLabel.
func ExperimentPodTemplate(base *corev1.PodTemplateSpec, t ExperimentTemplate) *corev1.PodTemplateSpec {
	out := base.DeepCopy()
	out.Labels = maps.Clone(out.Labels)
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	maps.Copy(out.Labels, t.Labels)
	out.Labels[ExperimentLabel] = t.Name
	if len(t.Annotations) > 0 {
		out.Annotations = maps.Clone(out.Annotations)
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		maps.Copy(out.Annotations, t.Annotations)
	}
	return out
}

// ExperimentHash is the pod-template hash of t's pods when t runs the
// version of r: Argo's hash of ExperimentPodTemplate, as Argo hashes its
// experiment templates with their labels.
func ExperimentHash(r *Rollout, t ExperimentTemplate) string {
	return hash.ComputePodTemplateHash(ExperimentPodTemplate(&r.Spec.Template, t), nil)
}

// ExperimentReplicaSetName is the name of the ReplicaSet that runs
// experiment template tmpl of rollout under hash: Argo names it after the
// experiment and the template; sluice after the rollout, the template and
// the hash, so that a template started again for a new canary gets a new
// name.
func ExperimentReplicaSetName(rollout, tmpl, hash string) string {
	return rollout + "-" + tmpl + "-" + hash
}

// experimentTag matches one of Argo's {{...}} tags in an experiment
// analysis argument (Argo trims the spaces inside the braces).
var experimentTag = regexp.MustCompile(`\{\{\s*(.*?)\s*\}\}`)

// experimentTemplateTag reads a tag naming an experiment template's
// podTemplateHash or replicaset.name.
var experimentTemplateTag = regexp.MustCompile(`^templates\.([^.]+)\.(podTemplateHash|replicaset\.name)$`)

// ResolveExperimentArgs returns args with Argo's experiment placeholders
// replaced: {{templates.<name>.podTemplateHash}} and
// {{templates.<name>.replicaset.name}} by the hash and ReplicaSet name
// of each template (hashes maps template name to hash). A tag it cannot
// resolve is left as written (the loader refuses such files).
func ResolveExperimentArgs(args []Arg, rollout string, hashes map[string]string) []Arg {
	out := make([]Arg, len(args))
	for i, a := range args {
		a.Value = experimentTag.ReplaceAllStringFunc(a.Value, func(tag string) string {
			m := experimentTemplateTag.FindStringSubmatch(experimentTag.FindStringSubmatch(tag)[1])
			if m == nil || hashes[m[1]] == "" {
				return tag
			}
			if m[2] == "podTemplateHash" {
				return hashes[m[1]]
			}
			return ExperimentReplicaSetName(rollout, m[1], hashes[m[1]])
		})
		out[i] = a
	}
	return out
}
