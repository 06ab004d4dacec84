package workload

import (
	"context"
	"reflect"
	"testing"

	"github.com/sluice-dev/sluice/controller/rollout"
)

// TestRecallReadsWhatScaleWrote: on a real apiserver, the position Scale
// writes on the canary's ReplicaSet follows the canary and Recall reads
// roles, position and template back; a promotion moves the roles and drops
// the position (server-side apply removes what sluice stops setting).
func TestRecallReadsWhatScaleWrote(t *testing.T) {
	e := newEnv(t)
	key := e.key("co")
	v1 := testRollout(e.ns, "co", "shop/co:v1", 2, 8080, nil)
	v2 := testRollout(e.ns, "co", "shop/co:v2", 2, 8080, nil)
	canary := func(step, weight int32) rollout.WorkloadSet {
		s := set(rollout.RoleCanary, "h2", 1, v2)
		s.At = &rollout.Position{Step: step, Weight: weight}
		return s
	}
	recall := func() Found {
		t.Helper()
		f, err := e.m.Recall(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	if f := recall(); f.Stable.Hash != "" || f.Canary != nil {
		t.Fatalf("before any Scale: %+v", f)
	}

	e.scale(key, set(rollout.RoleStable, "h1", 2, v1), canary(0, 20))
	e.scale(key, set(rollout.RoleStable, "h1", 2, v1), canary(2, 60))
	f := recall()
	if f.Stable.Hash != "h1" || f.Stable.Version != "shop/co:v1" {
		t.Fatalf("stable %+v, want h1 shop/co:v1", f.Stable)
	}
	if f.Canary == nil || f.Canary.Hash != "h2" || f.Canary.Version != "shop/co:v2" || !reflect.DeepEqual(f.Canary.At, &rollout.Position{Step: 2, Weight: 60}) {
		t.Fatalf("canary %+v, want h2 shop/co:v2 at step 2, 60%%", f.Canary)
	}
	if got := f.Stable.Template.Spec.Containers[0].Image; got != "shop/co:v1" || f.Stable.Template.Labels[LabelHash] != "" || f.Stable.Template.Spec.SchedulerName != "" {
		t.Fatalf("stable template: image %s, labels %v, scheduler %q: want the rollout's own", got, f.Stable.Template.Labels, f.Stable.Template.Spec.SchedulerName)
	}

	// Promotion: v2 stable, v1 draining; no set carries a position.
	e.scale(key, set(rollout.RoleStable, "h2", 2, v2), set(rollout.RoleOld, "h1", 2, v1))
	f = recall()
	if f.Stable.Hash != "h2" || f.Canary != nil || !f.Draining("h1") {
		t.Fatalf("after promotion: %+v", f)
	}
	if len(f.Old) != 1 || f.Old[0].Replicas != 2 {
		t.Fatalf("draining sets %+v: want h1 with its 2 replicas, which recovery keeps", f.Old)
	}
	if rs := e.getRS("co-h2"); rs.Annotations[AnnotationStep] != "" || rs.Annotations[AnnotationWeight] != "" {
		t.Fatalf("the stable set keeps a canary position: %v", rs.Annotations)
	}
}
