package workload

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// Found is what the cluster holds of a rollout after sluice lost its
// record (DESIGN §14): the set whose role is stable and, when one is in
// flight, the canary's set with the position written on it. A zero Stable
// means the cluster holds nothing sluice can rebuild from.
type Found struct {
	Stable FoundSet
	Canary *FoundSet
	// Old are the sets still draining (role old): a former stable, or an
	// aborted canary.
	Old []FoundSet
	// Aborted is the newest set carrying the abort mark, when it is newer
	// than the stable set (the canary, draining or scaled down after an
	// abort): that canary was aborted. An older mark is from before the
	// stable was written (a version pushed again since) and does not count.
	Aborted *FoundSet
	// Sets names every ReplicaSet read, for the recovery's message.
	Sets []string
}

// FoundSet is one of sluice's ReplicaSets as read back.
type FoundSet struct {
	Name    string
	Version string
	Hash    string
	Ready   int32
	// Replicas is the size the set was last given.
	Replicas int32
	// Template is the pods' template as the ReplicaSet holds it, with
	// sluice's labels and scheduler taken out again: the version's own
	// template when git no longer has it.
	Template corev1.PodTemplateSpec
	// At is the canary's position (canary sets only); nil when the
	// annotations are missing or unreadable.
	At *rollout.Position
	// Aborted: the set carries the abort mark (AnnotationAborted).
	Aborted bool
}

// Recall reads the rollout's ReplicaSets from the API (not the caches:
// they may not have synced at start). Roles come from sluice's own
// annotations; with more than one set claiming a role (a crash between
// two applies) the highest revision wins, as it was written last, and the
// others count as draining.
func (m *Manager) Recall(ctx context.Context, key api.Key) (Found, error) {
	list, err := m.client.AppsV1().ReplicaSets(key.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: LabelRollout + "=" + key.Name + "," + LabelManagedBy + "=" + ManagedByValue,
	})
	if err != nil {
		return Found{}, fmt.Errorf("recall %s: list replicasets: %w", key, err)
	}
	var f Found
	var stable, canary, aborted *revisioned
	var old []revisioned
	for i := range list.Items {
		rs := &list.Items[i]
		if rs.DeletionTimestamp != nil {
			continue
		}
		set, role, rev := foundSet(rs)
		f.Sets = append(f.Sets, fmt.Sprintf("%s (%s)", rs.Name, role))
		this := revisioned{set, rev}
		if set.Aborted && (aborted == nil || rev > aborted.rev) {
			aborted = &this
		}
		switch role {
		case string(rollout.RoleStable):
			stable, old = newest(stable, this, old)
		case string(rollout.RoleCanary):
			canary, old = newest(canary, this, old)
		case string(rollout.RoleOld):
			old = append(old, this)
		}
	}
	if stable != nil {
		f.Stable = stable.set
		if aborted != nil && aborted.rev > stable.rev {
			f.Aborted = &aborted.set
		}
	}
	if canary != nil {
		f.Canary = &canary.set
	}
	for _, o := range old {
		f.Old = append(f.Old, o.set)
	}
	if f.Canary != nil && (f.Stable.Hash == "" || f.Canary.Hash == f.Stable.Hash) {
		f.Canary = nil // a canary without a stable beside it is not a position
	}
	return f, nil
}

// revisioned is a set read back with its revision.
type revisioned struct {
	set FoundSet
	rev int64
}

// newest keeps the newer of cur and next for a role; with more than one
// set claiming it (a crash between two applies) the other is taken as
// draining: it keeps its pods until recovery's delay, never scaled to 0 at
// once.
func newest(cur *revisioned, next revisioned, old []revisioned) (*revisioned, []revisioned) {
	switch {
	case cur == nil:
		return &next, old
	case next.rev > cur.rev:
		return &next, append(old, *cur)
	default:
		return cur, append(old, next)
	}
}

// foundSet reads one ReplicaSet back, with its role and revision.
func foundSet(rs *appsv1.ReplicaSet) (FoundSet, string, int64) {
	a := rs.Annotations
	set := FoundSet{Name: rs.Name, Version: a[AnnotationVersion], Hash: rs.Labels[LabelHash], Ready: rs.Status.ReadyReplicas}
	if rs.Spec.Replicas != nil {
		set.Replicas = *rs.Spec.Replicas
	}
	set.Template = *rs.Spec.Template.DeepCopy()
	for _, l := range []string{LabelHash, LabelManagedBy, LabelRollout} {
		delete(set.Template.Labels, l)
	}
	if set.Template.Spec.SchedulerName == SchedulerName {
		set.Template.Spec.SchedulerName = ""
	}
	rev, _ := strconv.ParseInt(a[AnnotationRevision], 10, 64)
	step, errStep := strconv.ParseInt(a[AnnotationStep], 10, 32)
	weight, errWeight := strconv.ParseInt(a[AnnotationWeight], 10, 32)
	if errStep == nil && errWeight == nil && step >= 0 && weight >= 0 && weight <= 100 {
		set.At = &rollout.Position{Step: int32(step), Weight: int32(weight)}
	}
	set.Aborted = a[AnnotationAborted] == "true"
	return set, a[AnnotationRole], rev
}

// Draining reports whether a set of hash is draining.
func (f Found) Draining(hash string) bool {
	for _, s := range f.Old {
		if s.Hash == hash {
			return true
		}
	}
	return false
}

// String says what was found, for messages and alerts.
func (f Found) String() string {
	if len(f.Sets) == 0 {
		return "no ReplicaSets"
	}
	s := "ReplicaSets " + strings.Join(f.Sets, ", ")
	if c := f.Canary; c != nil && c.At != nil {
		s += fmt.Sprintf("; canary %s at step %d, %d%%", c.Name, c.At.Step+1, c.At.Weight)
	}
	if a := f.Aborted; a != nil {
		s += fmt.Sprintf("; %s marked aborted", a.Name)
		if a.At != nil {
			s += fmt.Sprintf(" at step %d", a.At.Step+1)
		}
	}
	return s
}
