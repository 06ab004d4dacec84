package kube

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/kubetest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/flowcontrol"
)

// TestScheduledEventsPerPodThenSummarized: binds get a Scheduled event
// each until the per-pod event budget is spent; the binds above it are
// told in Scheduled events regarding their ReplicaSet that count them,
// so the events add up to every bind. A pod without a controller always
// gets its own. Read from the apiserver's events.
func TestScheduledEventsPerPodThenSummarized(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	ctx := context.Background()
	b, err := New(Options{Client: c.Client})
	if err != nil {
		t.Fatal(err)
	}
	b.scheduled.limiter = flowcontrol.NewTokenBucketRateLimiter(0.001, 2) // two per-pod events, then none for the test's span
	runBinder(t, c.Client, b)

	rs := createReplicaSet(t, c.Client, ns, "burst", 5, podTemplate(DefaultSchedulerName, "100m", rolloutLabels("burst", "h1")))
	kubetest.Eventually(t, 60*time.Second, "2 per-pod Scheduled events and summaries of 3 binds on the ReplicaSet", func() (bool, string) {
		perPod, summarized, state := scheduledEventsIn(t, ns, rs.Name)
		return perPod == 2 && summarized == 3, state
	})

	tmpl := podTemplate(DefaultSchedulerName, "100m", map[string]string{"app": "bare"})
	bare, err := c.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bare", Namespace: ns, Labels: tmpl.Labels}, Spec: tmpl.Spec}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 60*time.Second, "the bare pod's own Scheduled event", func() (bool, string) {
		evs, err := c.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs.Items {
			if e.Reason == "Scheduled" && e.Regarding.Kind == "Pod" && e.Regarding.Name == bare.Name && strings.HasPrefix(e.Note, "Successfully assigned "+ns+"/bare to ") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events, none for the bare pod", len(evs.Items))
	})
	if perPod, summarized, state := scheduledEventsIn(t, ns, rs.Name); perPod != 3 || summarized != 3 {
		t.Errorf("after the bare pod: %s; want 3 per-pod events (2 of the ReplicaSet, the bare pod's) and 3 binds summarized", state)
	}
}

// scheduledEventsIn counts sluice's Scheduled events of ns: those
// regarding a pod, and the binds counted by those regarding ReplicaSet
// rs (each must name one of its pods as related).
func scheduledEventsIn(t *testing.T, ns, rs string) (perPod, summarized int, state string) {
	t.Helper()
	evs, err := kubetest.Shared(t).Client.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return 0, 0, err.Error()
	}
	var notes []string
	for _, e := range evs.Items {
		if e.Reason != "Scheduled" || e.ReportingController != FieldManager {
			continue
		}
		notes = append(notes, e.Regarding.Kind+" "+e.Regarding.Name+": "+e.Note)
		switch {
		case e.Regarding.Kind == "Pod":
			perPod++
		case e.Regarding.Kind == "ReplicaSet" && e.Regarding.Name == rs && e.Related != nil && e.Related.Kind == "Pod" && strings.HasPrefix(e.Related.Name, rs+"-"):
			var n int
			if _, err := fmt.Sscanf(e.Note, "Successfully assigned %d pods of ReplicaSet", &n); err != nil {
				t.Errorf("summary note %q: %v", e.Note, err)
			}
			summarized += n
		}
	}
	return perPod, summarized, fmt.Sprintf("%d per-pod, %d binds summarized: %s", perPod, summarized, strings.Join(notes, "; "))
}
