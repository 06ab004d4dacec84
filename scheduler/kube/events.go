package kube

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/flowcontrol"
)

// Per-pod Scheduled events: up to scheduledEventsBurst at once, then
// scheduledEventsPerSecond. A 20-pod canary gets one event per pod, as
// kube-scheduler writes them; a burst of thousands of binds does not
// write thousands of events, each an apiserver write (with a lease) as
// costly as the bind itself. The binds above the rate are told in one
// event per ReplicaSet every summarizeEvery (a 2,000-pod burst over 20
// ReplicaSets bound in 13 s wrote 260 summaries when they came every
// second).
const (
	scheduledEventsBurst     = 100
	scheduledEventsPerSecond = 20
	summarizeEvery           = 5 * time.Second
)

// scheduledEvents writes the Normal/Scheduled events of successful binds.
type scheduledEvents struct {
	recorder events.EventRecorder
	limiter  flowcontrol.RateLimiter // per-pod events

	mu     sync.Mutex
	untold map[string]*untoldBinds // binds without an event, by untoldKey
}

// untoldBinds are the binds of one controller's pods (or of one
// namespace's pods without a controller) that got no event of their own.
type untoldBinds struct {
	owner   *corev1.ObjectReference // nil: pods without a controller
	pods    int
	lastPod corev1.ObjectReference
	node    string // where lastPod went
}

func newScheduledEvents(recorder events.EventRecorder) *scheduledEvents {
	return &scheduledEvents{
		recorder: recorder,
		limiter:  flowcontrol.NewTokenBucketRateLimiter(scheduledEventsPerSecond, scheduledEventsBurst),
		untold:   map[string]*untoldBinds{},
	}
}

// bound records that pod was bound to node: an event regarding the pod
// when the rate allows, else a count for the summary of its controller
// (or of its namespace's pods without one).
func (s *scheduledEvents) bound(pod *corev1.Pod, node string) {
	if s.limiter.TryAccept() {
		s.recorder.Eventf(pod, nil, corev1.EventTypeNormal, "Scheduled", "Binding", "Successfully assigned %s to %s", podKey(pod), node)
		return
	}
	owner := metav1.GetControllerOf(pod)
	key := "namespace " + pod.Namespace
	if owner != nil {
		key = string(owner.UID)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.untold[key]
	if u == nil {
		u = &untoldBinds{}
		if owner != nil {
			u.owner = &corev1.ObjectReference{APIVersion: owner.APIVersion, Kind: owner.Kind, Namespace: pod.Namespace, Name: owner.Name, UID: owner.UID}
		}
		s.untold[key] = u
	}
	u.pods++
	u.lastPod = corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}
	u.node = node
}

// summarizeEvery writes, every summarizeEvery until ctx ends, the
// summaries of the binds that got no event of their own.
func (s *scheduledEvents) summarizeEvery(ctx context.Context) {
	t := time.NewTicker(summarizeEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.summarize()
		}
	}
}

// summarize writes the summaries owed: regarding the controller, with its
// last pod bound as the related object, or, for pods without a
// controller, regarding the last of them. Either way each summary's
// regarding and related objects differ from the last one's:
// events.k8s.io groups events with the same ones into a series whose
// later notes are dropped, and every summary's count must be told.
func (s *scheduledEvents) summarize() {
	s.mu.Lock()
	untold := s.untold
	s.untold = map[string]*untoldBinds{}
	s.mu.Unlock()
	const note = "Successfully assigned %d pods %s without an event each (more than %d binds a second); the last, %s/%s, to %s"
	for _, u := range untold {
		last := &u.lastPod
		if u.owner == nil {
			s.recorder.Eventf(last, nil, corev1.EventTypeNormal, "Scheduled", "Binding", note,
				u.pods, "without a controller in namespace "+last.Namespace, scheduledEventsPerSecond, last.Namespace, last.Name, u.node)
			continue
		}
		s.recorder.Eventf(u.owner, last, corev1.EventTypeNormal, "Scheduled", "Binding", note,
			u.pods, "of "+u.owner.Kind+" "+u.owner.Namespace+"/"+u.owner.Name, scheduledEventsPerSecond, last.Namespace, last.Name, u.node)
	}
}
