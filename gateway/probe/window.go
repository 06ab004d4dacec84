package probe

import (
	"sync"
	"time"
)

// windowSlots is how many buckets a sliding window is cut into: enough that
// the window slides smoothly, few enough that summing is cheap.
const windowSlots = 20

// window counts events by key over the last span of time, in fixed
// buckets. It is safe for concurrent use.
type window[K comparable] struct {
	mu    sync.Mutex
	width time.Duration // one bucket
	slots [windowSlots]slot[K]
	// since is the last reset: events that started before it belong to
	// what the reset meant to forget, even when they end after it.
	since time.Time
}

type slot[K comparable] struct {
	index  int64 // which bucket of time this slot holds; stale when older
	counts map[K]int
}

func newWindow[K comparable](span time.Duration) *window[K] {
	w := span / windowSlots
	if w <= 0 {
		w = time.Millisecond
	}
	return &window[K]{width: w}
}

// add counts one event for k at time now.
func (w *window[K]) add(now time.Time, k K) { w.addStarted(now, now, k) }

// addStarted counts one event for k that started at started and ended at
// now; an event that started before the last reset is not counted.
func (w *window[K]) addStarted(started, now time.Time, k K) {
	idx := now.UnixNano() / int64(w.width)
	w.mu.Lock()
	defer w.mu.Unlock()
	if started.Before(w.since) {
		return
	}
	s := &w.slots[idx%windowSlots]
	if s.index != idx || s.counts == nil {
		s.index = idx
		s.counts = map[K]int{}
	}
	s.counts[k]++
}

// sum returns the counts of the last span ending at now.
func (w *window[K]) sum(now time.Time) map[K]int {
	idx := now.UnixNano() / int64(w.width)
	out := map[K]int{}
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range w.slots {
		s := &w.slots[i]
		if s.counts == nil || s.index <= idx-windowSlots || s.index > idx {
			continue
		}
		for k, n := range s.counts {
			out[k] += n
		}
	}
	return out
}

// reset forgets everything, and every event that started before now.
func (w *window[K]) reset(now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.slots = [windowSlots]slot[K]{}
	w.since = now
}
