package kube

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
	untold map[types.UID]*untoldBinds // binds without an event, by controller
}

// untoldBinds are one controller's binds that got no event of their own.
type untoldBinds struct {
	owner   corev1.ObjectReference
	pods    int
	lastPod corev1.ObjectReference
	node    string // where lastPod went
}

func newScheduledEvents(recorder events.EventRecorder) *scheduledEvents {
	return &scheduledEvents{
		recorder: recorder,
		limiter:  flowcontrol.NewTokenBucketRateLimiter(scheduledEventsPerSecond, scheduledEventsBurst),
		untold:   map[types.UID]*untoldBinds{},
	}
}

// bound records that pod was bound to node: an event regarding the pod
// when the rate allows (always for a pod without a controller: there is
// nothing else to tell it on), else a count for its controller's summary.
func (s *scheduledEvents) bound(pod *corev1.Pod, node string) {
	owner := metav1.GetControllerOf(pod)
	if owner == nil || s.limiter.TryAccept() {
		s.recorder.Eventf(pod, nil, corev1.EventTypeNormal, "Scheduled", "Binding", "Successfully assigned %s to %s", podKey(pod), node)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.untold[owner.UID]
	if u == nil {
		u = &untoldBinds{owner: corev1.ObjectReference{
			APIVersion: owner.APIVersion, Kind: owner.Kind, Namespace: pod.Namespace, Name: owner.Name, UID: owner.UID,
		}}
		s.untold[owner.UID] = u
	}
	u.pods++
	u.lastPod = corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}
	u.node = node
}

// summarizeEvery writes, every summarizeEvery until ctx ends, one event
// per controller whose binds got no event of their own.
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

// summarize writes the summaries owed. Each names its last pod as the
// related object: events.k8s.io groups events with the same regarding
// and related objects into a series whose later notes are dropped, and
// every summary's count must be told.
func (s *scheduledEvents) summarize() {
	s.mu.Lock()
	untold := s.untold
	s.untold = map[types.UID]*untoldBinds{}
	s.mu.Unlock()
	for _, u := range untold {
		s.recorder.Eventf(&u.owner, &u.lastPod, corev1.EventTypeNormal, "Scheduled", "Binding",
			"Successfully assigned %d pods of %s %s/%s, each without an event of its own (more than %d binds a second), the last %s/%s to %s",
			u.pods, u.owner.Kind, u.owner.Namespace, u.owner.Name, scheduledEventsPerSecond, u.lastPod.Namespace, u.lastPod.Name, u.node)
	}
}
