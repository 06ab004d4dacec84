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
// told in Scheduled events that count them, regarding their ReplicaSet
// (a pod without a controller: regarding itself), so the events add up
// to every bind. Read from the apiserver's events.
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
		s := scheduledEventsIn(t, ns, rs.Name)
		return s.perPod == 2 && s.ofReplicaSet == 3, s.notes
	})

	tmpl := podTemplate(DefaultSchedulerName, "100m", map[string]string{"app": "bare"})
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bare", Namespace: ns, Labels: tmpl.Labels}, Spec: tmpl.Spec}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 60*time.Second, "a summary of 1 bind regarding the pod without a controller", func() (bool, string) {
		s := scheduledEventsIn(t, ns, rs.Name)
		return s.ofBarePod == 1, s.notes
	})
	if s := scheduledEventsIn(t, ns, rs.Name); s.perPod != 2 || s.ofReplicaSet != 3 {
		t.Errorf("after the bare pod: %s; want still 2 per-pod events and 3 binds summarized on the ReplicaSet", s.notes)
	}
}

// scheduledSummary counts sluice's Scheduled events of a namespace.
type scheduledSummary struct {
	perPod       int // "Successfully assigned ns/pod to node"
	ofReplicaSet int // binds counted by summaries regarding the ReplicaSet, its pod related
	ofBarePod    int // binds counted by summaries regarding the pod "bare"
	notes        string
}

func scheduledEventsIn(t *testing.T, ns, rs string) scheduledSummary {
	t.Helper()
	evs, err := kubetest.Shared(t).Client.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return scheduledSummary{notes: err.Error()}
	}
	var s scheduledSummary
	var notes []string
	for _, e := range evs.Items {
		if e.Reason != "Scheduled" || e.ReportingController != FieldManager {
			continue
		}
		notes = append(notes, e.Regarding.Kind+" "+e.Regarding.Name+": "+e.Note)
		var n int
		_, scanErr := fmt.Sscanf(e.Note, "Successfully assigned %d pods", &n)
		switch {
		case e.Regarding.Kind == "Pod" && scanErr != nil && strings.HasPrefix(e.Note, "Successfully assigned "+ns+"/"):
			s.perPod++
		case e.Regarding.Kind == "ReplicaSet" && e.Regarding.Name == rs && e.Related != nil && e.Related.Kind == "Pod" && strings.HasPrefix(e.Related.Name, rs+"-") &&
			strings.Contains(e.Note, " pods of ReplicaSet "+ns+"/"+rs+" "):
			s.ofReplicaSet += n
		case e.Regarding.Kind == "Pod" && e.Regarding.Name == "bare" && strings.Contains(e.Note, " pods without a controller in namespace "+ns+" "):
			s.ofBarePod += n
		}
	}
	s.notes = fmt.Sprintf("%d per-pod, %d binds summarized on the ReplicaSet, %d on the bare pod: %s", s.perPod, s.ofReplicaSet, s.ofBarePod, strings.Join(notes, "; "))
	return s
}
