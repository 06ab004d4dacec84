package workload

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// This file builds the ReplicaSets of experiment steps (sets of role
// rollout.RoleExperiment), as Argo's rollout and experiment controllers
// build an experiment's (rollout/experiment.go GetExperimentFromTemplate,
// experiments/replicaset.go newReplicaSetFromTemplate): the stable's or
// canary's pod template with the experiment template's labels and
// annotations, the template's selector (or the rollout's) with those
// labels added, and a pod-template hash of its own. They are named
// "<rollout>-<template>-<hash>" and deleted as soon as the step no longer
// wants them (planScale): their pods get no traffic, so there is nothing
// to drain.

// isExperiment reports whether s runs an experiment template.
func isExperiment(s rollout.WorkloadSet) bool {
	return s.Role == rollout.RoleExperiment && s.Experiment != nil
}

// experimentPodTemplate is the pod template of an experiment set.
func experimentPodTemplate(s rollout.WorkloadSet) *corev1.PodTemplateSpec {
	return api.ExperimentPodTemplate(&s.Spec.Spec.Template, *s.Experiment)
}

// experimentSelector is the selector of an experiment set before its hash
// is added: the template's own or the rollout's, with the template's
// labels and its name (api.ExperimentLabel) added, so that it selects only
// the experiment's pods.
func experimentSelector(s rollout.WorkloadSet) *metav1.LabelSelector {
	sel := s.Spec.Spec.Selector
	if s.Experiment.Selector != nil {
		sel = s.Experiment.Selector
	}
	out := &metav1.LabelSelector{}
	if sel != nil {
		out = sel.DeepCopy()
	}
	out.MatchLabels = maps.Clone(out.MatchLabels)
	if out.MatchLabels == nil {
		out.MatchLabels = map[string]string{}
	}
	maps.Copy(out.MatchLabels, s.Experiment.Labels)
	out.MatchLabels[api.ExperimentLabel] = s.Experiment.Name
	return out
}

// setName is the name of the ReplicaSet that carries a set.
func setName(rolloutName string, s rollout.WorkloadSet) string {
	if isExperiment(s) {
		return api.ExperimentReplicaSetName(rolloutName, s.Experiment.Name, s.Hash)
	}
	return replicaSetName(rolloutName, s.Hash)
}
