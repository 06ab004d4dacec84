package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/sluice-dev/sluice/controller/store/kubestore/v1alpha1"
)

// rolloutRecord is one write of a rollout's SluiceRollout as a watch saw
// it: who wrote it, under which epoch, and the position it declares.
type rolloutRecord struct {
	at                         time.Time // when the watch delivered it
	writer                     string
	epoch                      int32
	phase                      string
	step                       int32
	stable, canary             string
	stableWeight, canaryWeight int32
}

func (r rolloutRecord) String() string {
	return fmt.Sprintf("%s step %d %s %d%%/%s %d%% by %s@%d", r.phase, r.step, r.stable, r.stableWeight, r.canary, r.canaryWeight, r.writer, r.epoch)
}

// served is the versions the record routes traffic to: a side with
// weight 0 gets none (the gateway leaves it out of the default route).
func (r rolloutRecord) served() []string {
	var vs []string
	if r.stableWeight > 0 && r.stable != "" {
		vs = append(vs, r.stable)
	}
	if r.canaryWeight > 0 && r.canary != "" {
		vs = append(vs, r.canary)
	}
	return vs
}

// recordLog is every write of one rollout's state in the cluster, read
// from outside sluice: the leader writes the record before it publishes
// the traffic the record asks for, and followers serve what the record
// says, so the records are the timeline of what any client may be routed
// to.
type recordLog struct {
	mu      sync.Mutex
	records []rolloutRecord
}

// watchRecords follows the SluiceRollout ns/name until the test ends.
func watchRecords(t *testing.T, dyn dynamic.Interface, ns, name string) *recordLog {
	t.Helper()
	l := &recordLog{}
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, ns, func(lo *metav1.ListOptions) {
		lo.FieldSelector = "metadata.name=" + name
	})
	inf := factory.ForResource(v1alpha1.GroupVersionResource).Informer()
	add := func(obj any) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		var sr v1alpha1.SluiceRollout
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &sr); err != nil {
			t.Errorf("SluiceRollout %s/%s: %v", ns, name, err)
			return
		}
		s := sr.Status
		if len(s.Record) == 0 {
			return // created, not written yet
		}
		l.mu.Lock()
		l.records = append(l.records, rolloutRecord{at: time.Now(), writer: s.Writer, epoch: s.LeaderEpoch, phase: s.Phase, step: s.StepIndex,
			stable: s.StableVersion, canary: s.CanaryVersion, stableWeight: s.StableWeight, canaryWeight: s.CanaryWeight})
		l.mu.Unlock()
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: add, UpdateFunc: func(_, obj any) { add(obj) }}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	t.Cleanup(func() { cancel(); factory.Shutdown() })
	syncCtx, synced := context.WithTimeout(ctx, 30*time.Second)
	defer synced()
	if !cache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced) {
		t.Fatalf("watch SluiceRollout %s/%s: not synced within 30s", ns, name)
	}
	return l
}

func (l *recordLog) all() []rolloutRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.records)
}

// servedDuring is every version some record in force between from and to
// routed traffic to: the record last written before from, and every one
// written up to to.
func servedDuring(records []rolloutRecord, from, to time.Time) map[string]bool {
	out := map[string]bool{}
	for i, r := range records {
		if r.at.After(to) {
			break
		}
		if i+1 < len(records) && !records[i+1].at.After(from) {
			continue // replaced before from
		}
		for _, v := range r.served() {
			out[v] = true
		}
	}
	return out
}
