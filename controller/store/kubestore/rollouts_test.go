package kubestore_test

import (
	"context"
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/store/kubestore"
	"github.com/sluice-dev/sluice/controller/store/kubestore/v1alpha1"
	"github.com/sluice-dev/sluice/internal/kubetest"
)

func TestSaveLoadRollouts(t *testing.T) {
	ns := kubetest.Shared(t).Namespace(t)
	s := newStore(t, ns, &testFence{epoch: 1, name: "a"})
	key := api.Key{Namespace: ns, Name: "checkout"}
	for _, rec := range []string{"Progressing", "Paused", "Healthy"} {
		if err := s.SaveRollout(key, []byte(rec)); err != nil {
			t.Fatalf("save %s: %v", rec, err)
		}
	}
	// A fresh store (a restarted or newly elected replica) reads it back.
	got, err := newStore(t, ns, &testFence{epoch: 2, name: "b"}).LoadRollouts()
	if err != nil {
		t.Fatal(err)
	}
	if string(got[key]) != "Healthy" {
		t.Fatalf("loaded %q, want the last record %q", got[key], "Healthy")
	}
	obj := getObject(t, key)
	if obj.Status.Phase != "Healthy" || obj.Status.Writer != "a" || obj.Status.LeaderEpoch != 1 {
		t.Fatalf("status phase %q writer %q epoch %d, want Healthy a 1", obj.Status.Phase, obj.Status.Writer, obj.Status.LeaderEpoch)
	}
}

// TestInstallationsKeepTheirOwnRollouts: two sluice installations in one
// cluster (each with its own namespace and Lease) never load each other's
// rollouts, so a leader never runs a rollout another sluice keeps.
func TestInstallationsKeepTheirOwnRollouts(t *testing.T) {
	c := kubetest.Shared(t)
	nsA, nsB := c.Namespace(t), c.Namespace(t)
	a := newStore(t, nsA, &testFence{epoch: 1, name: "a"})
	b := newStore(t, nsB, &testFence{epoch: 1, name: "b"})
	keyA, keyB := api.Key{Namespace: nsA, Name: "checkout"}, api.Key{Namespace: nsB, Name: "payments"}
	if err := a.SaveRollout(keyA, []byte("Healthy")); err != nil {
		t.Fatal(err)
	}
	if err := b.SaveRollout(keyB, []byte("Paused")); err != nil {
		t.Fatal(err)
	}
	for name, tt := range map[string]struct {
		s          *kubestore.Store
		own, other api.Key
	}{"a": {a, keyA, keyB}, "b": {b, keyB, keyA}} {
		got, err := tt.s.LoadRollouts()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := got[tt.own]; !ok {
			t.Errorf("installation %s does not load its own rollout %s: %v", name, tt.own, got)
		}
		if _, ok := got[tt.other]; ok {
			t.Errorf("installation %s loads the other installation's rollout %s", name, tt.other)
		}
	}
}

// TestSaveRolloutConflicts: a write that finds the object changed since
// this replica last saw it re-reads it; it writes again only when no newer
// leader wrote in between.
func TestSaveRolloutConflicts(t *testing.T) {
	tests := []struct {
		name        string
		otherEpoch  int32
		wantErr     error
		wantRecord  string
		wantStopped bool
	}{
		{name: "same term (a status edit by hand, a follower): re-read and write", otherEpoch: 1, wantRecord: "a-2"},
		{name: "newer leader: refused, its record stays", otherEpoch: 2, wantErr: kubestore.ErrFenced, wantRecord: "b-1", wantStopped: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := kubetest.Shared(t).Namespace(t)
			key := api.Key{Namespace: ns, Name: "checkout"}
			a := newStore(t, ns, &testFence{epoch: 1, name: "a"})
			if err := a.SaveRollout(key, []byte("a-1")); err != nil {
				t.Fatal(err)
			}
			b := newStore(t, ns, &testFence{epoch: tt.otherEpoch, name: "b"})
			if _, err := b.LoadRollouts(); err != nil {
				t.Fatal(err)
			}
			if err := b.SaveRollout(key, []byte("b-1")); err != nil {
				t.Fatal(err)
			}
			// a's cached resourceVersion is now stale.
			err := a.SaveRollout(key, []byte("a-2"))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("a's write after b's: err %v, want %v", err, tt.wantErr)
			}
			if got := string(getObject(t, key).Status.Record); got != tt.wantRecord {
				t.Fatalf("record %q, want %q", got, tt.wantRecord)
			}
			select {
			case <-a.Failed():
				if !tt.wantStopped {
					t.Fatalf("store failed: %v", a.Err())
				}
				if err := a.SaveRollout(key, []byte("a-3")); !errors.Is(err, kubestore.ErrFenced) {
					t.Fatalf("write after being fenced: %v, want ErrFenced", err)
				}
			default:
				if tt.wantStopped {
					t.Fatal("store did not fail after meeting a newer leader")
				}
			}
		})
	}
}

// TestSaveRecreatesAnObjectDeletedByHand: a SluiceRollout deleted while
// sluice runs (kubectl delete) is created again by the rollout's next
// save, with the record; the store does not keep writing to the gone
// object's resourceVersion and fail every save until a restart.
func TestSaveRecreatesAnObjectDeletedByHand(t *testing.T) {
	ns := kubetest.Shared(t).Namespace(t)
	s := newStore(t, ns, &testFence{epoch: 1, name: "a"})
	if _, err := s.LoadRollouts(); err != nil {
		t.Fatal(err)
	}
	key := api.Key{Namespace: ns, Name: "checkout"}
	if err := s.SaveRollout(key, []byte("Progressing")); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(kubetest.Shared(t).Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := dyn.Resource(v1alpha1.GroupVersionResource).Namespace(ns).Delete(context.Background(), key.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, rec := range []string{"Paused", "Healthy"} {
		if err := s.SaveRollout(key, []byte(rec)); err != nil {
			t.Fatalf("save %s after the object was deleted: %v", rec, err)
		}
	}
	obj := getObject(t, key)
	if string(obj.Status.Record) != "Healthy" || obj.Labels[kubestore.InstanceLabel] != ns {
		t.Fatalf("recreated object: record %q, labels %v; want Healthy and the instance label", obj.Status.Record, obj.Labels)
	}
}

func TestWritesRefusedWithoutLease(t *testing.T) {
	ns := kubetest.Shared(t).Namespace(t)
	fence := &testFence{epoch: 1, name: "a"}
	s := newStore(t, ns, fence)
	key := api.Key{Namespace: ns, Name: "checkout"}
	if err := s.SaveRollout(key, []byte("before")); err != nil {
		t.Fatal(err)
	}
	fence.refuse = true
	writes := []struct {
		name  string
		write func() error
	}{
		{"SaveRollout", func() error { return s.SaveRollout(key, []byte("after")) }},
		{"SetLastCommit", func() error { return s.SetLastCommit("abc") }},
		{"EnqueueAlert", func() error { return s.EnqueueAlert(testAlert("x"), []string{"hook"}) }},
		{"MarkDelivered", func() error { return s.MarkDelivered("hook", "x") }},
		{"DeleteRollout", func() error { return s.DeleteRollout(key) }},
	}
	for _, w := range writes {
		t.Run(w.name, func(t *testing.T) {
			if err := w.write(); !errors.Is(err, kubestore.ErrNotLeader) {
				t.Fatalf("err %v, want ErrNotLeader", err)
			}
		})
	}
	if got := string(getObject(t, key).Status.Record); got != "before" {
		t.Fatalf("record %q after refused writes, want %q", got, "before")
	}
}

func getObject(t *testing.T, key api.Key) *v1alpha1.SluiceRollout {
	t.Helper()
	dyn, err := dynamic.NewForConfig(kubetest.Shared(t).Config)
	if err != nil {
		t.Fatal(err)
	}
	u, err := dyn.Resource(v1alpha1.GroupVersionResource).Namespace(key.Namespace).Get(context.Background(), key.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var obj v1alpha1.SluiceRollout
	if err := runtimeFromUnstructured(u, &obj); err != nil {
		t.Fatal(err)
	}
	return &obj
}

func runtimeFromUnstructured(u *unstructured.Unstructured, obj *v1alpha1.SluiceRollout) error {
	return runtimeConverter.FromUnstructured(u.Object, obj)
}
