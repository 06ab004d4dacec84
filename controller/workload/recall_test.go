package workload

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

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

// TestPromotionWritesTheNewStableFirst: on a real apiserver, a promotion
// gives the new version the stable role before the old one gives it up,
// as watched from outside; a crash between the two writes leaves two sets
// claiming stable, which Recall reads as the newer stable and the other
// draining with its pods, never as a rollout with no stable set (recovery
// would then run the promoted canary from step 1 and scale its pods down
// under traffic).
func TestPromotionWritesTheNewStableFirst(t *testing.T) {
	e := newEnv(t)
	key := e.key("pr")
	v1 := testRollout(e.ns, "pr", "shop/pr:v1", 2, 8080, nil)
	v2 := testRollout(e.ns, "pr", "shop/pr:v2", 2, 8080, nil)
	canary := set(rollout.RoleCanary, "h2", 2, v2)
	canary.At = &rollout.Position{Step: 4, Weight: 100}
	e.scale(key, set(rollout.RoleStable, "h1", 2, v1), canary)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := e.c.Client.AppsV1().ReplicaSets(e.ns).Watch(ctx, metav1.ListOptions{ResourceVersion: e.getRS("pr-h2").ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	e.scale(key, set(rollout.RoleStable, "h2", 2, v2), set(rollout.RoleOld, "h1", 2, v1))
	var order []string
	for len(order) < 2 {
		ev, ok := <-w.ResultChan()
		if !ok {
			t.Fatalf("watch ended after %v", order)
		}
		rs, isRS := ev.Object.(*appsv1.ReplicaSet)
		if !isRS {
			continue
		}
		role := rs.Annotations[AnnotationRole]
		if rs.Name == "pr-h2" && role == string(rollout.RoleStable) || rs.Name == "pr-h1" && role == string(rollout.RoleOld) {
			if !slices.Contains(order, rs.Name+" "+role) {
				order = append(order, rs.Name+" "+role)
			}
		}
	}
	if order[0] != "pr-h2 stable" {
		t.Fatalf("writes in order %v: the old stable gave up its role first", order)
	}

	// The crash between the two: h1 still says stable beside the new one.
	patch := []byte(`{"metadata":{"annotations":{"` + AnnotationRole + `":"stable"}}}`)
	if _, err := e.c.Client.AppsV1().ReplicaSets(e.ns).Patch(ctx, "pr-h1", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	f, err := e.m.Recall(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if f.Stable.Hash != "h2" || !f.Draining("h1") || len(f.Old) != 1 || f.Old[0].Replicas != 2 {
		t.Fatalf("two sets claiming stable read as %+v; want h2 stable and h1 draining with its 2 replicas", f)
	}
}
