package workload

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sluice-dev/sluice/api"
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

// TestRecallReadsTheAbortMark: on a real apiserver, the abort mark Scale
// writes on an aborted canary's set is read back while the set drains and
// once it is scaled down (a state lost then must not resume the canary); a
// retry, which applies the set without the mark, takes it off; a mark from
// before the stable set was written (a later version promoted) does not
// count.
func TestRecallReadsTheAbortMark(t *testing.T) {
	e := newEnv(t)
	key := e.key("ab")
	v1 := testRollout(e.ns, "ab", "shop/ab:v1", 2, 8080, nil)
	v2 := testRollout(e.ns, "ab", "shop/ab:v2", 2, 8080, nil)
	v3 := testRollout(e.ns, "ab", "shop/ab:v3", 2, 8080, nil)
	stable := set(rollout.RoleStable, "h1", 2, v1)
	canary := func(role rollout.WorkloadRole, hash string, spec *api.Rollout, weight int32, aborted bool) rollout.WorkloadSet {
		s := set(role, hash, 1, spec)
		s.At, s.Aborted = &rollout.Position{Step: 3, Weight: weight}, aborted
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
	wantAborted := func(when, hash string) {
		t.Helper()
		f := recall()
		switch {
		case hash == "" && f.Aborted != nil:
			t.Fatalf("%s: %s read as aborted (%+v)", when, f.Aborted.Name, f)
		case hash != "" && (f.Aborted == nil || f.Aborted.Hash != hash || !reflect.DeepEqual(f.Aborted.At, &rollout.Position{Step: 3, Weight: 0})):
			t.Fatalf("%s: aborted set %+v, want %s aborted at step 4 (%s)", when, f.Aborted, hash, f)
		}
	}

	e.scale(key, stable, canary(rollout.RoleCanary, "h2", v2, 50, false))
	wantAborted("canary at 50 %", "")

	// The abort: the canary's set turns old and carries the mark.
	e.scale(key, stable, canary(rollout.RoleOld, "h2", v2, 0, true))
	if got := e.getRS("ab-h2").Annotations[AnnotationAborted]; got != "true" {
		t.Fatalf("aborted canary's set: %s=%q, want \"true\"", AnnotationAborted, got)
	}
	wantAborted("draining after the abort", "h2")
	if f := recall(); !f.Draining("h2") || !strings.Contains(f.String(), "ab-h2 marked aborted at step 4") {
		t.Fatalf("after the abort: draining %v, found %q", f.Draining("h2"), f)
	}

	// The drain ends: the set is scaled down and keeps its mark.
	e.scale(key, stable)
	if rs := e.getRS("ab-h2"); *rs.Spec.Replicas != 0 || rs.Annotations[AnnotationRole] != RoleInactive {
		t.Fatalf("after the drain: %d replicas, role %q", *rs.Spec.Replicas, rs.Annotations[AnnotationRole])
	}
	wantAborted("scaled down after the abort", "h2")

	// Retry: the canary is applied again without the mark.
	e.scale(key, stable, canary(rollout.RoleCanary, "h2", v2, 0, false))
	if rs := e.getRS("ab-h2"); rs.Annotations[AnnotationAborted] != "" {
		t.Fatalf("after a retry the set keeps %s=%q", AnnotationAborted, rs.Annotations[AnnotationAborted])
	}
	wantAborted("after a retry", "")

	// Aborted again, then v3 is pushed and promoted: v2's old mark is
	// from before v3's stable set, and does not count.
	e.scale(key, stable, canary(rollout.RoleOld, "h2", v2, 0, true))
	e.scale(key, stable)
	e.scale(key, stable, canary(rollout.RoleCanary, "h3", v3, 50, false))
	e.scale(key, set(rollout.RoleStable, "h3", 2, v3), set(rollout.RoleOld, "h1", 2, v1))
	if rs := e.getRS("ab-h2"); rs.Annotations[AnnotationAborted] != "true" {
		t.Fatalf("v2's set lost its mark (%v): the revision rule below is not exercised", rs.Annotations)
	}
	wantAborted("after v3 was promoted", "")
}
