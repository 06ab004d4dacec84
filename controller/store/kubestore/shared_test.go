package kubestore_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/sluice-dev/sluice/controller/alert"
	"github.com/sluice-dev/sluice/controller/store/kubestore"
	"github.com/sluice-dev/sluice/internal/kubetest"
)

var runtimeConverter = runtime.DefaultUnstructuredConverter

func testAlert(id string) alert.Alert {
	return alert.Alert{ID: id, Event: alert.EventStepCompleted, Severity: alert.SeverityInfo, Rollout: "default/checkout"}
}

func pendingIDs(t *testing.T, s *kubestore.Store, sink string) []string {
	t.Helper()
	as, err := s.PendingAlerts(sink)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, a := range as {
		ids = append(ids, a.ID)
	}
	return ids
}

// TestOutbox: the same semantics as the bbolt outbox, and they survive a
// new store (another replica) reading the ConfigMap.
func TestOutbox(t *testing.T) {
	ns := kubetest.Shared(t).Namespace(t)
	s := newStore(t, ns, &testFence{epoch: 1, name: "a"})
	steps := []struct {
		name string
		do   func() error
		sink string
		want []string
	}{
		{"enqueue keeps order", func() error {
			for _, id := range []string{"3", "1", "2"} {
				if err := s.EnqueueAlert(testAlert(id), []string{"hook", "slack"}); err != nil {
					return err
				}
			}
			return nil
		}, "hook", []string{"3", "1", "2"}},
		{"re-enqueue is a no-op", func() error { return s.EnqueueAlert(testAlert("3"), []string{"hook"}) }, "hook", []string{"3", "1", "2"}},
		{"delivered leaves the queue", func() error { return s.MarkDelivered("hook", "3") }, "hook", []string{"1", "2"}},
		{"other sink unaffected", func() error { return nil }, "slack", []string{"3", "1", "2"}},
		{"delivered id is not queued again", func() error { return s.EnqueueAlert(testAlert("3"), []string{"hook"}) }, "hook", []string{"1", "2"}},
		{"removed sink dropped", func() error { return s.RetainSinks([]string{"hook"}) }, "slack", nil},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if err := st.do(); err != nil {
				t.Fatal(err)
			}
			if got := pendingIDs(t, s, st.sink); !slices.Equal(got, st.want) {
				t.Fatalf("pending for %s: %v, want %v", st.sink, got, st.want)
			}
		})
	}
	if err := s.SetLastCommit("c0ffee"); err != nil {
		t.Fatal(err)
	}
	other := newStore(t, ns, &testFence{epoch: 2, name: "b"})
	if got := pendingIDs(t, other, "hook"); !slices.Equal(got, []string{"1", "2"}) {
		t.Fatalf("a new replica reads pending %v, want [1 2]", got)
	}
	if c, _ := other.LastCommit(); c != "c0ffee" {
		t.Fatalf("a new replica reads last commit %q, want c0ffee", c)
	}
}

// TestOutboxConflicts: two writers of the ConfigMap. In the same term each
// change is applied to what the other wrote (nothing lost); a writer that
// meets a newer term is refused.
func TestOutboxConflicts(t *testing.T) {
	t.Run("same term: both alerts kept", func(t *testing.T) {
		ns := kubetest.Shared(t).Namespace(t)
		a := newStore(t, ns, &testFence{epoch: 1, name: "a"})
		b := newStore(t, ns, &testFence{epoch: 1, name: "b"})
		if err := a.EnqueueAlert(testAlert("from-a"), []string{"hook"}); err != nil {
			t.Fatal(err)
		}
		if err := b.EnqueueAlert(testAlert("from-b"), []string{"hook"}); err != nil {
			t.Fatal(err)
		}
		fresh := newStore(t, ns, &testFence{epoch: 1, name: "c"})
		if got := pendingIDs(t, fresh, "hook"); !slices.Equal(got, []string{"from-a", "from-b"}) {
			t.Fatalf("pending %v, want both [from-a from-b]", got)
		}
	})
	t.Run("newer term: refused", func(t *testing.T) {
		ns := kubetest.Shared(t).Namespace(t)
		a := newStore(t, ns, &testFence{epoch: 1, name: "a"})
		if err := a.EnqueueAlert(testAlert("old"), []string{"hook"}); err != nil {
			t.Fatal(err)
		}
		b := newStore(t, ns, &testFence{epoch: 2, name: "b"})
		if err := b.MarkDelivered("hook", "old"); err != nil {
			t.Fatal(err)
		}
		err := a.EnqueueAlert(testAlert("stale"), []string{"hook"})
		if !errors.Is(err, kubestore.ErrFenced) {
			t.Fatalf("old leader's enqueue: %v, want ErrFenced", err)
		}
		fresh := newStore(t, ns, &testFence{epoch: 2, name: "c"})
		if got := pendingIDs(t, fresh, "hook"); len(got) != 0 {
			t.Fatalf("pending %v after the refused write, want none", got)
		}
	})
}

// TestSharedStateRecreatedWithWhatWasKept: the ConfigMap deleted by hand
// while sluice runs is written again whole at the next change — the
// undelivered alerts and the last commit this replica kept, plus the
// change — instead of failing every write until a restart, or starting
// from an empty outbox.
func TestSharedStateRecreatedWithWhatWasKept(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	s := newStore(t, ns, &testFence{epoch: 1, name: "a"})
	if err := s.EnqueueAlert(testAlert("1"), []string{"hook"}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetLastCommit("abc"); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.CoreV1().ConfigMaps(ns).Delete(context.Background(), kubestore.StateConfigMap, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.EnqueueAlert(testAlert("2"), []string{"hook"}); err != nil {
		t.Fatalf("enqueue after the ConfigMap was deleted: %v", err)
	}
	// Another replica reads what the cluster holds.
	other := newStore(t, ns, &testFence{epoch: 1, name: "b"})
	if got := pendingIDs(t, other, "hook"); !slices.Equal(got, []string{"1", "2"}) {
		t.Errorf("pending alerts in the recreated ConfigMap %v, want [1 2]", got)
	}
	if got, err := other.LastCommit(); err != nil || got != "abc" {
		t.Errorf("last commit in the recreated ConfigMap %q (%v), want abc", got, err)
	}
}
