package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/controller/alert"
	"github.com/sluice-dev/sluice/controller/store/kubestore"
	"github.com/sluice-dev/sluice/internal/kubetest"
)

// redeliveries is, per alert id, how many times a leader died after the
// id reached the sink and before the delivery was recorded in the
// cluster: the at-least-once window, the only one in which the next
// leader may send the id again.
type redeliveries map[string]int

// noteDeath records the ids in that window for a leader that is dead
// (its process exited) and whose successor has not started: those the
// sink received that the ConfigMap's outbox does not list as delivered.
func (r redeliveries) noteDeath(t *testing.T, h *haRig) {
	t.Helper()
	// A request the leader sent whole before it died is still handled:
	// let the sink record it.
	time.Sleep(200 * time.Millisecond)
	for _, id := range h.unrecordedIDs() {
		r[id]++
		t.Logf("alert %s reached the sink but was not recorded as delivered when the leader died: it may come again", id)
	}
}

// unrecordedIDs is the ids the sink received that the outbox in the
// cluster does not list as delivered.
func (h *haRig) unrecordedIDs() []string {
	h.t.Helper()
	delivered := h.deliveredIDs()
	h.hook.mu.Lock()
	defer h.hook.mu.Unlock()
	var ids []string
	for _, a := range h.hook.got {
		if !delivered[a.ID] && !slices.Contains(ids, a.ID) {
			ids = append(ids, a.ID)
		}
	}
	return ids
}

// clusterOutbox is what the test reads of the outbox sluice keeps in the
// ConfigMap sluice-state (outbox.json, docs/kubernetes.md): the alerts
// still owed to some sink, and per sink the ids delivered.
type clusterOutbox struct {
	Alerts map[string]struct {
		Pending []string `json:"pending"`
	} `json:"alerts"`
	Delivered map[string]map[string]time.Time `json:"delivered"`
}

func (h *haRig) outbox() clusterOutbox {
	h.t.Helper()
	cm, err := h.c.Client.CoreV1().ConfigMaps(h.ns).Get(ctxFor(h.t, 10*time.Second), kubestore.StateConfigMap, metav1.GetOptions{})
	if err != nil {
		h.t.Fatalf("read the outbox: %v", err)
	}
	var o clusterOutbox
	if err := json.Unmarshal([]byte(cm.Data["outbox.json"]), &o); err != nil {
		h.t.Fatalf("ConfigMap %s/%s outbox.json: %v", h.ns, kubestore.StateConfigMap, err)
	}
	return o
}

// deliveredIDs is every id the outbox in the cluster lists as delivered,
// to any sink.
func (h *haRig) deliveredIDs() map[string]bool {
	ids := map[string]bool{}
	for _, bySink := range h.outbox().Delivered {
		for id := range bySink {
			ids[id] = true
		}
	}
	return ids
}

// pendingIDs is every id the outbox in the cluster still owes a sink.
func (h *haRig) pendingIDs() []string {
	var ids []string
	for id, a := range h.outbox().Alerts {
		if len(a.Pending) > 0 {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// checkHAAlerts: each canary's started and completed alerts arrived, no
// logical event arrived under two ids, and no id arrived twice except
// once more for each leader that died with it delivered but not recorded
// as delivered (again).
func checkHAAlerts(t *testing.T, hook *sink, key string, commits []string, again redeliveries) {
	t.Helper()
	want := map[string]bool{}
	for _, commit := range commits {
		want[alert.ID(key, commit, "started")] = true
		want[alert.ID(key, commit, "completed")] = true
	}
	var got []received
	kubetest.Eventually(t, 30*time.Second, "every expected alert delivered", func() (bool, string) {
		hook.mu.Lock()
		got = slices.Clone(hook.got)
		hook.mu.Unlock()
		missing := maps.Clone(want)
		for _, a := range got {
			delete(missing, a.ID)
		}
		return len(missing) == 0, fmt.Sprintf("missing %v", slices.Sorted(maps.Keys(missing)))
	})
	// A redelivery may still be on its way: give it the time to arrive.
	time.Sleep(2 * time.Second)
	hook.mu.Lock()
	got = slices.Clone(hook.got)
	hook.mu.Unlock()
	idsOf := map[string]map[string]bool{}
	deliveries := map[string]int{}
	for _, r := range got {
		deliveries[r.ID]++
		k := logicalEvent(r.Alert)
		if idsOf[k] == nil {
			idsOf[k] = map[string]bool{}
		}
		idsOf[k][r.ID] = true
	}
	for k, ids := range idsOf {
		if len(ids) > 1 {
			t.Errorf("one event under %d ids: %s: %v", len(ids), k, slices.Sorted(maps.Keys(ids)))
		}
	}
	repeated := 0
	for _, id := range slices.Sorted(maps.Keys(deliveries)) {
		n := deliveries[id]
		repeated += n - 1
		if n-1 > again[id] {
			t.Errorf("alert %s delivered %d times; a leader died %d times between its delivery and its record", id, n, again[id])
		}
	}
	t.Logf("alerts: %d distinct ids, %d repeated deliveries (%d ids were in a dead leader's at-least-once window)", len(deliveries), repeated, len(again))
}
