package workload

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// experimentSet is an experiment template "cand" of spec's version.
func experimentSet(spec *api.Rollout, tmpl api.ExperimentTemplate) rollout.WorkloadSet {
	return rollout.WorkloadSet{Role: rollout.RoleExperiment, Version: spec.Version, Hash: api.ExperimentHash(spec, tmpl),
		Replicas: tmpl.Replicas, Spec: spec, Experiment: &tmpl}
}

// TestExperimentReplicaSet: an experiment template's ReplicaSet runs the
// version's pod template with the template's labels and annotations, its
// own hash and name, and a selector that selects only its pods.
func TestExperimentReplicaSet(t *testing.T) {
	spec := testRollout("ns", "co", "shop/co:v2", 3, 8080, nil)
	tmpl := api.ExperimentTemplate{Name: "cand", SpecRef: api.SpecRefCanary, Replicas: 2,
		Labels: map[string]string{"tier": "exp"}, Annotations: map[string]string{"note": "x"}}
	set := experimentSet(spec, tmpl)
	p, err := planScale("co", []rollout.WorkloadSet{set}, nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	if want := "co-cand-" + set.Hash; len(p.Apply) != 1 || p.Apply[0].Name != want {
		t.Fatalf("apply %+v, want one ReplicaSet %s", p.Apply, want)
	}
	ac, err := replicaSetApply("ns", "co", p.Apply[0], true)
	if err != nil {
		t.Fatal(err)
	}
	labels := ac.Spec.Template.Labels
	for k, v := range map[string]string{"app": "co", "tier": "exp", api.ExperimentLabel: "cand", LabelHash: set.Hash, LabelRollout: "co"} {
		if labels[k] != v {
			t.Errorf("pod label %s = %q, want %q (labels %v)", k, labels[k], v, labels)
		}
	}
	if ac.Spec.Template.Annotations["note"] != "x" || *ac.Spec.Replicas != 2 || *ac.Spec.Template.Spec.Containers[0].Image != "shop/co:v2" {
		t.Errorf("template annotations %v, replicas %d, image %s", ac.Spec.Template.Annotations, *ac.Spec.Replicas, *ac.Spec.Template.Spec.Containers[0].Image)
	}
	sel := ac.Spec.Selector.MatchLabels
	for k, v := range map[string]string{"app": "co", "tier": "exp", api.ExperimentLabel: "cand", LabelHash: set.Hash} {
		if sel[k] != v {
			t.Errorf("selector %s = %q, want %q (%v)", k, sel[k], v, sel)
		}
	}
	if ac.Annotations[AnnotationRole] != string(rollout.RoleExperiment) {
		t.Errorf("role annotation %q", ac.Annotations[AnnotationRole])
	}

	// A template's own selector replaces the rollout's.
	tmpl.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "co", "exp": "yes"}}
	own := experimentSet(spec, tmpl)
	ac, err = replicaSetApply("ns", "co", applyStep{Set: own, Name: "x", Revision: 1}, false)
	if err != nil {
		t.Fatal(err)
	}
	if ac.Spec.Selector.MatchLabels["exp"] != "yes" || ac.Spec.Selector.MatchLabels["tier"] != "exp" {
		t.Errorf("selector %v, want the template's with its labels", ac.Spec.Selector.MatchLabels)
	}
}

// TestPlanScaleDeletesExperiments: an experiment's ReplicaSet no longer
// wanted is deleted at once (its pods got no traffic), not kept as
// revision history; one still wanted keeps its revision.
func TestPlanScaleDeletesExperiments(t *testing.T) {
	spec := testRollout("ns", "co", "shop/co:v2", 3, 8080, nil)
	stable := rollout.WorkloadSet{Role: rollout.RoleStable, Version: "v1", Hash: "h1", Replicas: 3, Spec: spec}
	set := experimentSet(spec, api.ExperimentTemplate{Name: "cand", SpecRef: api.SpecRefCanary, Replicas: 1})
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	have := []replicaSetFacts{
		{Name: "co-h1", Hash: "h1", Ours: true, OfRollout: true, Revision: 1, Role: "stable", Replicas: 3, Created: t0},
		{Name: "co-cand-" + set.Hash, Hash: set.Hash, Ours: true, OfRollout: true, Revision: 2, Role: "experiment", Replicas: 1, Created: t0},
		{Name: "co-h0", Hash: "h0", Ours: true, OfRollout: true, Revision: 0, Role: "inactive", Replicas: 0, Created: t0},
	}
	p, err := planScale("co", []rollout.WorkloadSet{stable, set}, have, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Apply) != 2 || p.Apply[1].Revision != 2 || len(p.Delete)+len(p.Retire) != 0 {
		t.Errorf("while wanted: %+v", p)
	}
	p, err = planScale("co", []rollout.WorkloadSet{stable}, have, 10)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.Delete, []string{"co-cand-" + set.Hash}) || len(p.Retire) != 0 {
		t.Errorf("after the step: delete %v, retire %v; want the experiment's ReplicaSet deleted, the history kept", p.Delete, p.Retire)
	}
}
